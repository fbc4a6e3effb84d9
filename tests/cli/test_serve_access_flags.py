"""`--host/--port/--token/--access` on `holon serve` and `holon daemon
start|restart|status` (the daemon contract): how they combine with
`--listen`/`--token-file`, what each access mode refuses before anything
starts, and that the daemon hands its child the same effective options
(the token in its environment, never on its command line); `holon daemon
logs` shows start-up and shutdown failures separately."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon_cli.cli.cmd_daemon import _serve_args
from holon_cli.cli.cmd_serve import resolve_listen
from holon_cli.errors import RejectedError, UsageError
from holon_cli.serve import daemon as d
from holon_cli.serve import daemon_logs
from tests.inprocess_cli import bind_runner, run

__all__ = ["bind_runner"]

TOKEN = "tok-0123456789-SECRET"


def flags(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "listen": None,
        "host": None,
        "port": None,
        "socket_path": None,
        "advertise": None,
        "token": None,
        "token_file": None,
        "access": None,
        "concurrency": 4,
    }
    return {**base, **kw}


@pytest.fixture(autouse=True)
def _no_env_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLON_HTTP_ADDR", raising=False)
    monkeypatch.delenv("HOLON_CONTROL_TOKEN", raising=False)


@pytest.mark.parametrize(
    ("listen", "host", "port", "env", "want"),
    [
        (None, None, None, None, "127.0.0.1:7878"),
        (None, "0.0.0.0", None, None, "0.0.0.0:7878"),
        (None, None, 9000, "127.0.0.2:1", "127.0.0.2:9000"),
        (None, "::1", 5, None, "[::1]:5"),
        (None, "[::1]", 0, None, "[::1]:0"),
        ("127.0.0.1:8080", None, None, "127.0.0.2:1", "127.0.0.1:8080"),
    ],
)
def test_host_and_port_are_the_halves_of_listen(
    monkeypatch: pytest.MonkeyPatch,
    listen: str | None,
    host: str | None,
    port: int | None,
    env: str | None,
    want: str,
) -> None:
    if env:
        monkeypatch.setenv("HOLON_HTTP_ADDR", env)
    assert resolve_listen(listen, host, port) == want


def test_listen_with_host_or_port_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--listen cannot be combined with --host/--port"):
        resolve_listen("127.0.0.1:1", None, 2)
    r = run("serve", "--listen", "127.0.0.1:0", "--host", "127.0.0.1")
    assert r.returncode == 2 and "--host/--port" in r.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--port", "70000"], 2, "--port"),
        (["--host", "bad host"], 2, "--host"),
        (["--token", TOKEN, "--token-file", "/dev/null"], 2, "--token and --token-file"),
        (["--token", "  "], 2, "--token is empty"),
        (["--access", "public"], 2, "--access"),
        # non-loopback without a token: refused (the default access is local)
        (["--host", "0.0.0.0", "--port", "0"], 4, "without a control token"),
        (["--access", "token"], 4, "--access token needs a control token"),
        (
            ["--access", "local", "--host", "0.0.0.0", "--token", TOKEN],
            4,
            "--access local serves this machine only",
        ),
    ],
)
def test_bad_access_options_are_refused_before_anything_starts(
    holon_home: Path, args: list[str], code: int, needle: str
) -> None:
    for cmd in (["serve"], ["daemon", "start"]):
        r = run(*cmd, *args)
        assert r.returncode == code, (cmd, r.stderr)
        assert needle in r.stderr
        assert TOKEN not in r.stderr + r.stdout
    assert d.read_meta() is None and not (holon_home / "run" / "serve.json").exists()


def test_daemon_passes_the_effective_options_and_keeps_the_token_off_argv(
    tmp_path: Path,
) -> None:
    args, token = _serve_args(flags(host="0.0.0.0", port=7000, token=TOKEN))
    assert args[:2] == ["--listen", "0.0.0.0:7000"]
    assert args[args.index("--access") + 1] == "token"  # the default with a token
    assert token == TOKEN and TOKEN not in " ".join(args)
    tf = tmp_path / "tok"
    tf.write_text(TOKEN + "\n")
    same, same_token = _serve_args(flags(listen="0.0.0.0:7000", token_file=str(tf)))
    # --host/--port and --listen, --token and --token-file: the same effective config
    assert d.fingerprint(args, token) == d.fingerprint(same, same_token)
    local, _ = _serve_args(flags())
    assert local[local.index("--access") + 1] == "local"
    forced, _ = _serve_args(flags(access="token", token=TOKEN))
    assert d.fingerprint(forced, TOKEN) != d.fingerprint(
        _serve_args(flags(access="local", token=TOKEN))[0], TOKEN
    )


def test_access_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLON_CONTROL_TOKEN", TOKEN)
    args, token = _serve_args(flags(access="token", host="0.0.0.0"))
    assert token == TOKEN and "--access" in args
    with pytest.raises(RejectedError):
        monkeypatch.delenv("HOLON_CONTROL_TOKEN")
        _serve_args(flags(access="token"))


def test_logs_show_startup_and_shutdown_failures_separately(holon_home: Path) -> None:
    d._record_failure("startup", "serve exited with code 4 during startup: port busy")
    d._record_failure("shutdown", "serve (pid 42) ignored SIGTERM for 10 s; killed")
    res = daemon_logs.logs()
    assert res["startup_failure"]["summary"].endswith("port busy")
    assert res["shutdown_failure"]["phase"] == "shutdown"
    # status reads the newest one, as before
    assert d.status()["last_failure"]["phase"] == "shutdown"
    human = run("daemon", "logs")
    assert human.returncode == 0
    assert "startup failure: " in human.stderr and "port busy" in human.stderr
    assert "shutdown failure: " in human.stderr and "ignored SIGTERM" in human.stderr
    data = json.loads(run("daemon", "logs", "--json").stdout)["data"]
    assert data["startup_failure"]["summary"].endswith("port busy")
    assert "phases" not in data["last_failure"]
    # a later successful start clears its own phase only
    d._clear_failure("startup")
    res = daemon_logs.logs()
    assert res["startup_failure"] is None and res["shutdown_failure"] is not None
    assert d.status()["last_failure"]["phase"] == "shutdown"
    d._clear_failure("shutdown")
    assert daemon_logs.logs()["shutdown_failure"] is None and not d.failure_path().exists()
    assert "startup failure: none" in run("daemon", "logs").stderr


def test_a_failure_file_from_before_phases_is_read_by_its_phase(holon_home: Path) -> None:
    d.run_dir().mkdir(parents=True, exist_ok=True)
    old = {"v": 1, "occurred_at": "2026-01-01T00:00:00Z", "summary": "boom", "phase": "startup"}
    d.failure_path().write_text(json.dumps(old))
    res = daemon_logs.logs()
    assert res["startup_failure"]["summary"] == "boom" and res["shutdown_failure"] is None
    d._record_failure("shutdown", "killed")
    assert daemon_logs.logs()["startup_failure"]["summary"] == "boom"


def test_a_worker_socket_name_too_long_for_af_unix_gets_a_short_one(tmp_path: Path) -> None:
    """``serve --engine dbos`` names its socket after the executor id (host
    and pid); under a deep home that passes AF_UNIX's 107 bytes, and the
    default then becomes a digest of the name instead of an error."""
    import os

    from holon_cli.cli.cmd_serve import _default_socket
    from holon_cli.serve.http.listen import UNIX_PATH_MAX

    run = tmp_path / "run"
    name = "holon-host-1234.sock"
    assert _default_socket(run, name) == str(run / name)
    # a pod-style host name of 63 bytes does not fit beside this home
    long_name = f"holon-{'h' * 63}-1234.sock"
    assert len(os.fsencode(str(run / long_name))) > UNIX_PATH_MAX
    got = _default_socket(run, long_name)
    assert os.path.dirname(got) == str(run)
    assert os.path.basename(got).startswith("w-") and got.endswith(".sock")
    assert len(os.fsencode(got)) <= UNIX_PATH_MAX
    assert got == _default_socket(run, long_name)  # the same worker, the same name
    assert got != _default_socket(run, long_name.replace("1234", "1235"))
    deep = tmp_path / ("d" * 100) / "run"
    # the local engine's holon.sock is what clients look for: never renamed
    assert _default_socket(deep, "holon.sock") == str(deep / "holon.sock")
