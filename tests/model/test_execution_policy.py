"""The execution policy projection: every confinement named (write and child
processes included), nothing enforced without a sandbox, the capabilities
(dropped under bwrap, kept without), ``auto`` resolved on this machine, and
the prompt's execution binding tells the model the same as `holon debug
prompt --json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon_cli.model.execution_policy import CONFINEMENTS, Resolved, describe, execution_policy
from tests.inprocess_cli import bind_runner, run

__all__ = ["bind_runner"]


@pytest.mark.parametrize("config", [None, {}, {"execution": {"sandbox": "none"}}])
def test_nothing_is_enforced_without_a_sandbox(config: Any) -> None:
    # an unresolved auto counts as none: claiming less is safe
    p = execution_policy(config)
    assert p["backend"] == "host_local" and p["sandbox"] == "none"
    assert p["capabilities"] == "kept" and p["network"] == "on"
    states: dict[str, object] = dict(p)
    assert {k: states[k] for k in CONFINEMENTS} == dict.fromkeys(CONFINEMENTS, "not_enforced")


def test_auto_is_what_it_resolved_to() -> None:
    boxed = execution_policy({}, None, Resolved("bwrap"))
    assert boxed["sandbox_setting"] == "auto" and boxed["backend"] == "bwrap"
    assert boxed["capabilities"] == "dropped" and boxed["network"] == "on"
    assert boxed["network_confinement"] == "not_enforced"  # network stays on by default
    plain = execution_policy({}, None, Resolved("none", "bubblewrap is not installed"))
    assert plain["backend"] == "host_local" and plain["sandbox_reason"] == (
        "bubblewrap is not installed"
    )
    off = execution_policy({"execution": {"network": "off"}}, None, Resolved("bwrap"))
    assert off["network_confinement"] == "enforced" and off["network"] == "off"


@pytest.mark.parametrize(
    ("network", "net_state"),
    [
        (None, "enforced"),
        ("off", "enforced"),
        (False, "enforced"),
        ("on", "not_enforced"),
        (True, "not_enforced"),
    ],
)
def test_bwrap_confines_paths_writes_children_and_the_network_unless_on(
    network: Any, net_state: str
) -> None:
    ex: dict[str, Any] = {"sandbox": "bwrap"}
    if network is not None:
        ex["network"] = network
    p = execution_policy({"execution": ex})
    assert p["backend"] == "bwrap"
    assert p["path_confinement"] == p["write_confinement"] == "enforced"
    assert p["child_process_confinement"] == "enforced"
    assert p["network_confinement"] == net_state
    assert p["secret_confinement"] == "not_enforced"  # never claimed


def test_describe_names_both_sides() -> None:
    text = describe(execution_policy({"execution": {"sandbox": "bwrap", "network": "on"}}))
    assert text == (
        "execution policy: bwrap (confinement enforced: path, write, child-process; "
        "not enforced: network, secret; capabilities dropped)"
    )
    assert describe(execution_policy(None)).endswith(
        "(confinement enforced: none; not enforced: path, write, network, secret, child-process; "
        "capabilities kept)"
    )


def test_debug_prompt_projects_every_confinement(holon_home: Path) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text("execution:\n  sandbox: none\n")
    r = run("debug", "prompt", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["data"]
    assert d["execution_policy"] == {
        "backend": "host_local",
        "sandbox": "none",
        "sandbox_setting": "none",
        "sandbox_reason": "execution.sandbox is none",
        "network": "on",
        "capabilities": "kept",
        "path_confinement": "not_enforced",
        "write_confinement": "not_enforced",
        "network_confinement": "not_enforced",
        "secret_confinement": "not_enforced",
        "child_process_confinement": "not_enforced",
    }
    binding = next(s["text"] for s in d["sections"] if s["title"] == "execution binding")
    assert "not enforced: path, write, network, secret, child-process; capabilities kept" in (
        binding
    )


def test_the_prompt_tells_the_model_what_the_sandbox_enforces(holon_home: Path) -> None:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.prompt import build_frame
    from holon_cli.runtime.workspace import workspace_for
    from holon_cli.tools.catalog import default_catalog

    store = open_agent(None)
    ws = workspace_for(store.layout.home, store.read_record()["state"])
    cat = default_catalog()

    def build(policy: Any) -> Any:
        return build_frame(
            agent_id=store.agent_id,
            agent_home=store.layout.home,
            is_default_agent=True,
            ws=ws,
            message=None,
            tools=cat.specs,
            guidance=cat.guidance,
            work_queue=None,
            recent=None,
            policy=policy,
        )

    boxed = build(execution_policy({"execution": {"sandbox": "bwrap"}}))
    plain = build(None)
    assert boxed.sources["execution_policy"]["write_confinement"] == "enforced"
    binding = next(t for t in boxed.frame.system_blocks if t.startswith("# Execution\n"))
    assert binding.endswith(
        "execution policy: bwrap (confinement enforced: path, write, network, child-process; "
        "not enforced: secret; capabilities dropped)"
    )
    # another policy is another stable prefix: the cache key follows it
    assert boxed.frame.prompt_cache_key != plain.frame.prompt_cache_key
