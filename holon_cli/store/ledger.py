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
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from holon_cli.errors import CorruptStateError
from holon_cli.store.fsio import PRIVATE_FILE_MODE, deferred, dumps, fsync_dir, fsync_file
from holon_cli.store.locks import locked
from holon_cli.store.records import Validator

LEDGER_VERSION = 1
TAIL_CACHE_RECORDS = 256
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
        with locked(self.lock_path, what=f"ledger {self.path.name}"):
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
        return rec

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
        """The last complete record (a torn tail is ignored)."""
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
        return self.read_from(0)[0]

    def tail(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` complete records (treat them as read-only).

        The first call reads backwards from the end; later calls on the same
        ``Ledger`` only parse what was appended since (ledgers only grow), so
        a turn that looks at recent history every round pays for new records,
        not for the window again."""
        if n <= 0:
            return []
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
            buf = b""
            pos = size
            while pos > 0 and buf.count(b"\n") <= n:
                start = max(0, pos - 65536)
                buf = os.pread(fd, pos - start, start) + buf
                pos = start
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
            return [], 0
        try:
            size = os.fstat(fd).st_size
            lines, offset = self._lines_after(fd, size, key, since)
        finally:
            os.close(fd)
        out: list[dict[str, Any]] = []
        for raw in lines:
            if limit is not None and len(out) >= limit:
                break
            rec = self._parse_line(raw, offset)
            offset = min(offset + len(raw) + 1, size)
            seq = rec.get(key)
            if isinstance(seq, int) and seq > since:
                out.append(rec)
        return out, offset

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
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return out, problems
        with f:
            for line_no, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    break  # torn tail: normal, not a record yet
                try:
                    if raw.strip() == b"":
                        raise _corrupt(self.path, line_no, 0, "empty line")
                    out.append(_parse(self.path, raw, line_no, 0, self.max_version))
                except CorruptStateError as exc:
                    reason = str(exc.details.get("reason") or exc.message)
                    if "newer than this holon understands" in reason:
                        raise  # not damage: this holon is too old to read the home
                    problems.append(Problem(str(self.path), line_no, reason))
        return out, problems

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
        return self.last() is None or not self._last_line_complete()

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
