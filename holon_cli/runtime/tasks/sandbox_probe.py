"""Is bubblewrap usable here, and in which form: probed once, cached.

``execution.sandbox: auto`` (the default) runs commands under bwrap when it
works on this machine, and ``bwrap`` refuses to run them when it does not.
Working means the sandbox starts with everything a command will get: no
capabilities, new pid, net, ipc and uts namespaces and the seccomp filter of
``network: off``, in a user namespace that cannot create further ones when
the kernel allows it (``--unshare-user --disable-userns``), else in a user
namespace (bwrap before 0.8 has no ``--disable-userns``), else as bwrap can
(root, or a setuid bwrap: ``--cap-drop ALL`` still leaves the command no
capability). The first form that starts ``true`` wins.

The probe is a ``posix_spawn`` of bwrap (no ``subprocess`` import, so a
``holon run`` that builds its prompt pays no module load for it), about
10 ms; its answer is kept in memory and in ``$HOLON_HOME/run/sandbox-probe.json``
(0600, no fsync: a lost cache is a new probe; written only when ``run/``
exists: a probe never creates a home), keyed by what could change it
(bwrap's path, inode, size and mtime; the effective uid; the boot id; the
kernel's user-namespace switches). ``holon status`` only reads the cache
(:func:`cached`); ``holon home check``, ``debug prompt``, a turn's prompt and
every command launch probe on a miss.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import NamedTuple

CACHE_NAME = "sandbox-probe.json"
CACHE_VERSION = 1
TIMEOUT_S = 10.0
# the kernel's switches for user namespaces (absent ones are skipped)
_USERNS_SWITCHES = (
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)
# the forms tried, most confined first: (name, flags)
FORMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("userns", ("--unshare-user", "--disable-userns")),
    ("userns_nested", ("--unshare-user",)),
    ("no_userns", ()),
)


class Probe(NamedTuple):
    ok: bool
    form: str | None  # a FORMS name, None when nothing worked
    reason: str | None  # why bwrap is unusable (ok False)

    @property
    def flags(self) -> tuple[str, ...]:
        return dict(FORMS).get(self.form or "", ())


_memo: dict[str, Probe] = {}


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(256).decode("ascii", "replace").strip()
    except OSError:
        return None


def cache_key(exe: str) -> str | None:
    """What the answer depends on, as one string (None: bwrap is gone)."""
    try:
        real = os.path.realpath(exe)
        st = os.stat(real)
    except OSError:
        return None
    key: dict[str, object] = {
        "v": CACHE_VERSION,
        "bwrap": real,
        "stat": [st.st_ino, st.st_size, st.st_mtime_ns],
        "euid": os.geteuid(),
        "boot": _read("/proc/sys/kernel/random/boot_id"),
        "userns": [_read(p) for p in _USERNS_SWITCHES],
    }
    return json.dumps(key, sort_keys=True)


def _cache_file(run_dir: Path | None) -> Path | None:
    return None if run_dir is None else run_dir / CACHE_NAME


def _from_disk(path: Path | None, key: str) -> Probe | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    form = data.get("form")
    if data.get("ok") is True and form in dict(FORMS):
        return Probe(True, form, None)
    if data.get("ok") is False and isinstance(data.get("reason"), str):
        return Probe(False, None, data["reason"])
    return None


def _to_disk(path: Path | None, key: str, p: Probe) -> None:
    if path is None:
        return
    body = json.dumps({"key": key, "ok": p.ok, "form": p.form, "reason": p.reason})
    if not path.parent.is_dir():
        return  # no home yet: a probe never creates one (memory only)
    try:
        tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, body.encode() + b"\n")
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache: the next process probes again


def cached(exe: str, run_dir: Path | None) -> Probe | None:
    """The remembered answer (memory, then the home's file); never probes."""
    key = cache_key(exe)
    if key is None:
        return None
    hit = _memo.get(key)
    if hit is None:
        hit = _from_disk(_cache_file(run_dir), key)
        if hit is not None:
            _memo[key] = hit
    return hit


def probe(exe: str, run_dir: Path | None, seccomp: bytes | None) -> Probe:
    """The cached answer, else a probe (remembered in memory and on disk)."""
    key = cache_key(exe)
    if key is None:
        return Probe(False, None, f"{exe} cannot be read")
    hit = cached(exe, run_dir)
    if hit is not None:
        return hit
    found = _run_probe(exe, seccomp)
    _memo[key] = found
    _to_disk(_cache_file(run_dir), key, found)
    return found


def _true() -> list[str]:
    for cand in ("/usr/bin/true", "/bin/true"):
        if os.access(cand, os.X_OK):
            return [cand]
    return ["/bin/sh", "-c", ":"]


def _run_probe(exe: str, seccomp: bytes | None) -> Probe:
    first_error = None
    for name, flags in FORMS:
        ok, err = _try(exe, flags, seccomp)
        if ok:
            return Probe(True, name, None)
        first_error = first_error or err
    return Probe(False, None, f"bwrap cannot start a sandbox here: {first_error}")


def _try(exe: str, flags: tuple[str, ...], seccomp: bytes | None) -> tuple[bool, str]:
    """One attempt: ``(worked, bwrap's first error line)``."""
    argv = [exe, *flags, "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", "/tmp", "--unshare-pid", "--unshare-net"]
    argv += ["--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    err_r, err_w = os.pipe()
    sec_r = None
    try:
        if seccomp is not None:
            sec_r, sec_w = os.pipe()
            os.write(sec_w, seccomp)
            os.close(sec_w)
            os.set_inheritable(sec_r, True)
            argv += ["--seccomp", str(sec_r)]
        argv += ["--", *_true()]
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        env = {"PATH": os.environ.get("PATH", os.defpath)}
        try:
            pid = os.posix_spawn(exe, argv, env, file_actions=actions)
        except OSError as exc:
            return False, f"{exe}: {exc.strerror or exc}"
        os.close(err_w)
        err_w = -1
        code = _wait(pid)
        os.set_blocking(err_r, False)
        try:
            text = os.read(err_r, 4096).decode("utf-8", "replace")
        except (BlockingIOError, OSError):
            text = ""
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if code is None:
            return False, f"bwrap did not finish within {TIMEOUT_S:g} s"
        return code == 0, first or f"exit status {code}"
    finally:
        for fd in (err_r, err_w, sec_r):
            if fd is not None and fd >= 0:
                os.close(fd)


def _wait(pid: int) -> int | None:
    """The exit status of ``pid`` (None: killed at the timeout)."""
    end = time.monotonic() + TIMEOUT_S
    delay = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
