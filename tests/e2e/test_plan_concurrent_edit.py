"""plan.md edited with $EDITOR by another process while a turn runs: the
descriptor is refreshed by turn end and the change is an event."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HOLON = [sys.executable, "-m", "holon_cli"]


def holon(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLON, *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.slow
def test_editor_edit_during_running_turn(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = tmp_path / "s.yaml"
    script.write_text(
        "steps:\n"
        "  - tool_calls:\n"
        "      - {id: mk, name: CreateWorkItem, arguments: {objective: 'Write the design', "
        "plan: 'v1 outline'}}\n"
        "  - tool_calls:\n"
        "      - {name: PickWorkItem, arguments: {work_item_id: '{{mk.work_item_id}}'}}\n"
        # hold the turn open until the test has edited the plan
        f"      - {{name: ExecCommand, arguments: {{cmd: 'for i in $(seq 100); do [ -e "
        f"{gate} ] && break; sleep 0.1; done'}}}}\n"
        "  - text: 'plan reviewed'\n"
    )
    assert holon("enqueue", "design it").returncode == 0
    turn = subprocess.Popen(
        [*HOLON, "turn", "--model", f"scripted:{script}", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 30
        items: list[dict] = []
        while time.time() < deadline and not items:
            out = holon("workitem", "list", "--json")
            items = json.loads(out.stdout)["data"]["work_items"] if out.returncode == 0 else []
            time.sleep(0.1)
        assert items, "the turn never created its work item"
        wid = items[0]["id"]
        before = items[0]["plan_artifact"]
        editor = tmp_path / "editor.sh"
        editor.write_text('#!/bin/sh\nprintf "\\n## Edited while the turn ran\\n" >> "$1"\n')
        editor.chmod(0o755)
        env = dict(os.environ, VISUAL=str(editor))
        edit = holon("workitem", "edit", wid, "--json", env=env)
        assert edit.returncode == 0, edit.stderr
        assert json.loads(edit.stdout)["data"]["changed"] is True
        assert turn.poll() is None, "the turn should still be running"
        gate.touch()
        stdout, stderr = turn.communicate(timeout=60)
    finally:
        if turn.poll() is None:
            turn.kill()
            turn.wait()
    assert turn.returncode == 0, stderr
    assert json.loads(stdout)["data"]["final_text"] == "plan reviewed"
    after = json.loads(holon("workitem", "show", wid, "--json").stdout)["data"]["work_item"][
        "plan_artifact"
    ]
    assert after["hash"] != before["hash"] and after["bytes"] > before["bytes"]
    assert "Edited while the turn ran" in after["preview"]
    assert (
        Path(after["path"]).read_text().startswith("v1 outline")
        or "v1 outline" in Path(after["path"]).read_text()
    )
    events = [json.loads(line) for line in holon("tail", "--jsonl").stdout.splitlines()]
    changed = [e for e in events if e["kind"] == "plan_artifact_changed"]
    assert changed and all(
        e.get("work_item_id") == wid or e["data"].get("work_item_id") == wid for e in changed
    )
