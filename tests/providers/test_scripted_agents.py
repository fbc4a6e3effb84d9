"""Per-agent sections of a scripted model (``agents: {<glob>: {steps}}``):
one script drives a parent and its children, each from its own cursor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from provider_helpers import build_request

from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.scripted import ScriptedTransport, load_script

SCRIPT = {
    "agents": {
        "child-a*": {"steps": ["child A answer"]},
        "child-*": {"steps": ["other child, 1", "other child, 2"], "loop": True},
    },
    "steps": ["parent 1", "parent 2"],
}


def write(tmp_path: Path, data: Any) -> Path:
    p = tmp_path / "script.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return p


def ask(t: ScriptedTransport, agent: str, state: Path | None) -> str:
    req = build_request(state_dir=state)
    req.agent_id = agent
    return t.complete(req).text


def test_each_agent_replays_its_own_section_first_glob_wins(tmp_path: Path) -> None:
    t = ScriptedTransport(str(write(tmp_path, SCRIPT)))
    states = {a: tmp_path / a for a in ("main", "child-a1", "child-b1")}
    assert ask(t, "main", states["main"]) == "parent 1"
    assert ask(t, "child-a1", states["child-a1"]) == "child A answer"  # first glob
    assert ask(t, "child-b1", states["child-b1"]) == "other child, 1"
    assert ask(t, "main", states["main"]) == "parent 2"
    assert ask(t, "child-b1", states["child-b1"]) == "other child, 2"
    assert ask(t, "child-b1", states["child-b1"]) == "other child, 1"  # section loops
    with pytest.raises(ProviderFailure) as ei:
        ask(t, "child-a1", states["child-a1"])
    assert ei.value.kind == "script_exhausted" and "agents['child-a*']" in ei.value.message


def test_in_memory_cursors_are_per_agent(tmp_path: Path) -> None:
    t = ScriptedTransport(str(write(tmp_path, SCRIPT)))
    assert ask(t, "child-b2", None) == "other child, 1"
    assert ask(t, "main", None) == "parent 1"
    assert ask(t, "child-b2", None) == "other child, 2"


def test_without_plain_steps_an_unmatched_agent_is_a_script_error(tmp_path: Path) -> None:
    t = ScriptedTransport(str(write(tmp_path, {"agents": {"child-*": ["hi"]}})))
    assert ask(t, "child-x", tmp_path / "c") == "hi"
    with pytest.raises(ProviderFailure) as ei:
        ask(t, "main", tmp_path / "m")
    assert ei.value.kind == "script_error"
    assert "'main'" in ei.value.message and "'child-*'" in ei.value.message


@pytest.mark.parametrize(
    ("agents", "needle"),
    [
        ([], "'agents' must be a non-empty mapping"),
        ({"child-*": {"steps": []}}, "agents['child-*']: 'steps' must be a non-empty list"),
        ({"child-*": {"steps": ["x"], "stepz": 1}}, "agents['child-*']: unknown key 'stepz'"),
        ({"child-*": {"steps": ["x"], "loop": "yes"}}, "'loop' must be true or false"),
        ({"child-*": {"steps": [{"txt": "x"}]}}, "agents['child-*'] step 1: unknown key 'txt'"),
        ({"child-*": 5}, "agents['child-*']: expected a mapping"),
    ],
)
def test_bad_sections_name_the_glob_and_step(tmp_path: Path, agents: Any, needle: str) -> None:
    path = write(tmp_path, {"agents": agents, "steps": ["x"]})
    with pytest.raises(ProviderFailure) as ei:
        load_script(path)
    assert ei.value.kind == "script_error" and needle in ei.value.message, ei.value.message
