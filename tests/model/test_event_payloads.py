"""The event model names the data shape of every event kind (the generated
docs/reference/events.md reads it), and the events the runtime writes fit
their shape: every key a turn's events carry is a field of their TypedDict."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any, get_args

from holon_cli.model import events


def test_every_kind_has_its_payload_entry() -> None:
    kinds = set(get_args(events.EventKind))
    payloads = events.event_payloads()
    assert set(payloads) == kinds
    for kind, shapes in payloads.items():
        for td in shapes:
            assert hasattr(td, "__required_keys__"), (kind, td)  # a TypedDict


def test_the_presentation_table_knows_every_kind() -> None:
    from holon_cli.runtime import presentation

    for kind in get_args(events.EventKind):
        row = presentation.present({"kind": kind, "data": {}})
        # an unknown kind would come back as a bare trace row titled by its kind
        assert row["title"] != kind or kind == "tool_executed", kind
    assert set(presentation.DEPENDS_ON_DATA) <= set(get_args(events.EventKind))


def _fields(kind: str) -> set[str]:
    out: set[str] = set()
    for td in events.event_payloads()[kind]:
        out |= set(typing.get_type_hints(td, localns={"TimerPurpose": Any}))
    return out


def test_a_real_turn_writes_only_documented_fields(tmp_path: Path, script_runner: Any) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        "steps:\n"
        "  - tool_calls: [{name: ExecCommand, arguments: {cmd: 'echo hi'}}]\n"
        "  - tool_calls: [{name: CreateWorkItem, arguments: {objective: 'Ship it'}}]\n"
        "  - done\n"
    )
    res = script_runner.run(
        [
            "holon",
            "run",
            "--agent",
            "main",
            "--create-agent",
            "--model",
            f"scripted:{script}",
            "go",
        ],
        cwd=tmp_path,
        print_result=False,
    )
    # the script runs out on the work item's continuation: a failed turn's events too
    assert res.returncode in (0, 5), res.stderr
    res = script_runner.run(["holon", "tail", "--jsonl", "--limit", "500"], print_result=False)
    seen = [json.loads(line) for line in res.stdout.splitlines()]
    assert len({e["kind"] for e in seen}) >= 8
    for event in seen:
        extra = set(event.get("data") or {}) - _fields(event["kind"]) - {"turn_id"}
        assert not extra, (event["kind"], extra)
