"""Append-only JSONL ledgers.

Each record is one line of UTF-8 JSON carrying ``v`` (format version). An
append serializes the whole record, takes the ledger's lock, cuts off a torn
tail left by a killed writer, issues exactly one ``os.write``, checks the
count and fsyncs before returning: when ``append`` returns, the record is
durable. Readers never lock: a last line without its newline is a write in
progress (or a torn tail) and is ignored, unless it parses as a complete
record (some editors drop the final newline): then it is a record, and the
next append adds the missing newline instead of cutting it off. Any other
unreadable line is corruption, reported with the file and line.

Every ledger keeps a mark in a sidecar (``events.mark`` next to
``events.jsonl``), rewritten in place under the ledger's lock by every append:
the size the file had after it and, for a ledger numbered by a sequence key
(``events``: ``event_seq``), the highest number written. A file shorter than
its mark was cut, emptied or replaced by an older copy (``holon home check``
says so; a torn tail left by a killed writer makes a file *longer*), and a
number once written is never handed out again (the numbers then jump;
clients resuming from their last id skip nothing new). The sidecar is not
fsync'd: a killed process loses nothing the kernel holds, and the ledger
itself stays the truth for everything it still has.

Segments (``events`` and ``transcript``: ``Ledger.segment_bytes`` set): an
append that finds the open file at or over ``segment_bytes`` first closes it
(under the same lock: the mark is reset to size 0, keeping its high-water
number, *then* the file is renamed to ``segments/<stem>.<NNNNNNNN>.jsonl``,
numbered upwards); ``close_segment`` does the same on demand (``holon home
gc``). A closed segment is then compressed to ``.jsonl.gz`` (temp file,
fsync, rename, the plain file removed last, its mtime kept: the time of its
last record), so a kill anywhere leaves a readable plain segment or a
complete ``.gz`` (both: the ``.gz`` wins and gc removes the plain one).
Readers that need history (``records``, ``records_after``, ``tail`` of more
records than the open file holds, ``records_skipping_damaged``) read closed
segments oldest first, then the open file. Retention drops whole closed
segments only (``store/retention.py``) and records what it dropped in
``segments/<stem>.trimmed`` so readers can say where history starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from holon_cli.errors import CorruptStateError
from holon_cli.store.fsio import PRIVATE_FILE_MODE, deferred, dumps, fsync_dir, fsync_file
from holon_cli.store.locks import locked
from holon_cli.store.records import Validator

LEDGER_VERSION = 1
TAIL_CACHE_RECORDS = 256
# a record longer than this is read as a preview by Ledger.tail_previews
PREVIEW_RECORD_BYTES = 64 * 1024
# the copy of the closed tail holds at most this many bytes (1 MB records:
# fewer than TAIL_CACHE_RECORDS); a capped copy starts with a header line
# holding COPY_HEADER, and a longer tail() reads the segments themselves
TAIL_COPY_BYTES = 4 * 1024 * 1024
COPY_HEADER = "tail_copy_capped"
# an open segment this big is closed by the next append (segmented ledgers)
SEGMENT_BYTES = 8 * 1024 * 1024
SEGMENTS_DIR = "segments"
# the sidecar is one line of this many bytes, overwritten in place
MARK_WIDTH = 80


class Problem(NamedTuple):
    path: str
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message}


def _corrupt(path: Path, line: int | None, offset: int, why: str) -> CorruptStateError:
    where = f"{path}:{line}" if line is not None else f"{path} (byte {offset})"
    return CorruptStateError(
        f"corrupt ledger record at {where}: {why}",
        hint=(
            "run `holon home check` for a full report; move the damaged line aside to a "
            "backup, then retry"
        ),
        details={"path": str(path), "line": line, "offset": offset, "reason": why},
    )


def _complete(raw: bytes, max_version: int) -> dict[str, Any] | None:
    """A final line without its newline that is nevertheless a whole record
    (a JSON object with an integer ``v`` we understand); else ``None``. A torn
    prefix of a record can never parse as a JSON object, so this is safe."""
    if not raw.strip():
        return None
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict):
        return None
    v = rec.get("v")
    if not isinstance(v, int) or isinstance(v, bool) or v > max_version:
        return None
    return rec


def _parse(
    path: Path,
    raw: bytes,
    line: int | None,
    offset: int,
    max_version: int,
    validate: Validator | None = None,
) -> dict[str, Any]:
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _corrupt(path, line, offset, f"not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(rec, dict):
        raise _corrupt(path, line, offset, "record is not a JSON object")
    v = rec.get("v")
    if not isinstance(v, int):
        raise _corrupt(path, line, offset, "record has no integer format version `v`")
    if v > max_version:
        where = f"{path}:{line}" if line is not None else f"{path} (byte {offset})"
        raise CorruptStateError(
            (
                f"{where}: record format v{v} is newer than this holon understands (max "
                f"v{max_version})"
            ),
            hint="upgrade holon-cli to read this home",
            details={
                "path": str(path),
                "line": line,
                "reason": (
                    f"record format v{v} is newer than this holon understands (max v{max_version})"
                ),
            },
        )
    if validate is not None:
        reason = validate(rec)
        if reason:
            raise _corrupt(path, line, offset, reason)
    return rec


def mark_path_of(path: Path) -> Path:
    return path.with_name(path.stem + ".mark")


def read_mark(path: Path) -> dict[str, int] | str | None:
    """A ledger's mark (``{"size": N}`` plus ``"high_water"`` for a numbered
    ledger), ``None`` when there is none, or a string saying why it cannot be
    read (damage: ``home check`` reports it, ``--repair`` rewrites it)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return parse_mark(raw)


def parse_mark(raw: bytes) -> dict[str, int] | str:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "not valid JSON"
    if not isinstance(obj, dict):
        return "not a JSON object"
    out: dict[str, int] = {}
    for key in ("size", "high_water"):
        v = obj.get(key)
        if v is None and key == "high_water":
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return f"no non-negative integer `{key}`"
        out[key] = v
    return out


def _mark_bytes(size: int, high_water: int | None) -> bytes:
    obj: dict[str, int] = {"v": 1, "size": int(size)}
    if high_water is not None:
        obj["high_water"] = int(high_water)
    return json.dumps(obj).encode().ljust(MARK_WIDTH - 1) + b"\n"


def open_mark(path: Path) -> tuple[int, bool]:
    """The mark's fd (read-write, created when missing) and whether it was new."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    return fd, os.fstat(fd).st_size == 0


def put_mark(fd: int, path: Path, created: bool, size: int, high_water: int | None) -> None:
    """Overwrite the mark in place with one fixed-width line (one ``pwrite``:
    a reader sees the old or the new line, never a mix)."""
    data = _mark_bytes(size, high_water)
    os.pwrite(fd, data, 0)
    if created:
        if not deferred(path):
            os.fsync(fd)
            fsync_dir(path.parent)
    elif os.fstat(fd).st_size > len(data):
        os.ftruncate(fd, len(data))


def write_mark(path: Path, size: int, high_water: int | None = None) -> None:
    fd, created = open_mark(path)
    try:
        put_mark(fd, path, created, size, high_water)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- segments


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


def open_segment(path: Path) -> Any:
    """A closed segment opened for binary reading (plain or gzip); a plain
    segment compressed meanwhile is opened as its ``.gz``."""
    import gzip

    if path.suffix != ".gz":
        try:
            return open(path, "rb")
        except FileNotFoundError:
            path = path.with_name(path.name + ".gz")
    return gzip.open(path, "rb")


def iter_segment(
    path: Path, max_version: int, validate: Validator | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_no, record)`` of a closed segment (whole lines only: a closed
    segment never grows; a damaged line is corruption naming the segment)."""
    with open_segment(path) as f:
        for line_no, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                rec = _complete(raw, max_version)
                if rec is not None:
                    yield line_no, rec
                return
            if raw.strip() == b"":
                raise _corrupt(path, line_no, 0, "empty line")
            yield line_no, _parse(path, raw, line_no, 0, max_version, validate)


def tail_path(seg_dir: Path, stem: str, num: int) -> Path:
    """The last ``TAIL_CACHE_RECORDS`` records of all closed history, written
    as segment ``num`` closed (only the newest closed segment keeps one)."""
    return seg_dir / f"{stem}.{num:08d}.tail"


def last_path(seg_dir: Path, stem: str) -> Path:
    """The last record of the newest closed segment (written as it closes)."""
    return seg_dir / f"{stem}.last"


def trimmed_path(seg_dir: Path, stem: str) -> Path:
    return seg_dir / f"{stem}.trimmed"


def read_trimmed(seg_dir: Path, stem: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(trimmed_path(seg_dir, stem).read_bytes())
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def write_trimmed(seg_dir: Path, stem: str, info: dict[str, Any]) -> None:
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


class Ledger:
    def __init__(
        self,
        path: Path,
        lock_path: Path,
        *,
        max_version: int = LEDGER_VERSION,
        validate: Validator | None = None,
        seq_key: str | None = None,
    ) -> None:
        self.path = path
        # the record field numbered from a high-water mark kept in mark_path
        self.seq_key = seq_key
        self.mark_path = mark_path_of(path)
        self.lock_path = lock_path
        self.max_version = max_version
        # the record kind's schema check (store/records.py): a record that is
        # valid JSON with wrong fields is corruption, named by file and line
        self.validate = validate
        self._cached_size = -1
        self._cached_last: dict[str, Any] | None = None
        # byte offset where the last record this handle appended starts
        self.last_append_offset = 0
        # (end offset, records, capacity, inode) of the last tail window
        self._tail_cache: tuple[int, list[dict[str, Any]], int, int | None] | None = None
        # when set, appends skip their fsync until sync() (a caller batching
        # several appends into one durable step, e.g. one turn round)
        self.defer_sync = False
        self._unsynced = False
        # segmented ledgers: close the open file at this size (None: one file)
        self.segment_bytes: int | None = None
        # (number of the newest closed segment, its copy of the closed tail,
        # whether that copy was capped by TAIL_COPY_BYTES)
        self._closed_cache: tuple[int | None, list[dict[str, Any]], bool] | None = None
        # (size, inode, arguments) of the last tail_previews call and its records
        self._preview_cache: tuple[tuple[Any, ...], list[dict[str, Any]]] | None = None

    # -- writing ---------------------------------------------------------
    def _repair_tail(self, fd: int) -> int:
        """Cut a torn last line off; return the (new) size."""
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        if os.pread(fd, 1, size - 1) == b"\n":
            return size
        # Find the end of the last complete line.
        pos = size
        keep = 0
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fragment = os.pread(fd, size - keep, keep)
        if _complete(fragment, self.max_version) is not None:
            # a whole record that only lacks its newline: finish it, keep it
            os.write(fd, b"\n")
            os.fsync(fd)
            return size + 1
        try:  # keep the fragment for forensics; never needed for correctness
            with open(
                os.open(str(self.path) + ".torn", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
                "ab",
            ) as f:
                f.write(fragment + b"\n")
        except OSError:
            pass
        os.ftruncate(fd, keep)
        os.fsync(fd)
        return keep

    def append(
        self, record: dict[str, Any] | Callable[[dict[str, Any] | None], dict[str, Any]]
    ) -> dict[str, Any]:
        """Durably append one record. ``record`` may be a function of the last record
        (called under the lock), which is how sequence numbers are assigned."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        closed: Path | None = None
        with locked(self.lock_path, what=f"ledger {self.path.name}"):
            if self.segment_bytes is not None and self.size() >= self.segment_bytes:
                closed = self._close_locked()
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            mark_fd = -1
            try:
                size = self._repair_tail(fd)
                if callable(record):
                    last = self._last_from_fd(fd, size)
                    rec = record(last)
                else:
                    rec = record
                mark_fd, mark_new = open_mark(self.mark_path)
                if self.seq_key is not None:
                    self._above_high_water(rec, mark_fd)
                rec.setdefault("v", LEDGER_VERSION)
                data = (dumps(rec) + "\n").encode("utf-8")
                self.last_append_offset = size
                n = os.write(fd, data)
                if n != len(data):
                    raise CorruptStateError(
                        f"short write to {self.path} ({n} of {len(data)} bytes)",
                        hint=(
                            "check free disk space; the partial line is repaired on the next append"
                        ),
                    )
                if self.defer_sync:
                    self._unsynced = True
                elif not deferred(self.path):
                    os.fsync(fd)
                self._cached_size = size + n
                self._cached_last = rec
                seq = rec.get(self.seq_key) if self.seq_key is not None else None
                high = seq if isinstance(seq, int) else None
                put_mark(mark_fd, self.mark_path, mark_new, size + n, high)
            finally:
                os.close(fd)
                if mark_fd >= 0:
                    os.close(mark_fd)
            if created:
                fsync_dir(self.path.parent)
        if closed is not None:
            compress_segment(closed)
        return rec

    # -- segments --------------------------------------------------------
    @property
    def segments_dir(self) -> Path:
        return self.path.parent / SEGMENTS_DIR

    def closed_segments(self) -> list[Path]:
        """The closed segments, oldest first (a ``.gz`` where both exist)."""
        return closed_segments(self.segments_dir, self.path.stem)

    def close_segment(self) -> Path | None:
        """Close the open file as a segment now (nothing when it is empty) and
        compress it; the closed segment's path, or ``None``."""
        if not self.path.exists():
            return None
        with locked(self.lock_path, what=f"ledger {self.path.name}"):
            closed = self._close_locked()
        if closed is not None:
            closed = compress_segment(closed)
        return closed

    def _close_locked(self) -> Path | None:
        """Rename the open file into ``segments/`` (the caller holds the lock).
        The mark goes to size 0 first, keeping the high-water number: a kill
        between the two leaves a file longer than its mark (normal), never a
        shorter one (which would read as a cut)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return None
        if size == 0:
            return None
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:  # a torn tail is set aside, as before an append
            keep = self._repair_tail(fd)
        finally:
            os.close(fd)
        if keep == 0:
            return None
        mark = read_mark(self.mark_path)
        high = mark.get("high_water") if isinstance(mark, dict) else None
        last = self._last_open()
        if self.seq_key is not None:
            # a writer killed between its record and its mark left the mark
            # one behind: the numbers go on above both
            seq = last.get(self.seq_key) if last else None
            if isinstance(seq, int) and not isinstance(seq, bool):
                high = seq if high is None else max(high, seq)
        seg_dir = self.segments_dir
        seg_dir.mkdir(exist_ok=True)
        num = next_segment_number(seg_dir, self.path.stem)
        if last is not None:  # last() and tail() of an empty open file answer from here
            from holon_cli.store.fsio import atomic_write_bytes

            atomic_write_bytes(tail_path(seg_dir, self.path.stem, num), self._tail_copy())
            for old in seg_dir.glob(f"{self.path.stem}.*.tail"):  # only the newest is read
                if old.name != tail_path(seg_dir, self.path.stem, num).name:
                    old.unlink(missing_ok=True)
            atomic_write_bytes(last_path(seg_dir, self.path.stem), (dumps(last) + "\n").encode())
        write_mark(self.mark_path, 0, high)
        dest = seg_dir / f"{self.path.stem}.{num:08d}.jsonl"
        os.rename(self.path, dest)
        fsync_dir(seg_dir)
        fsync_dir(self.path.parent)
        self._cached_size = -1
        self._cached_last = None
        self._tail_cache = None
        self._closed_cache = None
        return dest

    def trimmed(self) -> dict[str, Any] | None:
        """What retention dropped from this ledger (``None``: nothing):
        ``{"through_seq", "before", "segments", "bytes"}`` (``through_seq``:
        the highest sequence number dropped, numbered ledgers only; ``before``:
        the time of the newest record dropped)."""
        return read_trimmed(self.segments_dir, self.path.stem)

    def _closed_records(self, seg: Path) -> list[dict[str, Any]]:
        return [rec for _, rec in iter_segment(seg, self.max_version, self.validate)]

    def _above_high_water(self, rec: dict[str, Any], mark_fd: int) -> None:
        """Number ``rec`` above every number this ledger ever wrote."""
        assert self.seq_key is not None
        seq = rec.get(self.seq_key)
        raw = os.pread(mark_fd, MARK_WIDTH, 0)
        mark = parse_mark(raw) if raw else None
        high = mark.get("high_water") if isinstance(mark, dict) else None
        if isinstance(high, int) and isinstance(seq, int) and seq <= high:
            rec[self.seq_key] = high + 1

    def sync(self) -> None:
        """Make appends made with ``defer_sync`` durable (one fsync)."""
        if not self._unsynced:
            return
        fsync_file(self.path)
        self._unsynced = False

    # -- reading ---------------------------------------------------------
    def _last_from_fd(self, fd: int, size: int) -> dict[str, Any] | None:
        if size == self._cached_size:
            return self._cached_last
        if size == 0:
            return None
        end = size
        # file ends with "\n" here (tail repaired); find the previous newline
        pos = end - 1
        buf = b""
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            buf = chunk + buf
            idx = buf.rfind(b"\n", 0, len(buf))
            if idx >= 0:
                line = buf[idx + 1 :]
                return _parse(
                    self.path, line, None, start + idx + 1, self.max_version, self.validate
                )
            pos = start
        return _parse(self.path, buf, 1, 0, self.max_version, self.validate)

    def last(self) -> dict[str, Any] | None:
        """The last complete record (a torn tail is ignored); for an empty open
        segment, the last record of the closed ones."""
        rec = self._last_open()
        if rec is None and self.segment_bytes is not None:
            try:
                raw = last_path(self.segments_dir, self.path.stem).read_bytes()
            except FileNotFoundError:
                return None
            return _complete(raw.rstrip(b"\n"), self.max_version)
        return rec

    def _last_open(self) -> dict[str, Any] | None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # a torn fragment is ignored; a complete record without its
                # newline is the last record
                pos = size
                while pos > 0:
                    start = max(0, pos - 65536)
                    chunk = os.pread(fd, pos - start, start)
                    idx = chunk.rfind(b"\n")
                    if idx >= 0:
                        break
                    pos = start
                line_start = start + idx + 1 if pos > 0 else 0
                rec = _complete(os.pread(fd, size - line_start, line_start), self.max_version)
                if rec is not None:
                    return rec
                pos = size
                while pos > 0:
                    start = max(0, pos - 65536)
                    chunk = os.pread(fd, pos - start, start)
                    idx = chunk.rfind(b"\n")
                    if idx >= 0:
                        size = start + idx + 1
                        break
                    pos = start
                else:
                    size = 0
            self._cached_size = -1
            return self._last_from_fd(fd, size)
        finally:
            os.close(fd)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def scan(self, offset: int = 0) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """Yield ``(line_no_or_0, end_offset, record)`` for complete lines from ``offset``.

        Line numbers are exact only when scanning from offset 0 (else 0).
        """
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            f.seek(offset)
            pos = offset
            line_no = 0
            for raw in f:
                line_no += 1
                if raw == b"\n" and line_no == 1 and offset > 0:
                    # the newline the next append added after a record that
                    # lacked it (we already yielded that record up to here)
                    pos += 1
                    continue
                if not raw.endswith(b"\n"):
                    rec_ = _complete(raw, self.max_version)
                    if rec_ is not None:  # complete, only the newline is missing
                        yield (line_no if offset == 0 else 0), pos + len(raw), rec_
                    return  # else: torn tail or a write in progress, not a record yet
                start = pos
                pos += len(raw)
                if raw.strip() == b"":
                    raise _corrupt(self.path, line_no if offset == 0 else None, start, "empty line")
                rec = _parse(
                    self.path,
                    raw,
                    line_no if offset == 0 else None,
                    start,
                    self.max_version,
                    self.validate,
                )
                yield (line_no if offset == 0 else 0), pos, rec

    def read_from(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """All complete records after ``offset`` and the offset after the last one."""
        out: list[dict[str, Any]] = []
        end = offset
        for _, end, rec in self.scan(offset):
            out.append(rec)
        return out, end

    def records(self) -> list[dict[str, Any]]:
        """Every record: the closed segments' (oldest first), then the open file's."""
        out: list[dict[str, Any]] = []
        for seg in self.closed_segments():
            out.extend(self._closed_records(seg))
        out.extend(self.read_from(0)[0])
        return out

    def _copy_validate(self, rec: Mapping[str, Any]) -> str | None:
        """The record check for the copy of the closed tail: its capped header
        is no record of this ledger's kind."""
        if COPY_HEADER in rec or self.validate is None:
            return None
        return self.validate(rec)

    def _tail_copy(self) -> bytes:
        """The last ``TAIL_CACHE_RECORDS`` lines of all history (the open file,
        then the previous copy), as written: never parsed, at most
        ``TAIL_COPY_BYTES`` (then headed by a ``COPY_HEADER`` line), so a close
        costs the same with 1 MB records as with small ones."""
        n, budget = TAIL_CACHE_RECORDS, TAIL_COPY_BYTES
        lines, capped, used = _whole_tail(self.path, n, budget)
        if len(lines) < n and not capped:
            segs = self.closed_segments()
            num = segment_number(segs[-1].name, self.path.stem) if segs else None
            copy = tail_path(self.segments_dir, self.path.stem, num or 0)
            if segs and copy.exists():
                older, capped, _ = _whole_tail(copy, n - len(lines), budget - used)
                if older and COPY_HEADER.encode() in older[0]:
                    older, capped = older[1:], capped or len(older) - 1 < n - len(lines)
                lines = older + lines
            elif segs:  # an older home without a copy: parse what the segments hold
                lines = [dumps(r).encode() for r in self._older(n - len(lines))] + lines
        head = [dumps({"v": LEDGER_VERSION, COPY_HEADER: True}).encode()] if capped else []
        return b"".join(ln + b"\n" for ln in head + lines)

    def _older(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` records of the closed segments: from the copy of the
        last ``TAIL_CACHE_RECORDS`` the newest closed segment keeps (read once
        per handle: closed history changes only by a close), else newest
        segments first until ``n`` are found."""
        out: list[dict[str, Any]] = []
        segs = self.closed_segments()
        if segs and n <= TAIL_CACHE_RECORDS:
            num = segment_number(segs[-1].name, self.path.stem)
            cached = self._closed_cache
            if cached is not None and cached[0] == num and (len(cached[1]) >= n or not cached[2]):
                return cached[1][-n:]
            try:  # the last records of all closed history, copied as the newest closed
                recs = [
                    rec
                    for _, rec in iter_segment(
                        tail_path(self.segments_dir, self.path.stem, num or 0),
                        self.max_version,
                        self._copy_validate,
                    )
                ]
                capped = bool(recs) and COPY_HEADER in recs[0]
                recs = recs[1:] if capped else recs
                self._closed_cache = (num, recs, capped)
                if len(recs) >= n or not capped:
                    return recs[-n:]
            except FileNotFoundError:
                pass
        for seg in reversed(segs):  # more than the copy holds: whole segments
            recs = self._closed_records(seg)
            out[:0] = recs[-(n - len(out)) :]
            if len(out) >= n:
                break
        return out

    def tail(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` complete records (treat them as read-only).

        The first call reads backwards from the end; later calls on the same
        ``Ledger`` only parse what was appended since (ledgers only grow), so
        a turn that looks at recent history every round pays for new records,
        not for the window again."""
        if n <= 0:
            return []
        recs = self._tail_open(n)
        if len(recs) < n and self.segment_bytes is not None:
            older = self._older(n - len(recs))
            if older:
                return older + recs
        return recs

    def tail_previews(
        self,
        n: int,
        *,
        max_record_bytes: int = PREVIEW_RECORD_BYTES,
        text_chars: int = 4000,
        max_bytes: int | None = None,
    ) -> list[dict[str, Any]]:
        """The last ``n`` records like :meth:`tail`, for readers that show a
        preview of each (the prompt's recent conversation, a work item's
        trace): a record longer than ``max_record_bytes`` is neither parsed
        nor held whole, it comes back as the fields its head holds, the
        string cut shortened to ``text_chars`` (and ``_preview_of_bytes``:
        the whole record's size). Memory and parsing are bounded by ``n``
        whatever the size of the records (issue 31 #27: 1 MB message bodies),
        and so are the bytes read: at most ``max_bytes`` (default ``n *
        max_record_bytes``), fewer records when the newest are that large."""
        if n <= 0:
            return []
        budget = n * max_record_bytes if max_bytes is None else max_bytes
        key = (self.size(), self._file_id(), n, max_record_bytes, text_chars, budget)
        cached = self._preview_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        recs, used = self._previews(self.path, n, max_record_bytes, text_chars, budget)
        if len(recs) < n and used < budget and self.segment_bytes is not None:
            older = self._older_previews(n - len(recs), max_record_bytes, text_chars, budget - used)
            recs = older + recs
        self._preview_cache = (key, recs)
        return recs

    def _older_previews(
        self, n: int, max_record_bytes: int, text_chars: int, budget: int
    ) -> list[dict[str, Any]]:
        segs = self.closed_segments()
        if not segs:
            return []
        num = segment_number(segs[-1].name, self.path.stem)
        copy = tail_path(self.segments_dir, self.path.stem, num or 0)
        if n <= TAIL_CACHE_RECORDS and copy.exists():
            return self._previews(copy, n, max_record_bytes, text_chars, budget)[0]
        return self._older(n)  # no plain copy of the closed tail (an older home)

    def _previews(
        self, path: Path, n: int, max_record_bytes: int, text_chars: int, budget: int
    ) -> tuple[list[dict[str, Any]], int]:
        from holon_cli.store.ledger_tail import preview_record, scan_tail

        out: list[dict[str, Any]] = []
        lines, used = scan_tail(path, n, max_record_bytes, budget)
        for ln in lines:
            if not ln.terminated:  # the last bytes: a whole record, or torn
                rec = _complete(ln.raw, self.max_version) if ln.size == len(ln.raw) else None
            elif ln.size > len(ln.raw):
                rec = preview_record(ln, text_chars)
                v = rec.get("v") if rec is not None else None
                if rec is None or (isinstance(v, int) and v > self.max_version):
                    why = "not a JSON object" if rec is None else f"record format v{v} is newer"
                    raise _corrupt(path, None, ln.offset, why)
            elif not ln.raw.strip():
                raise _corrupt(path, None, ln.offset, "empty line")
            else:
                check = self.validate if path == self.path else self._copy_validate
                rec = _parse(path, ln.raw, None, ln.offset, self.max_version, check)
            if rec is not None and COPY_HEADER not in rec:
                out.append(rec)
        return out, used

    def _tail_open(self, n: int) -> list[dict[str, Any]]:
        """:meth:`tail` of the open file alone."""
        size = self.size()
        cache = self._tail_cache
        if cache is not None and n <= cache[2] and cache[0] <= size and cache[3] == self._file_id():
            end, recs, cap, fid = cache
            if size > end:
                new, end = self.read_from(end)
                recs.extend(new)
                if len(recs) > cap:
                    del recs[: len(recs) - cap]
                self._tail_cache = (end, recs, cap, fid)
            return recs[-n:]
        cap = max(n, TAIL_CACHE_RECORDS)
        recs, end = self._tail_read(cap)
        self._tail_cache = (end, recs, cap, self._file_id())
        return recs[-n:]

    def tail_with_offset(self, n: int) -> tuple[list[dict[str, Any]], int]:
        """The last ``n`` complete records and the byte offset just after them
        (where a follower continues with :meth:`read_from`)."""
        return self._tail_read(max(1, n))

    def file_id(self) -> int | None:
        """The open file's inode (``None``: no open file): a closed segment or
        a replaced file changes it."""
        return self._file_id()

    def _file_id(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except FileNotFoundError:
            return None

    def _tail_read(self, n: int) -> tuple[list[dict[str, Any]], int]:
        """The last ``n`` complete records and the offset just after them."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return [], 0
        try:
            size = os.fstat(fd).st_size
            chunks: list[bytes] = []  # newest first; joined once (1 MB lines: no
            newlines = 0  # quadratic re-copying nor re-counting of the buffer)
            pos = size
            while pos > 0 and newlines <= n:
                start = max(0, pos - 65536)
                chunk = os.pread(fd, pos - start, start)
                chunks.append(chunk)
                newlines += chunk.count(b"\n")
                pos = start
            buf = b"".join(reversed(chunks))
        finally:
            os.close(fd)
        lines = buf.split(b"\n")
        last_frag = lines.pop()  # after the final newline: "" or a torn fragment
        if last_frag and _complete(last_frag, self.max_version) is not None:
            lines.append(last_frag)  # a complete record that only lacks its newline
        offset = pos
        if pos > 0:
            offset += len(lines[0]) + 1
            lines = lines[1:]  # first may be partial
        for ln in lines[:-n]:
            offset += len(ln) + 1
        out: list[dict[str, Any]] = []
        for ln in lines[-n:]:
            if not ln.strip():
                raise _corrupt(self.path, None, offset, "empty line")
            out.append(_parse(self.path, ln, None, offset, self.max_version, self.validate))
            offset += len(ln) + 1
        return out, offset

    def records_after(
        self, key: str, since: int, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """The complete records whose integer ``key`` is greater than ``since``
        (at most ``limit``, oldest first) and the byte offset just after the last
        one returned (or after everything read), where a follower continues
        with :meth:`read_from`.

        One snapshot of the file: its size is taken once and every byte read
        lies before it, so an append racing this read is either wholly inside
        the snapshot or wholly after it (the next call returns it): a record is
        never skipped and never returned twice. ``key`` must increase along the
        file (``event_seq`` does; gaps are allowed): the read goes backwards
        from the end only until it meets a record at or below ``since``."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            fd = -1
        try:
            size = os.fstat(fd).st_size if fd >= 0 else 0
            lines, offset = self._lines_after(fd, size, key, since) if size else ([], 0)
        finally:
            if fd >= 0:
                os.close(fd)
        out: list[dict[str, Any]] = []
        if offset == 0:  # the open file starts after ``since``: history may be older
            out = self._closed_after(key, since, limit)
        for raw in lines:
            if limit is not None and len(out) >= limit:
                break
            rec = self._parse_line(raw, offset)
            offset = min(offset + len(raw) + 1, size)
            seq = rec.get(key)
            if isinstance(seq, int) and seq > since:
                out.append(rec)
        if limit is not None and len(out) > limit:
            # cut inside the closed segments: the offset means nothing then
            # (callers with a limit page by ``key``, not by offset)
            return out[:limit], 0
        return out, offset

    def _closed_after(self, key: str, since: int, limit: int | None = None) -> list[dict[str, Any]]:
        """Records of the closed segments whose ``key`` exceeds ``since``,
        oldest first (at most ``limit``). Only the first line of a segment is
        read to find where ``since`` falls; then whole segments from there."""
        try:  # the newest closed record: nothing closed is newer than ``since``?
            last = _complete(last_path(self.segments_dir, self.path.stem).read_bytes(), 1 << 30)
        except FileNotFoundError:
            last = None
        if last is not None and _int(last.get(key)) <= since:
            return []
        segs = self.closed_segments()
        start = 0
        for i in range(len(segs) - 1, -1, -1):
            first = self._first_key(segs[i], key)
            if first is not None and first <= since:
                start = i
                break
        out: list[dict[str, Any]] = []
        for seg in segs[start:]:
            out.extend(r for r in self._closed_records(seg) if _int(r.get(key)) > since)
            if limit is not None and len(out) > limit:
                break
        return out

    def _first_key(self, seg: Path, key: str) -> int | None:
        with open_segment(seg) as f:
            raw = f.readline()
        if not raw.strip():
            return None
        try:
            return self._key_of(raw.rstrip(b"\n"), 0, key)
        except CorruptStateError:
            return None

    def _parse_line(self, raw: bytes, offset: int) -> dict[str, Any]:
        if not raw.strip():
            raise _corrupt(self.path, None, offset, "empty line")
        return _parse(self.path, raw, None, offset, self.max_version, self.validate)

    def _key_of(self, raw: bytes, offset: int, key: str) -> int | None:
        """``key`` of the record on this line. Our own records put it among the
        first keys (``{"v":1,"event_seq":12,...``): read the digits there
        without parsing the line; anything else is parsed."""
        needle = b'"' + key.encode() + b'":'
        at = raw.find(needle, 0, 48)
        if at > 0 and raw[at - 1 : at] in (b"{", b","):
            start = at + len(needle)
            end = start
            while end < len(raw) and 48 <= raw[end] <= 57:
                end += 1
            if end > start and raw[end : end + 1] in (b",", b"}"):
                return int(raw[start:end])
        seq = self._parse_line(raw, offset).get(key)
        return seq if isinstance(seq, int) and not isinstance(seq, bool) else None

    def _lines_after(self, fd: int, size: int, key: str, since: int) -> tuple[list[bytes], int]:
        """The whole lines among the file's first ``size`` bytes from the first
        whose ``key`` exceeds ``since``, and the offset where they start (read
        backwards in chunks). A last line without its newline is kept only when
        it is a complete record (else it is a write in progress)."""
        pos, buf = size, b""
        while pos > 0:
            start = max(0, pos - 65536)
            buf = os.pread(fd, pos - start, start) + buf
            pos = start
            first = 0 if pos == 0 else buf.find(b"\n") + 1
            end = buf.find(b"\n", first)
            if pos > 0 and (first == 0 or end < 0):
                continue  # no whole line in the buffer yet
            seq = self._key_of(buf[first:end], pos + first, key) if end >= 0 else None
            if seq is not None and seq <= since:
                break  # every record after ``since`` is in the buffer
        first = 0 if pos == 0 else buf.find(b"\n") + 1
        lines = buf[first:].split(b"\n")
        tail = lines.pop()  # "" after the final newline, or a fragment
        if tail and _complete(tail, self.max_version) is not None:
            lines.append(tail)
        offset, skip = pos + first, 0
        for raw in lines:  # drop the records at or below ``since``
            seq = self._key_of(raw, offset, key)
            if seq is not None and seq > since:
                break
            offset += len(raw) + 1
            skip += 1
        return lines[skip:], min(offset, size)

    def records_skipping_damaged(self) -> tuple[list[dict[str, Any]], list[Problem]]:
        """Every complete record, damaged lines left out and reported with their
        line numbers (read-only views: ``holon tail``). A full scan: callers use
        it only after the fast path met a damaged line."""
        out: list[dict[str, Any]] = []
        problems: list[Problem] = []
        for seg in self.closed_segments():
            with open_segment(seg) as f:
                self._lines_skipping_damaged(seg, f, out, problems)
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return out, problems
        with f:
            self._lines_skipping_damaged(self.path, f, out, problems)
        return out, problems

    def _lines_skipping_damaged(
        self, path: Path, f: Any, out: list[dict[str, Any]], problems: list[Problem]
    ) -> None:
        for line_no, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                break  # torn tail: normal, not a record yet
            try:
                if raw.strip() == b"":
                    raise _corrupt(path, line_no, 0, "empty line")
                out.append(_parse(path, raw, line_no, 0, self.max_version))
            except CorruptStateError as exc:
                reason = str(exc.details.get("reason") or exc.message)
                if "newer than this holon understands" in reason:
                    raise  # not damage: this holon is too old to read the home
                problems.append(Problem(str(path), line_no, reason))

    def check(self) -> list[Problem]:
        """Validate every line; a torn tail is reported as a note, not a problem."""
        problems: list[Problem] = []
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return problems
        with f:
            for line_no, raw in enumerate(f, 1):
                if not raw.endswith(b"\n") and _complete(raw, self.max_version) is None:
                    break  # torn tail: normal, repaired on next append
                try:
                    if raw.strip() == b"":
                        raise _corrupt(self.path, line_no, 0, "empty line")
                    _parse(self.path, raw, line_no, 0, self.max_version, self.validate)
                except CorruptStateError as exc:
                    # path and line are in the Problem itself; keep the message short
                    problems.append(
                        Problem(
                            str(self.path), line_no, str(exc.details.get("reason") or exc.message)
                        )
                    )
        return problems

    def has_torn_tail(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() == 0:
                    return False
                f.seek(-1, os.SEEK_END)
                if f.read(1) == b"\n":
                    return False
        except FileNotFoundError:
            return False
        return self._last_open() is None or not self._last_line_complete()

    def _last_line_complete(self) -> bool:
        with open(self.path, "rb") as f:
            data = f.read()
        return _complete(data[data.rfind(b"\n") + 1 :], self.max_version) is not None

    def complete_size(self) -> int:
        """The file's size without a torn last line (what the last complete
        append left; compare with the mark)."""
        try:
            data_size = self.path.stat().st_size
        except FileNotFoundError:
            return 0
        if data_size == 0:
            return 0
        with open(self.path, "rb") as f:
            f.seek(max(0, data_size - 65536))
            chunk = f.read()
            if chunk.endswith(b"\n"):
                return data_size
            nl = chunk.rfind(b"\n")
            if nl < 0 and data_size > len(chunk):
                f.seek(0)
                whole = f.read()
                nl_whole = whole.rfind(b"\n")
                frag, keep = whole[nl_whole + 1 :], nl_whole + 1
            else:
                frag = chunk[nl + 1 :]
                keep = data_size - len(frag)
        return data_size if _complete(frag, self.max_version) is not None else keep

    def read_at(self, offset: int) -> dict[str, Any] | None:
        """The complete record starting at byte ``offset`` (``None`` if there is
        none: past the end, not the start of a line, torn)."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return None
        with f:
            if offset > 0:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    return None
            raw = f.readline()
        if not raw:
            return None
        if not raw.endswith(b"\n"):
            return _complete(raw, self.max_version)
        try:
            return _parse(self.path, raw, None, offset, self.max_version)
        except CorruptStateError:
            return None
