"""A real foreground `holon serve` is seen (issue 36 §5): `holon daemon
status` says `foreground` (exit 0, its pid and socket), so the idiom
`holon daemon status || holon daemon start` starts nothing; `enqueue
--wait` says nothing of a missing serve and gets its answer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from serve_helpers import HOLON, scripted_model, serve_addr, start_serve, stop


@pytest.mark.slow
def test_daemon_status_or_start_with_a_foreground_serve(
    tmp_path: Path, holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path, "answered by serve"))
    proc = start_serve(tmp_path)
    try:
        serve_addr(holon_home)  # it is up
        out = subprocess.run(
            [*HOLON, "daemon", "status", "--json"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        d = json.loads(out.stdout)["data"]
        assert d["state"] == "foreground" and d["pid"] == proc.pid
        assert d["socket_path"] == str(holon_home / "run" / "holon.sock")
        idiom = subprocess.run(
            [
                "sh",
                "-c",
                f"{' '.join(HOLON)} daemon status >/dev/null || "
                f"{' '.join(HOLON)} daemon start --listen 127.0.0.1:0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert idiom.returncode == 0, idiom.stderr
        assert not (holon_home / "run" / "daemon.json").exists()  # nothing was started
        waited = subprocess.run(
            [*HOLON, "enqueue", "hello", "--wait", "--timeout", "60s"],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert waited.returncode == 0, waited.stderr
        assert waited.stdout == "answered by serve\n" and "waits:" not in waited.stderr
    finally:
        assert stop(proc) == 0
