"""Fixtures for the model-facing tools: a real agent store, an execution root
under tmp_path, and a helper that runs one tool call through ``execute``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from holon_cli.providers.base import ToolCall
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.tools.base import ToolContext, ToolResult, execute
from holon_cli.tools.catalog import registry

Call = Callable[..., ToolResult]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    store = open_agent(None)
    return ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=root,
        cwd=root,
        workspace_anchor=root,
        turn_id="turn_test",
    )


@pytest.fixture
def call(ctx: ToolContext) -> Call:
    tools = registry()

    def run(name: str, **arguments: Any) -> ToolResult:
        return execute(tools[name], ctx, ToolCall(id="call_1", name=name, arguments=arguments))

    return run


@pytest.fixture
def on_host(ctx: ToolContext) -> ToolContext:
    """``ctx`` with commands run unsandboxed (``execution.sandbox: none``):
    for tests that look at host pids, a command's parent process or files
    outside the execution root, where the sandbox is not the subject (its
    own tests are in test_exec_sandbox.py; ``ctx`` alone takes the default,
    ``auto``)."""
    ctx.config = {**ctx.config, "execution": {"sandbox": "none"}}
    return ctx
