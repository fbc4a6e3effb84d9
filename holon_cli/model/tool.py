"""What one tool call is, sees and did, as the turn loop and the tools share
it: the call's context (:class:`ToolContext`), its result (:class:`ToolResult`)
with typed effects (:class:`ToolEffects`), the model-visible error receipt
(:func:`render_error`), and :class:`Toolbox`, the small protocol of the tool
catalog a turn is handed.

The turn loop imports this module, never ``tools/``: it offers
``Toolbox.specs``, runs each call through ``Toolbox.execute`` and reads the
result's effects, so it learns no tool's name. ``tools/catalog.py`` provides
the built-in catalog; the callers above the runtime (``holon turn``, ``holon
run``, ``holon serve``) construct it and pass it down.

Pure values: no I/O (``ToolContext.store`` is the agent's store, typed loosely
so this layer does not import ``store/``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from holon_cli.model.config import HolonConfig
    from holon_cli.model.events import ToolErrorEnvelope, ToolWarning
    from holon_cli.model.memory import CommandRun
    from holon_cli.model.provider import ToolCall, ToolSpec

MAX_ERROR_DETAIL_CHARS = 2000


@dataclass(frozen=True)
class SleepRequest:
    """The model asked to rest: the turn ends after the current round."""

    duration_ms: int | None = None  # None: until the next wake signal
    reason: str | None = None


@dataclass
class ToolEffects:
    """What one successful call did, as far as the turn loop cares.

    Handlers report through ``ctx.report`` (a fresh record per call);
    ``tools.base.execute`` attaches it to the :class:`ToolResult` of a call
    that succeeded (a failed call reports nothing). The loop reads these
    fields and never a tool's name, so a new tool is one module plus one
    catalog line. To extend: add a field here with a neutral default and read
    it in the turn loop's ``run_tools`` step.
    """

    # a work item was created, picked, updated or completed (resets the
    # stale-round reminder; focus is re-read after the round)
    work_item_mutated: bool = False
    # the call changed the current work item (to ``current_work_item_id``)
    focus_changed: bool = False
    current_work_item_id: str | None = None
    # the work item the call concerns (its events and transcript bind to it)
    work_item_id: str | None = None
    # a work_done brief this call wrote (the turn then writes no result brief
    # repeating the same text)
    completion_brief_id: str | None = None
    # shell command lines the call ran (skill activation reads them)
    commands: list[str] = field(default_factory=list)
    # files the call created, changed, moved or deleted (working memory)
    files_touched: list[str] = field(default_factory=list)
    # commands the call ran to their end: {cmd, exit_status} (working memory)
    command_runs: list[CommandRun] = field(default_factory=list)
    # background tasks the call started
    tasks_started: list[str] = field(default_factory=list)
    # the model asked to rest after this round
    sleep: SleepRequest | None = None
    # an external wait (timer, trigger, task result) the call recorded
    external_wait: dict[str, Any] | None = None
    # the active workspace changed (UseWorkspace): later calls and rounds run
    # in the new execution root
    workspace_changed: bool = False


def _no_config() -> HolonConfig:
    return {}


@dataclass
class ToolContext:
    """What a tool may see and touch during one call."""

    store: Any  # holon_cli.store.agent_store.AgentStore
    agent_id: str
    execution_root: Path
    cwd: Path
    workspace_anchor: Path
    turn_id: str
    message: Mapping[str, Any] | None = None  # the turn's Envelope
    round_text: str = ""  # assistant text of the same round (CompleteWorkItem reports)
    round_calls: list[ToolCall] = field(default_factory=list)
    config: HolonConfig = field(default_factory=lambda: _no_config())
    # turn-local scratch state shared by the calls of one turn (e.g. Enqueue's
    # follow-up count); the turn loop never reads it
    effects: dict[str, Any] = field(default_factory=dict)
    # what the current call did: reset by ``execute`` before each call
    report: ToolEffects = field(default_factory=ToolEffects)


@dataclass
class ToolResult:
    ok: bool
    content: str  # exactly what the model sees
    data: dict[str, Any] = field(default_factory=dict)
    error: ToolErrorEnvelope | None = None
    warnings: list[ToolWarning] = field(default_factory=list)
    effects: ToolEffects = field(default_factory=ToolEffects)


class Toolbox(Protocol):
    """The tools one turn offers (``tools.catalog.ToolCatalog`` is the built-in
    one): their provider specs, per-tool prompt guidance, and a way to run a
    call. ``execute`` never raises for a failing tool: the failure is an error
    :class:`ToolResult` (an unknown name included).

    A toolbox may also have ``for_agent(store, cfg, *, start=True)``,
    returning the toolbox of one agent (the built-in catalog adds the
    agent's MCP servers' tools there); ``run_turn`` calls it under the turn
    lock before anything is dequeued, so it may raise to refuse the turn."""

    @property
    def specs(self) -> list[ToolSpec]: ...

    @property
    def guidance(self) -> dict[str, str]: ...

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult: ...


def render_error(tool_name: str | None, env: ToolErrorEnvelope) -> str:
    """The shared model-visible error receipt: bounded JSON."""
    out: dict[str, object] = {
        "ok": False,
        "tool_name": tool_name,
        "kind": env["kind"],
        "message": env["message"],
    }
    if env.get("recovery_hint"):
        out["hint"] = env["recovery_hint"]
    details = env.get("details") or {}
    if details.get("field"):
        out["field"] = details["field"]
    out["retryable"] = bool(env.get("retryable"))
    if details:
        text = json.dumps(details, ensure_ascii=False, default=str)
        if len(text) > MAX_ERROR_DETAIL_CHARS:
            import hashlib  # OpenSSL: loaded only for an oversized detail

            out["details"] = {
                "preview": text[:MAX_ERROR_DETAIL_CHARS],
                "digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16],
                "truncated_chars": len(text) - MAX_ERROR_DETAIL_CHARS,
            }
        else:
            out["details"] = details
    return json.dumps(out, ensure_ascii=False, default=str)
