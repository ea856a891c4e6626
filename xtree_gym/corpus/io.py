"""Small file helpers shared by every writer: atomic writes and transparent gzip."""

from __future__ import annotations

import errno
import gzip
import io
import json
import math
import os
import re
import signal
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

from .outfolder import refuse_planted_link

if TYPE_CHECKING:
    from ..errors import XTreeError


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[str]]:
    """Open ``path`` for writing text so that readers never see a half-written file.

    The text goes to a temporary file in the same folder, which replaces ``path`` only when
    the block ends without error (``os.replace`` is atomic on POSIX). A ``.gz`` suffix writes
    gzip with a fixed mtime, so equal text gives byte-identical files.
    """
    if mode not in ("w", "wt"):
        raise ValueError(f"atomic_open writes text only, got mode {mode!r}")
    target = output_target(path)
    if _is_special(target):  # a device or FIFO: written to in place, never renamed over
        with (
            _named_errors(target),
            open(target, "wb") as raw,
            io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as text,
        ):
            yield text
        return
    fd, tmp = _temp_beside(target)
    try:
        with _named_errors(target), os.fdopen(fd, "wb") as raw:
            if target.suffix == ".gz":
                with (
                    gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
                    io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as text,
                ):
                    yield text
            else:
                with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as text:
                    yield text
                    text.flush()
                    os.fsync(raw.fileno())
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(target)) from None
    except UnicodeEncodeError as exc:  # a lone surrogate that slipped past the readers
        _remove(tmp)
        from ..errors import CorpusError

        raise CorpusError(
            f"cannot write {str(target)!r}: the text holds a lone surrogate "
            f"({exc.object[exc.start : exc.end]!r}), which UTF-8 cannot encode",
            fix="drop or repair that string (a lone surrogate is half of a broken emoji escape)",
        ) from None
    except BaseException:
        _remove(tmp)
        raise
    finally:
        _LIVE_TEMPS.discard(tmp)


def output_target(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` changes: a symlink is followed (the link stays, its target is written).

    Not in an output folder being written (:func:`~xtree_gym.corpus.outfolder.output_folder`): there a
    link where xtree writes one of its own files is refused, never followed. A socket or a block device is refused with one :class:`~xtree_gym.errors.ConfigError`; a
    character device (``/dev/null``) or a FIFO is returned as is and written to in place, never
    replaced by a rename (a temp + rename would turn ``-o /dev/null`` into a regular file).

    Example:
        >>> import tempfile, os, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> os.symlink(d / "real.json", d / "link.json")
        >>> atomic_write_bytes(d / "link.json", b"{}")
        >>> os.path.islink(d / "link.json"), (d / "real.json").read_bytes()
        (True, b'{}')
        >>> atomic_write_bytes("/dev/null", b"gone"); stat.S_ISCHR(os.stat("/dev/null").st_mode)
        True
    """
    _refuse_protected(path)
    refuse_planted_link(path)
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return target
    if stat.S_ISSOCK(mode) or stat.S_ISBLK(mode):
        from ..errors import ConfigError

        kind = "a socket" if stat.S_ISSOCK(mode) else "a block device"
        raise ConfigError(
            f"output {str(path)!r} is {kind}; xtree writes regular files, character devices and FIFOs only",
            fix="pass the path of a regular file",
        )
    return target


def _is_special(target: Path) -> bool:
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


@contextmanager
def _named_errors(target: Path) -> Iterator[None]:
    """Re-raise a write's nameless OSError (disk full, file too large, quota) naming the output file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        raise


def _temp_beside(target: Path) -> tuple[int, str]:
    """A registered temp file in ``target``'s folder, with the usual permissions: ``(fd, name)``."""
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale_temps(target)
        # The pid in the name lets a later run tell a dead writer's debris from a live write.
        fd, tmp = tempfile.mkstemp(
            prefix=f"{_temp_prefix(target)}{os.getpid()}.", suffix=".tmp", dir=target.parent
        )
    except OSError as exc:  # name the output the user chose, not the temp file beside it
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    _LIVE_TEMPS.add(tmp)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
    except OSError as exc:  # sysfs, procfs and some FUSE mounts: say which output failed, not the temp
        os.close(fd)
        _remove(tmp)
        _LIVE_TEMPS.discard(tmp)
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    return fd, tmp


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (same temp-file rules as :func:`atomic_open`).

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> atomic_write_bytes(p, b"ok"); open(p, "rb").read()
        b'ok'
    """
    target = output_target(path)
    if _is_special(target):
        with _named_errors(target), open(target, "wb") as fh:
            fh.write(data)
        return
    fd, tmp = _temp_beside(target)
    try:
        with _named_errors(target), os.fdopen(fd, "wb") as raw:
            raw.write(data)
            raw.flush()
            os.fsync(raw.fileno())
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(target)) from None
    except BaseException:
        _remove(tmp)
        raise
    finally:
        _LIVE_TEMPS.discard(tmp)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(text)


def open_bytes(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a file for reading bytes, decompressing ``.gz`` transparently (readers decode per line)."""
    p = Path(path)
    if p.suffix == ".gz":
        return cast(IO[bytes], gzip.open(p, "rb"))
    return open(p, "rb")


MAX_LINE_BYTES = int(os.environ.get("XTREE_MAX_LINE_BYTES", 64 << 20))
"""Longest line a JSONL reader takes (``XTREE_MAX_LINE_BYTES`` changes it): a longer one is
refused after reading that much (64 MiB by default), so a ``.gz`` that expands to GBs without a newline cannot take GBs."""


CUT_MARKER = " ...[cut by xtree: {n} characters dropped so the record fits one line]"
"""Put where :func:`fit_json_line` cut a string (``{n}``: how many characters went)."""


def fit_json_line(record: Any, limit: int | None = None) -> tuple[str, int]:
    """``(line, cuts)``: ``record`` as one JSON line (newline included) that the readers take -- at most
    ``limit`` bytes (:data:`MAX_LINE_BYTES`) -- and how many strings were cut to get there.

    A record too big is not written unreadable: every string longer than a common cap (found by
    bisection, so as much text as fits is kept) is cut and ends in :data:`CUT_MARKER`. A record that
    cannot fit even with every string cut is one :class:`ValueError`.

    Example:
        >>> line, cuts = fit_json_line({"steps": [{"observation": "x" * 500}, {"action": "go"}]}, limit=200)
        >>> cuts, len(line.encode()) <= 200, line.endswith("\\n"), "[cut by xtree:" in line
        (1, True, True, True)
        >>> fit_json_line({"a": 1}, limit=200)
        ('{"a": 1}\\n', 0)
    """
    cap = limit or MAX_LINE_BYTES

    def dumped(obj: Any) -> tuple[str, bool]:
        text = json.dumps(obj, ensure_ascii=False) + "\n"
        return text, len(text.encode("utf-8")) <= cap

    line, fits = dumped(record)
    if fits:
        return line, 0
    lo, hi, best = 0, _longest_string(record), None
    while lo <= hi:  # the largest per-string cap at which the line fits
        mid = (lo + hi) // 2
        cuts = [0]
        text, fits = dumped(_capped(record, mid, cuts))
        if fits:
            best, lo = (text, cuts[0]), mid + 1
        else:
            hi = mid - 1
    if best is None:
        raise ValueError(
            f"a record of {len(line.encode('utf-8'))} bytes cannot be cut to fit a {cap}-byte line"
        )
    return best


def _longest_string(record: Any) -> int:
    if isinstance(record, str):
        return len(record)
    if isinstance(record, dict):
        return max((_longest_string(v) for v in record.values()), default=0)
    if isinstance(record, list):
        return max((_longest_string(v) for v in record), default=0)
    return 0


def _capped(record: Any, limit: int, cuts: list[int]) -> Any:
    """A copy of ``record`` whose strings longer than ``limit`` characters are cut there, with the marker."""
    if isinstance(record, str):
        if len(record) <= limit + 100:  # a cut must shrink the string: the marker itself takes ~80
            return record
        cuts[0] += 1
        return record[:limit] + CUT_MARKER.format(n=len(record) - limit)
    if isinstance(record, dict):
        return {k: _capped(v, limit, cuts) for k, v in record.items()}
    if isinstance(record, list):
        return [_capped(v, limit, cuts) for v in record]
    return record


def bounded_lines(fh: IO[bytes], limit: int | None = None) -> Iterator[bytes]:
    """The lines of ``fh`` (newline kept), refusing one longer than ``limit`` bytes with a :class:`JSONProblem`
    (its ``lineno`` set) before more than ``limit`` bytes of it are held.

    Example:
        >>> list(bounded_lines(io.BytesIO(b"ab\\ncd"), limit=4))
        [b'ab\\n', b'cd']
        >>> list(bounded_lines(io.BytesIO(b"ok\\n" + b"\\0" * 10), limit=4))
        Traceback (most recent call last):
        xtree_gym.corpus.io.JSONProblem: line longer than 4 bytes (a corrupt or decompression-bomb file?)
    """
    cap = limit or MAX_LINE_BYTES
    lineno = 0
    while True:
        line = fh.readline(cap + 1)
        if not line:
            return
        lineno += 1
        if len(line) > cap and not (len(line) == cap + 1 and line.endswith(b"\n")):
            raise JSONProblem(f"line longer than {cap} bytes (a corrupt or decompression-bomb file?)", lineno)
        yield line


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a text file for reading, decompressing ``.gz`` transparently."""
    p = Path(path)
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8")
    return open(p, encoding="utf-8")


# -- temp files: never leave debris ------------------------------------------------------------------
_LIVE_TEMPS: set[str] = set()  # temps of atomic writes in progress in this process
_TEMP_RE = re.compile(r"\.(\d+)\.[A-Za-z0-9_]+\.tmp$")  # ".<pid>.<random>.tmp" after the prefix


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def _remove(tmp: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(tmp)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def sweep_stale_temps(target: str | os.PathLike[str]) -> list[str]:
    """Remove the temps that killed writers of ``target`` left (``.NAME.<pid>.<random>.tmp``, pid dead).

    A write killed by SIGKILL or a power cut cannot clean up after itself; the next write of the
    same file does. Temps of a writer that still runs, and files of any other naming, are kept.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / ".t.json.999999999.abc123.tmp").write_text("half")   # no such pid
        >>> _ = (d / ".t.json.notours.tmp").write_text("keep")
        >>> [pathlib.Path(p).name for p in sweep_stale_temps(d / "t.json")]
        ['.t.json.999999999.abc123.tmp']
        >>> sorted(p.name for p in d.iterdir())
        ['.t.json.notours.tmp']
    """
    target = Path(target)
    prefix = _temp_prefix(target)
    removed: list[str] = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        m = _TEMP_RE.fullmatch(name[len(prefix) - 1 :])
        if m is None or _pid_alive(int(m.group(1))):
            continue
        path = str(target.parent / name)
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return sorted(removed)


def install_cleanup_handlers() -> None:
    """Make SIGTERM and SIGHUP unwind the stack (as Ctrl-C does), so an interrupted write removes its temp.

    Called by the ``xtree`` command; a library user's own handlers are left alone (only the
    default disposition is replaced), and it does nothing outside the main thread.
    """

    def _unwind(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _unwind)
        except ValueError:  # not the main thread
            return


# -- outputs never replace inputs ---------------------------------------------------------------------
def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: equal real paths, or the same inode (a hard link).

    Example:
        >>> import tempfile, pathlib, os
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "c.jsonl").write_text("x")
        >>> os.link(d / "c.jsonl", d / "h.jsonl")
        >>> same_file(d / "c.jsonl", d / "sub" / ".." / "c.jsonl"), same_file(d / "c.jsonl", d / "h.jsonl")
        (True, True)
        >>> same_file(d / "c.jsonl", d / "new.jsonl")
        False
    """
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def refuse_overwrite(
    output: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None],
    *,
    option: str = "-o",
    error: type[XTreeError] | None = None,
) -> None:
    """Raise one clear error when ``output`` resolves to one of ``inputs`` (``..``, symlinks, hard links).

    Every ``xtree`` command that writes calls this before reading anything, so no run can replace
    the file it reads with what it made of it.

    Example:
        >>> refuse_overwrite("out/tree.json", ["corpus.jsonl"])   # different files: fine
        >>> refuse_overwrite("./c.jsonl", ["c.jsonl"])
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: output './c.jsonl' (-o) is the input file 'c.jsonl'; writing it would destroy the input -- fix: write to a different path with -o
    """
    from ..errors import ConfigError

    for inp in inputs:
        if inp is None:
            continue
        if same_file(output, inp):
            err = error or ConfigError
            raise err(
                f"output {str(output)!r} ({option}) is the input file {str(inp)!r}; writing it would destroy the input",
                fix=f"write to a different path with {option}",
            )


_PROTECTED: list[tuple[str, str]] = []  # (input path, the option that named it) of the running command


@contextmanager
def protect_inputs(inputs: Iterable[str | os.PathLike[str] | None], *, option: str = "-o") -> Iterator[None]:
    """While the block runs, every write through :func:`output_target` (so every atomic writer and
    append writer of the toolkit) refuses a path that is -- or links to -- one of ``inputs``.

    This is the one "an output is never an input" rule for writers whose outputs are not one named
    path: a folder of PNGs, a run folder, an evaluation folder (a symlink planted there is caught).

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "metrics.jsonl").write_text("{}\\n"); os.symlink(d / "metrics.jsonl", d / "curves.png")
        >>> with protect_inputs([d / "metrics.jsonl"]):
        ...     atomic_write_bytes(d / "curves.png", b"png")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: output '...curves.png' (-o) is the input file '...metrics.jsonl'; ...
        >>> (d / "metrics.jsonl").read_text()
        '{}\\n'
    """
    added = [(str(p), option) for p in inputs if p is not None]
    _PROTECTED.extend(added)
    try:
        yield
    finally:
        for item in added:
            _PROTECTED.remove(item)


def _refuse_protected(output: str | os.PathLike[str]) -> None:
    for inp, option in _PROTECTED:
        refuse_overwrite(output, [inp], option=option)


# -- strict JSON: one clear problem instead of RecursionError, NaN or an unencodable surrogate ---------
MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects accepted in a record (real records nest fewer than 10 levels)."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_HUGE_EXPONENT = re.compile(r"\d[eE]\+?\d{3}")  # 1e400 parses to inf without NaN/Infinity in the text


class JSONProblem(ValueError):
    """Text that is not acceptable JSON for xtree_gym; ``str()`` says why (and the line, if multi-line)."""

    def __init__(self, problem: str, lineno: int | None = None) -> None:
        self.problem = problem
        self.lineno = lineno
        super().__init__(problem)


def _reject_constant(name: str) -> float:
    raise JSONProblem(f"{name} is not a number JSON allows (NaN/Infinity would skew every count and rate)")


def _finite_float(text: str) -> float:
    x = float(text)
    if math.isinf(x):
        raise JSONProblem(f"{text} overflows to infinity (NaN/Infinity would skew every count and rate)")
    return x


def _depth_exceeds(obj: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, dict)):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, (list, dict)))
    return False


def _lone_surrogate(obj: Any) -> str | None:
    """The first string (key or value) holding a lone surrogate, if any."""
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return node
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def loads_strict(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses what would crash or skew later stages, with one :class:`JSONProblem`.

    Refused: invalid JSON (the message names the column), ``NaN``/``Infinity``, nesting deeper than
    ``max_depth`` (``json`` itself raises RecursionError at ~1,000 levels, and deep values break
    every writer), and lone surrogate escapes such as ``"\\ud83d"`` (valid JSON that UTF-8 cannot
    encode, so the first write of the record would fail). The checks beyond ``json.loads`` run only
    when a cheap scan of the text says they could fire.

    Example:
        >>> loads_strict('{"a": [1, 2.5, "\\\\ud83d\\\\ude00"]}')
        {'a': [1, 2.5, '😀']}
        >>> for bad in ('{"r": NaN}', '[1e400]', '[' * 200 + ']' * 200, '"\\\\ud83d"', '{"a": '):
        ...     try:
        ...         loads_strict(bad)
        ...     except JSONProblem as exc:
        ...         print(exc)
        NaN is not a number JSON allows (NaN/Infinity would skew every count and rate)
        1e400 overflows to infinity (NaN/Infinity would skew every count and rate)
        nested deeper than 100 levels
        lone surrogate escape in '\\ud83d' (UTF-8 cannot encode it)
        not valid JSON (Expecting value at column 7)
    """
    parse_float = _finite_float if _HUGE_EXPONENT.search(text) else None
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=parse_float)
    except json.JSONDecodeError as exc:
        raise JSONProblem(
            f"not valid JSON ({exc.msg} at column {exc.colno})"
            if exc.lineno == 1
            else f"not valid JSON ({exc.msg})",
            exc.lineno,
        ) from None
    except RecursionError:
        raise JSONProblem(f"nested deeper than {max_depth} levels") from None
    except JSONProblem:
        raise
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise JSONProblem(f"not valid JSON ({exc})") from None
    if text.count("[") + text.count("{") > max_depth and _depth_exceeds(obj, max_depth):
        raise JSONProblem(f"nested deeper than {max_depth} levels")
    if ("\\u" in text or "\\U" in text) and _SURROGATE_ESCAPE.search(text):
        bad = _lone_surrogate(obj)
        if bad is not None:
            shown = bad if len(bad) <= 40 else bad[:37] + "..."
            raise JSONProblem(f"lone surrogate escape in {shown!r} (UTF-8 cannot encode it)")
    return obj


def finite_number(x: Any) -> bool:
    """Whether ``x`` is an int or a float that a float can hold finitely (not a bool).

    Example:
        >>> finite_number(1), finite_number(0.5), finite_number(float("nan")), finite_number(True)
        (True, True, False, False)
        >>> finite_number(10**400)   # an int, but float(x) would overflow
        False
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    if isinstance(x, int):
        return -sys.float_info.max <= x <= sys.float_info.max  # exact int/float comparison, no overflow
    return math.isfinite(x)


# -- inputs: say what is wrong with the path -------------------------------------------------------------
def input_problem(path: str | os.PathLike[str], what: str = "file") -> str | None:
    """Why ``path`` cannot be read as an input file, or None when it can (a directory is called one).

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> input_problem(d, "corpus file").endswith("is a directory, not a corpus file")
        True
        >>> input_problem(d + "/nope.jsonl", "corpus file").endswith("does not exist")
        True
    """
    p = Path(path)
    if p.is_dir():
        return f"{what} {str(p)!r} is a directory, not a {what}"
    if not p.exists():
        return f"{what} {str(p)!r} does not exist"
    if not p.is_file():
        return f"{what} {str(p)!r} is not a regular file"
    return None


# -- JSON-lines record files (SFT rows, node instances): one writer, one strict reader ---------------------
T = TypeVar("T")


def write_records(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> int:
    """Write dicts as sorted-key JSON lines, atomically; returns how many were written.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "r.jsonl")
        >>> write_records(p, [{"b": 1, "a": "é"}]), open(p, encoding="utf-8").read()
        (1, '{"a": "é", "b": 1}\\n')
    """
    n = 0
    with atomic_open(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


def read_records(
    path: str | os.PathLike[str], build: Callable[[Any], T], *, what: str, fix: str, allow_empty: bool = True
) -> list[T]:
    """Read a JSON-lines file with :func:`loads_strict`, one ``build(obj)`` per non-blank line.

    A missing path, a directory, a bad line (``file:line`` named) or, unless ``allow_empty``, a file
    without records is one :class:`~xtree_gym.errors.CorpusError` whose fix is ``fix``.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "r.jsonl")
        >>> _ = write_records(p, [{"x": 1}, {"x": 2}])
        >>> read_records(p, lambda d: d["x"], what="row file", fix="write it again")
        [1, 2]
    """
    from ..errors import CorpusError

    problem = input_problem(path, what)
    if problem:
        raise CorpusError(problem, fix=fix)
    out: list[T] = []
    lineno = 0
    try:
        with open_bytes(path) as fh:
            for lineno, raw in enumerate(bounded_lines(fh), start=1):
                if not raw.strip():
                    continue
                try:
                    out.append(build(loads_strict(raw.decode("utf-8"))))
                except (ValueError, TypeError, KeyError) as exc:
                    raise CorpusError(str(exc), where=f"{path}:{lineno}", fix=fix) from None
    except JSONProblem as exc:  # a line past MAX_LINE_BYTES
        raise CorpusError(str(exc), where=f"{path}:{lineno + 1}", fix=fix) from None
    except (EOFError, OSError) as exc:  # a truncated or fake .gz
        raise CorpusError(
            f"cannot read the file ({type(exc).__name__}: {exc})", where=str(path), fix=fix
        ) from None
    if not out and not allow_empty:
        raise CorpusError(f"{what} {str(path)!r} has no records", fix=fix)
    return out
