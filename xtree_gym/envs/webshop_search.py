"""BM25 product search for the WebShop environment (``bm25s`` + Snowball stemming).

The original indexes, per product, ``title + description + first bullet + option text``
(lower-cased) with Pyserini/Lucene (English analyzer, BM25 k1=0.9, b=0.4) and shows the top 50
hits. This module indexes the same text with `bm25s <https://github.com/xhluca/bm25s>`_ --
a maintained, pure-Python/NumPy BM25 with Lucene's scoring variant -- using an analyzer close
to Lucene's English one: word tokens (keeping ``l'eau`` and ``6.76`` whole), the possessive
``'s`` removed, Lucene's 33 English stop words dropped, Snowball (Porter2) stems from PyStemmer.
Only documents sharing at least one term with the query are hits (as in Lucene); ties keep
catalogue order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import missing_dependency
from .webshop_data import Product

SEARCH_RETURN_N = 50  # hits kept per query, as in the original
K1, B = 0.9, 0.4  # Pyserini's LuceneSearcher defaults

# Lucene's English stop set (also bm25s' STOPWORDS_EN).
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
_TOKEN = re.compile(r"\w+(?:['’.]\w+)*")


def document_text(p: Product) -> str:
    """The indexed text of one product: title, description, first bullet, options (lower case)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in p.options.items())
    first_bullet = p.bullet_points[0] if p.bullet_points else ""
    return " ".join([p.title, p.description, first_bullet, option_text]).lower()


class ProductSearch:
    """BM25 index over a catalogue; :meth:`search` returns product indices, best first.

    Example:
        >>> from xtree_gym.envs.webshop_data import Product
        >>> def item(asin, title):
        ...     return Product(asin, title, "$1.0", (1.0,), {}, [""], "", [], "c", "q", "a › b")
        >>> s = ProductSearch([item("A1", "red running shoes"), item("A2", "blue hat"), item("A3", "shoe rack")])
        >>> s.search("Running shoe")
        [0, 2]
        >>> s.search("nothing matches")
        []
    """

    def __init__(self, products: Sequence[Product]) -> None:
        try:
            import bm25s
            import Stemmer
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise missing_dependency(exc.name or "bm25s", "webshop", "XTree-WebShop-v0 search") from None
        self._stemmer = Stemmer.Stemmer("english")
        self._stems: dict[str, str] = {}  # word -> stem, filled at index time; queries add theirs
        docs = [self._words(document_text(p)) for p in products]
        self._stem_all({w for d in docs for w in d})
        self._vocab: dict[str, int] = {"": 0}  # stem -> column; "" keeps empty documents indexable
        ids = [[self._vocab.setdefault(self._stems[w], len(self._vocab)) for w in d] or [0] for d in docs]
        self._retriever: Any = bm25s.BM25(k1=K1, b=B, method="lucene")
        self._retriever.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self._vocab), show_progress=False)
        self.n_docs = len(products)

    def _stem_all(self, words: set[str]) -> None:
        new = sorted(w for w in words if w not in self._stems)
        self._stems.update(zip(new, self._stemmer.stemWords(new)))

    @staticmethod
    def _words(text: str) -> list[str]:
        words = []
        for tok in _TOKEN.findall(text.lower()):
            tok = tok.replace("’", "'")
            if tok.endswith("'s"):
                tok = tok[:-2]
            if tok and tok not in STOPWORDS:
                words.append(tok)
        return words

    def analyze(self, text: str) -> list[str]:
        """Lower-case word tokens, possessive removed, stop words dropped, stemmed."""
        words = self._words(text)
        if len(self._stems) > 200_000:  # bound the query-word cache of a long-lived process
            self._stems.clear()
        self._stem_all(set(words))
        return [self._stems[w] for w in words]

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Indices (catalogue order) of the ``k`` best products with a positive score."""
        ids = [self._vocab[t] for t in self.analyze(query) if t and t in self._vocab]
        if not ids:
            return []
        scores = np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float64)
        hits = np.flatnonzero(scores > 0)
        # sort by score descending, then catalogue index ascending (Lucene's tie order)
        order = hits[np.lexsort((hits, -scores[hits]))]
        return [int(i) for i in order[:k]]
