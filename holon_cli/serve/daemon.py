"""``holon daemon``: ``holon serve`` in the background, one per ``HOLON_HOME``.

Files under ``$HOLON_HOME/run/``: ``daemon.json`` (``pid``, ``started_at``,
``http_addr``, ``socket_path``, ``config_fingerprint``, ``version``),
``daemon.log`` (serve's stderr; rotated at start when over 5 MiB, one old
generation ``daemon.log.1``), ``daemon-failure.json`` (the last startup or
shutdown failure; cleared by the next successful start or stop).

Invariants:
- start is idempotent: a live daemon with the same fingerprint is reported,
  never doubled; a different fingerprint is refused (exit 4);
- a pid in ``daemon.json`` counts only while it is alive and is a
  ``holon serve`` (``/proc/<pid>/cmdline`` where available), so stale
  metadata never makes us signal an unrelated process;
- stop asks the control surface first (the token-free Unix socket), then
  SIGTERM, then SIGKILL after 10 s; it never marks an agent stopped;
- start refuses (exit 4, before launching anything) a socket path owned by
  a live process that is not this home's daemon, and a listen port in use,
  naming what holds it when that is another ``holon serve``;
- status: ``state`` running (healthy or not), stale or stopped, or
  ``foreground`` when no daemon runs but a ``holon serve`` of this home (a
  terminal's, a DBOS worker's) answers on one of the home's sockets; the
  last runtime-turn failure is read from the agents' persisted state, so it
  survives a restart of the daemon.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import __version__, clock
from holon_cli.errors import HolonError, RejectedError
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.layout import HomeLayout
from holon_cli.store.locks import pid_alive
from holon_cli.umask import user_umask

if TYPE_CHECKING:
    from holon_cli.model.typed_base import Json, JsonObject

LOG_ROTATE_BYTES = 5 << 20
STOP_GRACE_S = 10.0


def run_dir() -> Path:
    return HomeLayout.current().run_dir


def meta_path() -> Path:
    return run_dir() / "daemon.json"


def log_path() -> Path:
    return run_dir() / "daemon.log"


def failure_path() -> Path:
    return run_dir() / "daemon-failure.json"


def fingerprint(serve_args: list[str], token: str | None) -> str:
    """The effective configuration a running daemon must match: its serve
    options and (a hash of) its token."""
    h = hashlib.sha256()
    h.update(json.dumps(serve_args).encode())
    h.update(hashlib.sha256((token or "").encode()).digest())
    return "sha256:" + h.hexdigest()[:32]


def _alive(pid: Any) -> bool:
    """The recorded daemon pid is alive and still a serve (not a later
    process that reuses the pid)."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        return b"serve" in argv
    except OSError:
        return True  # no /proc: trust the signal probe


def read_meta() -> JsonObject | None:
    try:
        return read_snapshot(meta_path())
    except HolonError:
        return None


def _record_failure(phase: str, summary: str) -> JsonObject:
    """Persist a lifecycle failure: the newest at the top level (what status
    reads) and the newest of each phase under ``phases`` (what logs shows)."""
    rec: JsonObject = {
        "v": 1,
        "occurred_at": clock.now_iso(),
        "summary": summary,
        "phase": phase,
        "detail_hint": f"see `holon daemon logs` ({log_path()})",
    }
    phases: JsonObject = dict(failures_by_phase())
    phases[phase] = {k: v for k, v in rec.items() if k != "v"}
    run_dir().mkdir(parents=True, exist_ok=True)
    write_snapshot(failure_path(), {**rec, "phases": phases})
    return rec


def _clear_failure(phase: str) -> None:
    """A later success of ``phase`` clears its failure; the other phase's stays."""
    phases = {k: v for k, v in failures_by_phase().items() if k != phase}
    if not phases:
        failure_path().unlink(missing_ok=True)
        return
    newest = max(phases.values(), key=lambda r: str(r.get("occurred_at") or ""))
    write_snapshot(failure_path(), {"v": 1, **newest, "phases": phases})


def _client(meta: Mapping[str, Json], timeout: float = 2.0) -> Any:
    """An httpx2 client of the local serve: its unix socket, else its TCP
    address. Never through an env proxy (``trust_env=False``: the daemon is
    on this machine), and no CA store is loaded (plain http only; the bare
    context verifies and trusts nothing, should TLS ever be asked for)."""
    import ssl

    import httpx2

    no_cas = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    sock = meta.get("socket_path")
    if isinstance(sock, str) and sock and os.path.exists(sock):
        return httpx2.Client(
            transport=httpx2.HTTPTransport(uds=sock, verify=no_cas, trust_env=False),
            base_url="http://localhost",
            timeout=timeout,
            trust_env=False,
        )
    headers = {}
    tok = os.environ.get("HOLON_CONTROL_TOKEN")
    if tok:
        headers["Authorization"] = f"Bearer {tok.strip()}"
    return httpx2.Client(
        base_url=f"http://{meta.get('http_addr')}",
        timeout=timeout,
        headers=headers,
        verify=no_cas,
        trust_env=False,
    )


def _get(meta: Mapping[str, Json], path: str) -> JsonObject | None:
    try:
        with _client(meta) as c:
            r = c.get(path)
        got = r.json() if r.status_code == 200 else None
        return got if isinstance(got, dict) else None
    except Exception:  # noqa: BLE001 - unreachable means unhealthy
        return None


def _rotate_log() -> None:
    p = log_path()
    try:
        if p.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(p, p.with_suffix(".log.1"))
    except FileNotFoundError:
        pass


def _cleanup_stale(meta: JsonObject | None) -> bool:
    if meta is None or _alive(meta.get("pid")):
        return False
    meta_path().unlink(missing_ok=True)
    return True


def _arg(serve_args: list[str], flag: str) -> str | None:
    try:
        return serve_args[serve_args.index(flag) + 1]
    except (ValueError, IndexError):
        return None


def _check_socket_free(path: str | None) -> None:
    """A socket a live process answers on is not ours to take over (spec:
    socket-path takeover by an unrelated process fails closed): exit 4."""
    import socket

    if not path or not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(path)
    except OSError:
        return  # nobody answers: serve removes a stale socket itself
    finally:
        probe.close()
    rt = _get({"socket_path": path}, "/control/runtime/status")
    if rt and rt.get("home_dir") == str(HomeLayout.current().root):
        raise RejectedError(
            f"a foreground `holon serve` (pid {rt.get('pid')}) already serves this home on {path}",
            hint="it is running: `holon daemon status` reports it (state foreground); "
            "to run it as the daemon instead, stop it (Ctrl-C in its terminal) and start again",
            details={"socket_path": path, "pid": rt.get("pid")},
        )
    raise RejectedError(
        f"the socket {path} is owned by a live process that is not this home's daemon",
        hint="stop that process, or pass another --socket path",
        details={"socket_path": path},
    )


def _serve_owner(addr: str) -> str:
    """What answers on ``addr``, in words, when it is a ``holon serve``."""
    meta = {"http_addr": addr}
    rt = _get(meta, "/control/runtime/status")
    if rt and rt.get("home_dir"):
        return f" (held by holon serve, pid {rt.get('pid')}, of the home {rt['home_dir']})"
    if _get(meta, "/healthz") == {"ok": True}:
        return " (held by another holon serve)"
    return ""


def _check_port_free(listen: str | None) -> None:
    """A busy listen port is refused here, with the address and what holds
    it, rather than as a child that exited during startup."""
    from holon_cli.serve.http.listen import bind_tcp, parse_listen

    if not listen:
        return
    host, port = parse_listen(listen)
    if port == 0:
        return
    try:
        bind_tcp(host, port).close()
    except RejectedError as exc:
        raise RejectedError(
            f"{exc.message}{_serve_owner(listen)}",
            hint="each HOLON_HOME needs its own port: pass --listen 127.0.0.1:PORT "
            "(port 0 picks a free one) or set HOLON_HTTP_ADDR for this home",
            details={"http_addr": listen},
        ) from None


def start(serve_args: list[str], token: str | None, *, timeout_s: float = 20.0) -> JsonObject:
    """Launch ``holon serve <serve_args>`` detached and wait for ``/healthz``."""
    fp = fingerprint(serve_args, token)
    meta = read_meta()
    if meta is not None and _alive(meta.get("pid")):
        if meta.get("config_fingerprint") == fp:
            return {"already_running": True, **status(serve_args, token)}
        raise RejectedError(
            f"a daemon with a different configuration is running (pid {meta.get('pid')})",
            hint="run `holon daemon restart` with the new options",
            kind="rejected",
        )
    cleaned = _cleanup_stale(meta)
    _check_socket_free(_arg(serve_args, "--socket"))
    _check_port_free(_arg(serve_args, "--listen"))
    run_dir().mkdir(parents=True, exist_ok=True)
    _rotate_log()
    env = dict(os.environ)
    if token:
        env["HOLON_CONTROL_TOKEN"] = token
    with open(log_path(), "ab") as log:
        log.write(
            f"{clock.now_iso()} daemon: starting holon serve {' '.join(serve_args)}\n".encode()
        )
        log.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "holon_cli", "serve", *serve_args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env=env,
            # the user's umask: serve takes the private one itself and keeps
            # the user's for the commands it runs
            umask=user_umask(),
        )
    meta = {
        "v": 1,
        "pid": proc.pid,
        "started_at": clock.now_iso(),
        "http_addr": None,
        "socket_path": None,
        "config_fingerprint": fp,
        "version": __version__,
        "home_dir": str(HomeLayout.current().root),
    }
    write_snapshot(meta_path(), meta)
    end = time.monotonic() + timeout_s
    serve_json = run_dir() / "serve.json"
    while time.monotonic() < end:
        if proc.poll() is not None:
            break
        rec = read_snapshot(serve_json) if serve_json.exists() else None
        if rec and rec.get("pid") == proc.pid:
            meta.update(http_addr=rec.get("http_addr"), socket_path=rec.get("socket_path"))
            if _get(meta, "/healthz") == {"ok": True}:
                write_snapshot(meta_path(), meta)
                _clear_failure("startup")
                return {
                    "already_running": False,
                    "cleaned_stale": cleaned,
                    **status(serve_args, token),
                }
        time.sleep(0.05)
    code = proc.poll()
    if code is None:
        proc.kill()
        proc.wait()
        why = f"serve did not answer /healthz within {timeout_s:g} s"
    else:
        why = f"serve exited with code {code} during startup"
        reason = _last_error_line()
        if reason:
            why += f": {reason}"
    meta_path().unlink(missing_ok=True)
    _record_failure("startup", why)
    if code == 4:  # serve refused (policy or state): the same exit code here
        raise RejectedError(f"the daemon did not start: {why}", hint="see `holon daemon logs`")
    raise HolonError(f"the daemon did not start: {why}", hint="see `holon daemon logs`")


def _last_error_line() -> str | None:
    """The last ``Error:`` line serve wrote to the log (its refusal)."""
    try:
        with open(log_path(), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 8192))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        if line.startswith("Error:"):
            return line[len("Error:") :].strip()
    return None


def stop() -> JsonObject:
    meta = read_meta()
    pid = meta.get("pid") if meta is not None else None
    if meta is None or not isinstance(pid, int) or not _alive(pid):  # alive: a positive int
        stale = _cleanup_stale(meta)
        return {"was_running": False, "cleaned_stale": stale, "method": None}
    method = "control_surface"
    try:
        with _client(meta) as c:
            c.post("/control/runtime/shutdown")
    except Exception:  # noqa: BLE001 - fall back to signals
        method = "sigterm"
        _signal(pid, signal.SIGTERM)
    if not _wait_gone(pid, STOP_GRACE_S + 1):
        method = "sigterm"
        _signal(pid, signal.SIGTERM)
        if not _wait_gone(pid, STOP_GRACE_S):
            method = "sigkill"
            _signal(pid, signal.SIGKILL)
            if not _wait_gone(pid, 5):
                _record_failure("shutdown", f"pid {pid} survived SIGKILL")
                raise HolonError(f"pid {pid} did not exit", hint="see `holon daemon logs`")
    meta_path().unlink(missing_ok=True)
    if method == "sigkill":  # stopped, but not gracefully: worth a look
        _record_failure(
            "shutdown", f"serve (pid {pid}) ignored SIGTERM for {STOP_GRACE_S:g} s; killed"
        )
    else:
        _clear_failure("shutdown")
    return {"was_running": True, "pid": pid, "method": method}


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pid: int, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def status(serve_args: list[str] | None = None, token: str | None = None) -> JsonObject:
    meta = read_meta()
    home = str(HomeLayout.current().root)
    failure = read_snapshot(failure_path()) if failure_path().exists() else None
    out: JsonObject = {
        "state": "stopped",
        "pid": None,
        "home_dir": home,
        "socket_path": None,
        "http_addr": None,
        "healthy": False,
        "config_matches": None,
        "active_agent_count": 0,
        "active_task_count": 0,
        "processing_agent_count": 0,
        "waiting_agent_count": 0,
        "activity": None,
        "last_failure": None,
        "daemon_json": str(meta_path()),
    }
    if failure:
        out["last_failure"] = {
            k: failure.get(k) for k in ("occurred_at", "summary", "phase", "detail_hint")
        }
    _newest_failure(out, _persisted_turn_failure())
    if meta is None or not _alive(meta.get("pid")):
        fg = foreground_serve()
        if fg is not None:  # no daemon, but a `holon serve` in a terminal serves the home
            _take_runtime(out, fg)
            out.update(state="foreground", healthy=True)
            return out
    if meta is None:
        return out
    out.update(
        pid=meta.get("pid"),
        socket_path=meta.get("socket_path"),
        http_addr=meta.get("http_addr"),
        started_at=meta.get("started_at"),
        version=meta.get("version"),
    )
    if serve_args is not None:
        out["config_matches"] = meta.get("config_fingerprint") == fingerprint(serve_args, token)
    if not _alive(meta.get("pid")):
        out["state"] = "stale"
        return out
    out["state"] = "running"
    out["healthy"] = _get(meta, "/healthz") == {"ok": True}
    rt = _get(meta, "/control/runtime/status") if out["healthy"] else None
    if rt:
        _take_runtime(out, rt)
    return out


def _take_runtime(out: JsonObject, rt: JsonObject) -> None:
    """The activity a serve reports (``/control/runtime/status``) into ``out``."""
    for k in (
        "active_agent_count",
        "active_task_count",
        "processing_agent_count",
        "waiting_agent_count",
        "activity",
    ):
        out[k] = rt.get(k)
    for k in ("engine", "executor_id", "workers"):  # --engine dbos adds the last two
        if k in rt:
            out[k] = rt[k]
    for k in ("pid", "socket_path", "http_addr", "started_at", "version"):
        if rt.get(k) is not None and out.get(k) is None:
            out[k] = rt[k]
    _newest_failure(out, rt.get("last_failure"))


def foreground_serve() -> JsonObject | None:
    """A serve of this home that answers on one of its sockets (``holon
    serve`` in a terminal, a DBOS worker) without being the recorded
    daemon: its ``/control/runtime/status``, or ``None``. A serve of another
    home behind a socket of ours (``home_dir`` differs) does not count."""
    from holon_cli.serve.client import live_sockets

    home = str(HomeLayout.current().root)
    for sock in live_sockets():
        rt = _get({"socket_path": str(sock)}, "/control/runtime/status")
        if rt and rt.get("home_dir") == home:
            rt.setdefault("socket_path", str(sock))
            return rt
    return None


def _persisted_turn_failure() -> JsonObject | None:
    from holon_cli.runtime.agents.lifecycle import last_runtime_failure

    try:
        lf = last_runtime_failure()
    except HolonError:
        return None
    if lf is None:
        return None
    return {k: lf.get(k) for k in ("occurred_at", "summary", "phase", "detail_hint")}


def _newest_failure(out: JsonObject, cand: Json) -> None:
    if not isinstance(cand, dict) or not cand:
        return
    cur = out.get("last_failure")
    if not isinstance(cur, dict) or str(cand.get("occurred_at")) > str(cur.get("occurred_at")):
        out["last_failure"] = cand


def failures_by_phase() -> dict[str, JsonObject]:
    """The newest persisted failure of each lifecycle phase (``startup``,
    ``shutdown``); a record from before ``phases`` counts for its own phase."""
    try:
        rec = read_snapshot(failure_path()) if failure_path().exists() else None
    except HolonError:
        return {}
    if not isinstance(rec, dict):
        return {}
    phases = rec.get("phases")
    if isinstance(phases, dict):
        return {str(k): v for k, v in phases.items() if isinstance(v, dict)}
    phase = rec.get("phase")
    return {str(phase): {k: v for k, v in rec.items() if k != "v"}} if phase else {}
