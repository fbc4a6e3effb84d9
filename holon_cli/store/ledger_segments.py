"""The closed segments of a segmented ledger, on disk.

Names and numbering (``segments/<stem>.<NNNNNNNN>.jsonl``, numbered upwards,
``.jsonl.gz`` once compressed: the ``.gz`` wins where both exist), the
compression of a closed segment (temp file, fsync, rename, mtime kept, the
plain file removed last), reading one closed segment, and the small files
beside them: the copy of the closed tail (``<stem>.<N>.tail``), the newest
closed record (``<stem>.last``) and what retention dropped
(``<stem>.trimmed``). When a segment is closed is ``store/ledger.py``'s,
how readers walk history ``store/ledger_history.py``'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

from holon_cli.errors import CorruptStateError
from holon_cli.store.fsio import PRIVATE_FILE_MODE, dumps, fsync_dir
from holon_cli.store.ledger_lines import _checked, _complete, _corrupt, _parse
from holon_cli.store.records import Validator

# the folder beside a segmented ledger's open file that holds its closed segments
SEGMENTS_DIR = "segments"
# a copy of the closed tail capped by its byte budget starts with a header
# line holding this key (no record of the ledger's kind)
COPY_HEADER = "tail_copy_capped"


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def segment_number(name: str, stem: str) -> int | None:
    """``N`` of ``<stem>.N.jsonl`` or ``<stem>.N.jsonl.gz`` (else ``None``)."""
    if not name.startswith(stem + "."):
        return None
    rest = name[len(stem) + 1 :]
    for suffix in (".jsonl.gz", ".jsonl"):
        if rest.endswith(suffix):
            num = rest[: -len(suffix)]
            return int(num) if num.isdigit() else None
    return None


def closed_segments(seg_dir: Path, stem: str) -> list[Path]:
    """Closed segments of ``stem`` in ``seg_dir``, oldest first; where a
    segment exists both plain and compressed the ``.gz`` (complete: it is
    renamed into place only after its fsync) stands for it."""
    try:
        names = os.listdir(seg_dir)
    except FileNotFoundError:
        return []
    found: dict[int, Path] = {}
    for name in names:
        n = segment_number(name, stem)
        if n is None:
            continue
        if n not in found or name.endswith(".gz"):
            found[n] = seg_dir / name
    return [found[n] for n in sorted(found)]


def next_segment_number(seg_dir: Path, stem: str) -> int:
    nums = [segment_number(n, stem) for n in os.listdir(seg_dir)]
    trimmed = read_trimmed(seg_dir, stem) or {}
    last = max([n for n in nums if n is not None] + [int(trimmed.get("last_segment") or 0)])
    return last + 1


def compress_segment(path: Path) -> Path:
    """``path`` compressed to ``path.gz`` (temp file, fsync, rename, mtime
    kept, then the plain file removed); returns the segment's path after."""
    import gzip

    if path.suffix == ".gz":
        return path
    gz = path.with_name(path.name + ".gz")
    try:
        st = path.stat()
    except FileNotFoundError:  # another process compressed it first
        return gz
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(path, "rb") as src, open(tmp, "wb") as raw:
            os.fchmod(raw.fileno(), PRIVATE_FILE_MODE)
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as z:
                while chunk := src.read(1 << 20):
                    z.write(chunk)
            raw.flush()
            os.fsync(raw.fileno())
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, gz)
        fsync_dir(path.parent)
        path.unlink(missing_ok=True)
        fsync_dir(path.parent)
    except FileNotFoundError:
        tmp.unlink(missing_ok=True)
        return gz if gz.exists() else path
    return gz


def segment_damaged(path: Path, exc: BaseException) -> CorruptStateError:
    """A closed segment that cannot be decompressed (cut, not gzip, a bad
    checksum): named, with what to do. Never ``EOFError`` (click reads that
    as an abort: "Aborted.", exit 130) nor a bare ``OSError``."""
    why = f"closed segment cannot be read ({exc or exc.__class__.__name__})"
    if isinstance(exc, EOFError):
        why = "closed segment cannot be read: it is cut short (the compressed stream ends early)"
    return CorruptStateError(
        f"{path}: {why}",
        hint="`holon home check --repair` keeps what can be read of it and sets the damaged "
        "file aside (run `holon home check` for the full report)",
        details={"path": str(path), "line": None, "reason": why},
    )


class SegmentFile:
    """A closed segment open for reading whose decompression errors are
    :class:`CorruptStateError` naming the file (iterate it, ``readline``,
    ``read``; a context manager)."""

    def __init__(self, path: Path, f: Any) -> None:
        self.path = path
        self.f = f

    def __enter__(self) -> SegmentFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()

    def close(self) -> None:
        self.f.close()

    def _call(self, fn: Any, *args: Any) -> Any:
        import zlib

        try:
            return fn(*args)
        except (EOFError, zlib.error) as exc:
            raise segment_damaged(self.path, exc) from None
        except OSError as exc:  # gzip.BadGzipFile, a CRC or length mismatch
            if exc.errno is not None:
                raise
            raise segment_damaged(self.path, exc) from None

    def readline(self, *args: Any) -> bytes:
        return bytes(self._call(self.f.readline, *args))

    def read(self, *args: Any) -> bytes:
        return bytes(self._call(self.f.read, *args))

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line


def open_segment(path: Path) -> SegmentFile:
    """A closed segment opened for binary reading (plain or gzip); a plain
    segment compressed meanwhile is opened as its ``.gz``."""
    import gzip

    if path.suffix != ".gz":
        try:
            return SegmentFile(path, open(path, "rb"))
        except FileNotFoundError:
            path = path.with_name(path.name + ".gz")
    return SegmentFile(path, gzip.open(path, "rb"))


def iter_segment(
    path: Path, max_version: int, validate: Validator | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line_no, record)`` of a closed segment (whole lines only: a closed
    segment never grows; a damaged line is corruption naming the segment)."""
    with open_segment(path) as f:
        line_no = 0
        for line_no, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                rec = _complete(raw, max_version)
                if rec is None:  # a closed segment never grows: its end was cut
                    raise _corrupt(path, line_no, 0, "the last line is cut short")
                yield line_no, _checked(path, line_no, 0, rec, validate)
                return
            if raw.strip() == b"":
                raise _corrupt(path, line_no, 0, "empty line")
            yield line_no, _parse(path, raw, line_no, 0, max_version, validate)
        if line_no == 0:
            raise segment_damaged(path, EMPTY)


class _Empty(Exception):
    def __str__(self) -> str:
        return "it holds no record; a closed segment always holds one"


EMPTY = _Empty()


def segment_path(seg_dir: Path, stem: str, num: int) -> Path:
    """Closed segment ``num`` before its compression (``.gz`` appended after)."""
    return seg_dir / f"{stem}.{num:08d}.jsonl"


def tail_path(seg_dir: Path, stem: str, num: int) -> Path:
    """The last ``TAIL_CACHE_RECORDS`` records of all closed history, written
    as segment ``num`` closed (only the newest closed segment keeps one)."""
    return seg_dir / f"{stem}.{num:08d}.tail"


def last_path(seg_dir: Path, stem: str) -> Path:
    """The last record of the newest closed segment (written as it closes)."""
    return seg_dir / f"{stem}.last"


def trimmed_path(seg_dir: Path, stem: str) -> Path:
    return seg_dir / f"{stem}.trimmed"


class Trimmed(TypedDict, total=False):
    """``segments/<stem>.trimmed``: what retention dropped (``through_seq``:
    the highest sequence number dropped, numbered ledgers only; ``before``:
    the time of the newest record dropped)."""

    v: int
    segments: int
    bytes: int
    through_seq: int | None
    before: str | None
    last_segment: int


def read_trimmed(seg_dir: Path, stem: str) -> Trimmed | None:
    """The note, or ``None`` (none, or unreadable: it only says where history starts)."""
    from holon_cli.model.typed import CheckError, check

    try:
        return check(json.loads(trimmed_path(seg_dir, stem).read_bytes()), Trimmed)
    except (FileNotFoundError, ValueError, UnicodeDecodeError, CheckError):
        return None


def write_trimmed(seg_dir: Path, stem: str, info: Trimmed) -> None:
    from holon_cli.store.fsio import atomic_write_bytes

    atomic_write_bytes(trimmed_path(seg_dir, stem), (dumps({"v": 1, **info}) + "\n").encode())


def _whole_tail(path: Path, n: int, budget: int) -> tuple[list[bytes], bool, int]:
    """The last ``n`` whole lines of ``path`` within ``budget`` bytes, as
    written; whether the budget cut them short; the bytes read."""
    from holon_cli.store.ledger_tail import scan_tail

    lines, used = scan_tail(path, n, budget, budget)
    out: list[bytes] = []
    for ln in reversed(lines):
        if ln.size > len(ln.raw):
            return out[::-1], True, used  # one line past the budget: older ones too
        if ln.terminated:
            out.append(ln.raw)
    try:
        whole_file = used >= path.stat().st_size
    except FileNotFoundError:
        whole_file = True
    return out[::-1], len(out) < n and not whole_file, used
