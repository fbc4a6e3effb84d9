"""Atomic file replacement and versioned JSON snapshot reads.

``atomic_write_bytes`` is the one atomic-write helper of the tree (the store's
snapshots, plan files, the scripted model's cursor and ``ApplyPatch`` all use
it). Its invariants:

- readers see the old file or the new one, never half of either: the data
  goes to a temp file in the target's own folder, is fsync'd, renamed over
  the target with ``os.replace`` and the folder is fsync'd;
- the temp file is created like :func:`tempfile.mkstemp` does (random name,
  ``O_CREAT|O_EXCL|O_NOFOLLOW``, mode 0600, so a planted symlink is never
  followed), relative to an fd of the target's folder, and removed on any
  failure;
- creation and rename both happen relative to that folder fd, whose real
  path was checked (``check``): swapping a folder for a symlink mid-write
  cannot redirect either;
- the final name is replaced, never written through: a symlink at the
  target is replaced by the file (or refused, with ``refuse_symlink``);
- an existing regular file keeps its permission bits; a new file gets
  ``new_mode`` (default :data:`PRIVATE_FILE_MODE`, 0600: files under the home
  hold message content), or ``0o666`` minus the user's umask with
  ``new_mode=None`` (what an editor does in a user's workspace; holon's own
  umask is 077, see :mod:`holon_cli.umask`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from holon_cli import umask
from holon_cli.errors import CorruptStateError

if TYPE_CHECKING:
    from holon_cli.store.records import RecordKind

R = TypeVar("R")

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


class UnsafePathError(OSError):
    """The target changed under us (a symlink appeared, the folder moved out)."""


def fsync_dir(path: Path) -> None:
    if not deferred(path):
        _fsync_path(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_file(path: Path) -> None:
    """Make what was written to ``path`` durable (a ledger or journal synced
    after its appends), unless its fsyncs are deferred."""
    if not deferred(path):
        _fsync_path(path)


def _fsync_path(path: str | Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------ deferred fsyncs
#
# ``holon run``'s temporary agent lives for one foreground command. Until the
# run decides to keep it, nothing it holds has been acknowledged to anyone
# (the user's text is still on their command line), so its files are not
# fsync'd as they are written. When the run ends, a kept agent is made
# durable in one pass over its tree (``end_deferred_fsyncs``: a pass, not a
# list of what was put off, so a file renamed since, such as a message moved
# from ``inbox/new`` to ``cur``, is still covered); a removed one never pays
# (on a disk where an fsync costs 3 ms that was ~150 ms of a one-round run).
# A killed process loses nothing either way (the page cache outlives it);
# only an OS crash during the run can lose the temporary agent. A forked
# child (a task supervisor) syncs everything again.

_DEFERRED: tuple[str, ...] = ()


def defer_fsyncs(*roots: Path) -> None:
    """Put off fsyncs of files and folders under ``roots`` until
    :func:`end_deferred_fsyncs` (with no roots: sync everything, as normal)."""
    global _DEFERRED
    _DEFERRED = tuple(os.path.join(os.path.abspath(r), "") for r in roots)


class fsyncs_skipped:  # noqa: N801 - used as a function: ``with fsyncs_skipped(root):``
    """Inside the block, nothing under ``root`` is fsync'd: a scratch tree
    that is thrown away after (``holon replay``'s temporary home). The
    deferral in force before (``holon run``'s agent) is kept. (A class, not
    ``contextlib``: this module is on every command's start-up path.)"""

    def __init__(self, root: Path) -> None:
        self.root = os.path.join(os.path.abspath(root), "")
        self.prev: tuple[str, ...] = ()

    def __enter__(self) -> None:
        global _DEFERRED
        self.prev = _DEFERRED
        _DEFERRED = (*self.prev, self.root)

    def __exit__(self, *exc: object) -> None:
        global _DEFERRED
        _DEFERRED = self.prev


def deferred(*paths: str | Path) -> bool:
    """Whether the fsyncs of ``paths`` (a file and its folder, say) are put off."""
    if not _DEFERRED:
        return False
    return all(os.path.join(os.path.abspath(p), "").startswith(_DEFERRED) for p in paths)


def end_deferred_fsyncs() -> int:
    """Stop deferring, and make each deferred tree that still exists durable:
    every regular file, then every folder (deepest first), then the folder
    holding the tree. Nothing but regular files and folders is opened (a
    task's ``stdin.fifo`` would block). Returns the number of fsyncs."""
    roots, count = _DEFERRED, 0
    defer_fsyncs()
    for root in roots:
        root = root.rstrip(os.sep)
        if not os.path.isdir(root) or os.path.islink(root):
            continue
        for folder, _dirs, files in os.walk(root, topdown=False):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    regular = stat.S_ISREG(os.lstat(path).st_mode)
                except OSError:
                    continue
                if regular:
                    _fsync_path(path)
                    count += 1
            _fsync_path(folder, os.O_RDONLY | os.O_DIRECTORY)
            count += 1
        _fsync_path(os.path.dirname(root), os.O_RDONLY | os.O_DIRECTORY)
        count += 1
    return count


os.register_at_fork(after_in_child=defer_fsyncs)


def privatize_tree(root: Path) -> None:
    """Make a tree copied into the home private: folders 0700, files 0600
    (0700 when any execute bit was set: a skill's script). ``copytree`` copies
    the source's modes, which the umask does not touch; symlinks are left."""
    for dirpath, _dirnames, filenames in os.walk(root):  # symlinked folders: not entered
        os.chmod(dirpath, PRIVATE_DIR_MODE)
        for name in filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                os.chmod(p, 0o700 if st.st_mode & 0o111 else PRIVATE_FILE_MODE)


def fd_real_path(dfd: int, fallback: Path) -> Path:
    """The real path of an open folder (Linux: via /proc; else realpath)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{dfd}"))
    except OSError:
        return Path(os.path.realpath(fallback))


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def _create_temp(dfd: int, name: str) -> tuple[int, str]:
    """``tempfile.mkstemp``'s protocol (random name, ``O_CREAT|O_EXCL``, mode
    0600, retry on a clash), but relative to the already-checked folder fd,
    so the temp file cannot land anywhere else; and without importing
    ``tempfile`` (it pulls in ``shutil``, which ``holon enqueue`` avoids)."""
    for _ in range(100):
        tmp_name = f".{name[:64]}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp_name, _TEMP_FLAGS, PRIVATE_FILE_MODE, dir_fd=dfd), tmp_name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {name}")


def write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_bytes(path: Path | str, data: bytes, *, truncate: bool = False) -> None:
    """``data`` appended to ``path`` (made 0600 if missing; ``truncate``:
    emptied first), not fsync'd: the caller batches its fsyncs."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    fd = os.open(path, flags | (os.O_TRUNC if truncate else 0), 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def atomic_write_bytes(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    new_mode: int | None = PRIVATE_FILE_MODE,
    check: Callable[[Path], None] | None = None,
    refuse_symlink: bool = False,
    mkdirs: bool = True,
    sync_dir: bool = True,
) -> None:
    """Replace ``path`` with ``data``: readers see the old or the new file, never half.

    ``mode`` forces the permission bits; otherwise an existing regular file
    keeps its own and a new one gets ``new_mode`` (``None``: 0666 minus the
    umask). ``check(real_target)`` runs with the real path of the target
    (its folder resolved through every symlink) right before the rename and
    may raise to refuse the write. ``refuse_symlink`` refuses a target that
    is a symlink instead of replacing the link. ``sync_dir=False`` leaves
    the folder's fsync to the caller (who fsyncs it once for several
    renames): the new file's data is durable when this returns (so the name,
    whenever it becomes durable, never names half a file), the rename only
    with that later fsync.
    """
    path = Path(path)
    parent = path.parent
    if mkdirs:
        parent.mkdir(parents=True, exist_ok=True)
    name = path.name
    dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        real_parent = fd_real_path(dfd, parent)
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode) and refuse_symlink:
            raise UnsafePathError(
                f"{path} became a symlink while it was being written; nothing was written"
            )
        if check is not None:
            check(real_parent / name)
        if mode is None:
            if st is not None and stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
            elif new_mode is None:
                mode = 0o666 & ~umask.user_umask()
            else:
                mode = new_mode
        sync = not deferred(path, parent)
        fd, tmp_name = _create_temp(dfd, name)
        try:
            try:
                write_all(fd, data)
                os.fchmod(fd, mode)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:  # by name in the checked folder, never through a swapped path
                os.unlink(tmp_name, dir_fd=dfd)
            except OSError:
                pass
            raise
        if sync and sync_dir:
            os.fsync(dfd)
    finally:
        os.close(dfd)


def create_new_bytes(path: Path, data: bytes, *, mode: int = PRIVATE_FILE_MODE) -> bool:
    """Create ``path`` with ``data`` only if nothing is there; ``False`` when
    something already was (another process won). A temp file in the same
    folder, fsync, then ``link`` into place (which refuses an existing name):
    readers never see an empty or partial file, and an existing one is never
    replaced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd, tmp_name = _create_temp(dfd, path.name)
        try:
            try:
                write_all(fd, data)
                os.fchmod(fd, mode)
                if not deferred(path):
                    os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp_name, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except FileExistsError:
                return False
        finally:
            try:
                os.unlink(tmp_name, dir_fd=dfd)
            except OSError:
                pass
        if not deferred(path):
            os.fsync(dfd)
        return True
    finally:
        os.close(dfd)


def atomic_write_text(path: Path, text: str, **kwargs: Any) -> None:
    atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"), **kwargs)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def write_snapshot(path: Path, obj: Mapping[str, Any], *, sync_dir: bool = True) -> None:
    """Replace a snapshot atomically. Compact JSON, one line: ``indent`` would
    switch json to its pure-Python encoder, three times slower on the queue
    snapshot a backlog makes large (``jq .`` shows it indented). ``sync_dir``:
    see :func:`atomic_write_bytes`."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"), sync_dir=sync_dir)


def read_snapshot(path: Path, *, max_version: int = 1) -> dict[str, Any] | None:
    """Read a versioned JSON snapshot; ``None`` when it does not exist.

    Known snapshots (``state/agent.json``, ``state/queue.json``, ``home.json``)
    are also checked against their record type (``store/records.py``); a
    reader that wants the record *as* its type calls :func:`read_record`."""
    from holon_cli.store.records import snapshot_validator

    rec: dict[str, Any] | None = _read_checked(path, max_version, snapshot_validator(path))
    return rec


def read_record(path: Path, kind: RecordKind[R], *, max_version: int = 1) -> R | None:
    """The snapshot at ``path`` checked into ``kind``'s type (``None``: no file)."""
    rec: R | None = _read_checked(path, max_version, kind)
    return rec


def _read_checked(path: Path, max_version: int, kind: RecordKind[Any] | None) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except (IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        raise CorruptStateError(
            f"{path}: cannot be read ({exc.strerror or exc})",
            hint="check the file's type and permissions; `holon home check` lists every problem",
            details={"path": str(path)},
        ) from None
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptStateError(
            f"{path}: not valid JSON ({exc})",
            hint="`holon home check --repair` rebuilds it from the ledgers where it can "
            "(keeping the damaged file aside); `holon home check` lists every problem",
            details={"path": str(path)},
        ) from None
    if not isinstance(obj, dict):
        raise CorruptStateError(f"{path}: expected a JSON object", details={"path": str(path)})
    v = obj.get("v", 1)
    if not isinstance(v, int) or v > max_version:
        raise CorruptStateError(
            f"{path}: format version {v!r} is newer than this holon understands "
            f"(max {max_version})",
            hint="upgrade holon-cli",
            details={"path": str(path)},
        )
    reason = kind(obj) if kind is not None else None
    if reason:
        raise CorruptStateError(
            f"{path}: {reason}",
            hint="`holon home check --repair` rebuilds it from the ledgers where it can "
            "(keeping the damaged file aside); `holon home check` lists every problem",
            details={"path": str(path), "reason": reason},
        )
    return obj
