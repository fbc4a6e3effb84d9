"""`holon enqueue --wait` against a real `holon serve` (scripted model, no
network): the waiting process prints the answer serve's turn gave."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from serve_helpers import HOLON, scripted_model, start_serve, stop, wait_log


@pytest.mark.slow
def test_enqueue_wait_gets_the_answer_from_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_MODEL", scripted_model(tmp_path, text="served answer"))
    subprocess.run([*HOLON, "agent", "create", "main"], check=True, capture_output=True)
    proc = start_serve(tmp_path)
    try:
        wait_log(tmp_path, "watching")
        res = subprocess.run(
            [*HOLON, "enqueue", "question", "--wait", "--timeout", "30s"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr + (tmp_path / "serve.log").read_text()
        assert res.stdout == "served answer\n"
        res = subprocess.run(
            [*HOLON, "enqueue", "again", "--wait", "--timeout", "30s", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        d = json.loads(res.stdout)["data"]
        assert res.returncode == 0 and d["status"] == "processed"
        assert d["final_text"] == "served answer" and d["brief"]["text"] == "served answer"
    finally:
        assert stop(proc) == 0
