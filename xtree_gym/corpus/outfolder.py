"""Output folders: made with one clear error, and never written through a link planted inside them.

A command that writes files of its own naming into a folder (``xtree plot-run -o DIR``, ``xtree plot``,
``xtree train ... -o RUN``, ``xtree eval -o DIR``, ``xtree demo --out DIR``) runs its writes inside
:func:`output_folder`. Meanwhile every write through :func:`~xtree_gym.corpus.io.output_target` (so every
atomic and append writer of the toolkit) into that folder refuses a destination that is a symlink, or
that lies under a symlinked sub-folder: such a link was planted there, and following it would write
another file (another run's ``metrics.jsonl`` turned into a PNG). A path the user names himself
(``xtree mine -o link.json``) is still followed: the user chose it.

The folder itself may be a link the user named (``-o current -> runs/7``): only what lies below it
is checked.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_FOLDERS: list[tuple[str, str]] = []  # (output folder, the option that named it) of the running command


def make_output_folder(folder: str | os.PathLike[str], *, option: str = "-o") -> list[Path]:
    """Create ``folder`` (and missing parents); returns the folders this call created, outermost first.

    One :class:`~xtree_gym.errors.ConfigError` naming the path when it cannot be a folder: a file, a
    link that loops or leads nowhere, a file on the way.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> [p.name for p in make_output_folder(d / "a" / "b")], make_output_folder(d / "a")
        (['a', 'b'], [])
        >>> os.symlink("loop", d / "loop")
        >>> make_output_folder(d / "loop")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: cannot write into output folder '...loop' (-o): it is a link that loops (...) -- fix: ...
    """
    p = Path(folder)
    made: list[Path] = []
    for _ in range(100):  # a folder on the way removed meanwhile (a refused run taking back its own): again
        made += _make_missing(p, option)
        if p.is_dir():
            return made
        if _first_non_folder(p) is not None:
            break
    raise _folder_error(p, p, option, None)


def _make_missing(p: Path, option: str) -> list[Path]:
    """Make the missing folders on the way to ``p``; returns those this call made, outermost first."""
    missing: list[Path] = []
    for q in (p, *p.parents):
        if os.path.lexists(q) or str(q) in ("", "."):
            break
        missing.append(q)
    made: list[Path] = []
    for q in reversed(missing):
        try:
            os.mkdir(q)
            made.append(q)
        except FileExistsError:  # made meanwhile by another writer: not ours to remove
            pass
        except FileNotFoundError:  # its parent was removed meanwhile
            return made
        except OSError as exc:
            raise _folder_error(q, p, option, exc) from None
    return made


def _folder_error(where: Path, folder: Path, option: str, exc: OSError | None) -> Exception:
    """The one error for ``folder`` that cannot be made a folder (``where``: the path that failed)."""
    from ..errors import ConfigError

    if exc is not None and exc.errno not in (errno.ENOTDIR, errno.EEXIST, errno.ELOOP):
        return OSError(
            exc.errno, exc.strerror, str(where)
        )  # permission, read-only, disk full: as the OS says
    fix = f"pass a folder with {option} (it is created if missing)"
    head = f"cannot write into output folder {str(folder)!r} ({option}): it"
    bad = _first_non_folder(folder)
    if bad is None:  # gone again meanwhile
        return ConfigError(f"{head} could not be made", fix=fix)
    if bad == folder and not os.path.islink(bad):
        return ConfigError(f"{head} is a file", fix=fix)
    if os.path.islink(bad):
        why = (
            "loops (too many levels of symbolic links)"
            if _loops(bad)
            else f"leads nowhere (to {os.readlink(bad)!r}, which is missing)"
            if not os.path.lexists(os.path.realpath(bad))
            else "leads to a file"
        )
        what = f"is a link that {why}" if bad == folder else f"lies under {str(bad)!r}, a link that {why}"
    else:
        what = f"lies under {str(bad)!r}, which is a file"
    return ConfigError(f"{head} {what}", fix=fix)


def _first_non_folder(folder: Path) -> Path | None:
    """The outermost path on the way to ``folder`` that exists but is not a folder (a file, a bad link)."""
    for q in (*reversed(folder.parents), folder):
        if os.path.lexists(q) and not os.path.isdir(q):
            return q
    return None


def _loops(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


@contextmanager
def output_folder(folder: str | os.PathLike[str] | None, *, option: str = "-o") -> Iterator[None]:
    """While the block runs, a write into ``folder`` never goes through a link found there (see module doc).

    ``None``: nothing to watch (a rank that does not write).

    Example:
        >>> import tempfile, pathlib
        >>> from xtree_gym.corpus.io import atomic_write_bytes
        >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "other.jsonl").write_text("{}\\n")
        >>> (d / "out").mkdir(); os.symlink(d / "other.jsonl", d / "out" / "curves.png")
        >>> with output_folder(d / "out"):
        ...     atomic_write_bytes(d / "out" / "curves.png", b"png")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: '...curves.png' is a link (to '...other.jsonl') in the output folder ...
        >>> (d / "other.jsonl").read_text()
        '{}\\n'
    """
    if folder is None:
        yield
        return
    item = (str(folder), option)
    _FOLDERS.append(item)
    try:
        yield
    finally:
        _FOLDERS.remove(item)


def refuse_planted_link(path: str | os.PathLike[str]) -> None:
    """Raise one :class:`~xtree_gym.errors.ConfigError` when ``path`` lies in an output folder being
    written (:func:`output_folder`) and it, or a sub-folder on the way to it, is a link."""
    for folder, option in _FOLDERS:
        link = planted_link(path, folder)
        if link is None:
            continue
        from ..errors import ConfigError

        raise ConfigError(
            f"{str(link)!r} is a link (to {os.readlink(link)!r}) in the output folder {folder!r} ({option}); "
            "xtree writes its own files there and does not write through a link it finds in their place",
            fix=f"remove that link (its target is left as it is), or use another {option} folder",
        )


def planted_link(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path | None:
    """The first link on the way from ``folder`` (excluded) down to ``path`` (included), if ``path`` lies
    in ``folder``; else None.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "real").mkdir(); os.symlink(d / "real", d / "sub")
        >>> planted_link(d / "sub" / "x.json", d).name, planted_link(d / "real" / "x.json", d)
        ('sub', None)
        >>> planted_link(d / "sub" / "x.json", d / "sub") is None   # the folder itself: named by the user
        True
    """
    rel = _relative(Path(path), Path(folder))
    if rel is None:
        return None
    base, parts = rel
    for part in parts:
        base = base / part
        if os.path.islink(base):
            return base
    return None


def _relative(path: Path, folder: Path) -> tuple[Path, tuple[str, ...]] | None:
    """``(base, parts)``: ``path`` is ``base/parts...`` with ``base`` the folder (as written, or resolved)."""
    for base, shown, target in (
        (Path(os.path.abspath(folder)), folder, Path(os.path.abspath(path))),
        (Path(os.path.realpath(folder)), None, Path(os.path.realpath(path.parent)) / path.name),
    ):
        try:
            parts = target.relative_to(base).parts
        except ValueError:
            continue
        if parts and ".." not in parts:
            return shown or base, parts
    return None
