"""The turn takes its tools as an argument (a ``Toolbox``): it offers the
catalog's specs, runs each call through the catalog, reads the result's typed
effects, and imports no tool module of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from holon_cli.model.provider import ToolCall, ToolSpec
from holon_cli.model.tool import SleepRequest, ToolContext, ToolEffects, ToolResult
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.turn import run_turn

ROOT = Path(__file__).resolve().parents[2]


class OneTool:
    """A catalog of one tool, ``Nap``, that asks the turn to rest."""

    def __init__(self) -> None:
        self.specs = [ToolSpec("Nap", "rest a while", {"type": "object", "properties": {}})]
        self.guidance = {"Nap": "Nap when there is nothing to do."}
        self.calls: list[tuple[str, str]] = []

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        self.calls.append((ctx.turn_id, call.name))
        if call.name != "Nap":
            return ToolResult(False, '{"ok": false, "kind": "unknown_tool"}')
        return ToolResult(True, "resting", effects=ToolEffects(sleep=SleepRequest(reason="nap")))


def test_a_turn_offers_and_runs_the_catalog_it_is_given(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {"tool_calls": [{"name": "Nap", "arguments": {}}]},
                    {"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "true"}}]},
                ]
            }
        )
    )
    admit("rest")
    catalog = OneTool()
    res = run_turn(None, cli_model=f"scripted:{script}", catalog=catalog)
    # the Nap call's typed effect ended the turn after its round
    assert res.status == "completed" and res.model_rounds == 1
    assert catalog.calls == [(res.turn_id, "Nap")]
    store = open_agent(None)
    (built,) = [e for e in store.events.records() if e["kind"] == "turn_context_built"]
    assert built["data"]["tool_count"] == 1
    (result,) = [t for t in store.ledger("transcript").records() if t["kind"] == "tool_result"]
    assert result["tool_name"] == "Nap" and result["output"] == "resting"


def test_the_turn_loop_imports_no_tool_module() -> None:
    code = (
        "import sys, holon_cli.runtime.turn, holon_cli.runtime.run\n"
        "print(sorted(m for m in sys.modules if m.startswith('holon_cli.tools')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "[]"
