"""Start and stop real ``holon serve`` processes for tests (always by pid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

HOLON = [sys.executable, "-m", "holon_cli"]


def scripted_model(tmp_path: Path, text: str = "done") -> str:
    script = tmp_path / "model.yaml"
    script.write_text(yaml.safe_dump({"loop": True, "steps": [{"text": text}]}))
    return f"scripted:{script}"


def start_serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, name: str = "serve"
) -> subprocess.Popen[bytes]:
    log = open(tmp_path / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [*HOLON, "serve", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, **(env or {})},
    )
    log.close()
    return proc


def wait_log(tmp_path: Path, needle: str, timeout: float = 15.0, name: str = "serve") -> str:
    end = time.monotonic() + timeout
    path = tmp_path / f"{name}.log"
    while time.monotonic() < end:
        text = path.read_text() if path.exists() else ""
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not in serve log:\n{path.read_text()}")


def wait_for(pred: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def serve_addr(home: Path, timeout: float = 20.0) -> str:
    """The actual http address of the serve started on this home (port 0)."""
    import json

    path = home / "run" / "serve.json"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            return "http://" + json.loads(path.read_text())["http_addr"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    raise AssertionError("serve did not write run/serve.json")
