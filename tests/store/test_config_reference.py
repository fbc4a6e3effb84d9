"""Every key of the config schema documents itself: a description, what
holds when it is not set, and an example that the schema accepts where the
key lives (docs/reference/config.md prints all three, generated from the
schema); the defaults stated agree with the constants the readers use."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from holon_cli.model import config as mc
from holon_cli.store import config_schema as cs

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from docgen import ref_config  # noqa: E402

# a minimal valid entry of each mapping section an example is placed into
BASE: dict[type, dict[str, Any]] = {
    mc.ProviderConfig: {
        "transport": "openai_chat_completions",
        "base_url": "http://127.0.0.1:9/v1",
    },
    mc.PriceConfig: {"input": 1, "output": 2},
}


def _leaves() -> list[tuple[str, type, str, Any, dict[str, Any]]]:
    out = []
    for cls, paths in ref_config.sections():
        for key, tp, meta in ref_config.leaves(cls):
            for path in paths:
                out.append((path, cls, key, tp, meta))
    return out


LEAVES = _leaves()


def _place(path: str, section: dict[str, Any]) -> dict[str, Any]:
    """``section`` at ``path`` (``<name>`` read as ``example``) in a config."""
    root: dict[str, Any] = {}
    node = root
    parts = [p if p != "<name>" else "example" for p in path.split(".") if p]
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if parts:
        node[parts[-1]] = section
        return root
    return section


def test_every_key_has_a_description_a_default_and_an_example() -> None:
    assert len(LEAVES) > 90
    missing = [
        f"{path}.{key}".lstrip(".")
        for path, _cls, key, _tp, meta in LEAVES
        if not meta.get("doc")
        or not (meta.get("required") or meta.get("default"))
        or (not meta.get("required") and "example" not in meta)
    ]
    assert not missing, f"keys without doc, default or example: {missing}"


@pytest.mark.parametrize(
    ("path", "key"),
    sorted({(p, k) for p, _c, k, _t, m in LEAVES if "example" in m}),
    ids=lambda v: v or "top",
)
def test_each_example_is_accepted_where_the_key_lives(path: str, key: str) -> None:
    ((cls, meta),) = {
        (c, id(m)): (c, m) for p, c, k, _t, m in LEAVES if (p, k) == (path, key)
    }.values()
    section: dict[str, Any] = dict(BASE.get(cls, {}))
    if cls is mc.McpServerConfig and key != "url":
        http = str(meta["doc"]).startswith("streamable HTTP")
        section.update({"url": "http://127.0.0.1:9/mcp"} if http else {"command": "uvx"})
    if cls is mc.McpServerConfig and key == "url":
        section.pop("command", None)
    section[key] = meta["example"]
    config = _place(path, section)
    if key == "cost_usd_per_day":  # a cost budget needs the model's price
        config.update(model="openai/gpt-4.1", prices={"openai/gpt-4.1": {"input": 2, "output": 8}})
    cs.validate_config(config)  # raises ConfigError naming the key


def test_a_bad_example_would_be_caught() -> None:
    """The check above is real: a wrong example fails it."""
    with pytest.raises(Exception, match="runtime.max_provider_rounds"):
        cs.validate_config({"runtime": {"max_provider_rounds": "twenty"}})


# the constants the readers fall back to, for the defaults the schema states
CODE_DEFAULTS = {
    "runtime.max_provider_rounds": ("holon_cli.runtime.turn.loop", "DEFAULT_MAX_ROUNDS"),
    "runtime.exec_timeout_ms": ("holon_cli.tools.exec_command.batch", "DEFAULT_EXEC_TIMEOUT_MS"),
    "runtime.exec_yield_time_ms": ("holon_cli.tools.exec_command", "DEFAULT_YIELD_TIME_MS"),
    "runtime.default_tool_output_tokens": (
        "holon_cli.tools.exec_command.budget",
        "DEFAULT_OUTPUT_TOKENS",
    ),
    "runtime.max_tool_output_tokens": (
        "holon_cli.tools.exec_command.budget",
        "HARD_MAX_OUTPUT_TOKENS",
    ),
    "runtime.provider_timeout_s": ("holon_cli.providers.base", "DEFAULT_TIMEOUT_S"),
    "runtime.context_budget_tokens": (
        "holon_cli.runtime.memory.compaction",
        "DEFAULT_BUDGET_TOKENS",
    ),
    "runtime.default_recheck_after_ms": (
        "holon_cli.runtime.workitems.mutations",
        "DEFAULT_RECHECK_AFTER_MS",
    ),
    "runtime.task_output_max_bytes": ("holon_cli.runtime.tasks.launch", "DEFAULT_OUTPUT_CAP_BYTES"),
    "runtime.outputs_max_bytes": ("holon_cli.runtime.tasks.recovery", "DEFAULT_OUTPUTS_MAX_BYTES"),
    "retention.min_free_bytes": ("holon_cli.store.retention", "DEFAULT_MIN_FREE_BYTES"),
    "ingress.rate_per_minute": ("holon_cli.serve.http.ingress", "DEFAULT_RATE_PER_MINUTE"),
    "serve.max_connections": ("holon_cli.serve.http.server", "MAX_CONNECTIONS"),
}


@pytest.mark.parametrize("key", sorted(CODE_DEFAULTS))
def test_stated_defaults_agree_with_the_code(key: str) -> None:
    import importlib

    module, name = CODE_DEFAULTS[key]
    value = getattr(importlib.import_module(module), name)
    (meta,) = [m for p, _c, k, _t, m in LEAVES if f"{p}.{k}".lstrip(".") == key]
    stated = str(meta["default"]).split(" ")[0]
    assert float(stated) == float(value), (key, stated, value)


def test_stale_reminder_defaults_agree_with_the_code() -> None:
    from holon_cli.runtime.workitems.reminders import STALE_REMINDER_DEFAULTS

    meta = {k: m for k, _tp, m in ref_config.leaves(mc.RuntimeConfig)}
    assert meta  # the section is introspectable
    for name, key in (
        ("work_item_stale_reminder_rounds", "rounds"),
        ("work_item_stale_reminder_cooldown_rounds", "cooldown_rounds"),
        ("work_item_stale_reminder_max_tokens", "max_tokens"),
    ):
        assert meta[name]["default"] == str(STALE_REMINDER_DEFAULTS[key]), name
