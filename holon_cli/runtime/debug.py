"""``holon debug``: the prompt frame with instruction provenance, and the
per-turn latency breakdown derived from the event ledger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from holon_cli.model.provider import item_to_dict
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.memory import compaction as cp
from holon_cli.runtime.memory import working
from holon_cli.runtime.memory.compaction import context_budget, fixed_tokens
from holon_cli.runtime.memory.history import PromptHistory, earlier_conversation
from holon_cli.runtime.prompt import active_skill_rows, build_frame
from holon_cli.runtime.tasks.sandbox import projection as execution_projection
from holon_cli.runtime.turn import context_trigger
from holon_cli.runtime.turn.context import recent_chars_for
from holon_cli.runtime.workspace import workspace_for
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.config import load_config
from holon_cli.store.layout import default_agent_id

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.tool import Toolbox


def _preview_message(store: AgentStore, text: str) -> Envelope:
    """The message ``holon debug prompt TEXT`` shows the frame for (never admitted)."""
    from holon_cli import clock
    from holon_cli.model.envelope import build_envelope

    return build_envelope(
        message_id="msg_preview",
        agent_id=store.agent_id,
        created_at=clock.now_iso(),
        body={"type": "text", "text": text},
    )


def debug_prompt(store: AgentStore, *, catalog: Toolbox, text: str | None = None) -> dict[str, Any]:
    rec = store.read_record()
    state = rec["state"]
    ws = workspace_for(store.layout.home, state)
    cfg = load_config()
    bind = getattr(catalog, "for_agent", None)
    if bind is not None:  # the agent's own tools (MCP: cached lists only, nothing started)
        catalog = bind(store, cfg, start=False)
    from holon_cli.runtime.agents.profiles import narrow
    from holon_cli.runtime.children.context import block_for

    catalog = narrow(catalog, rec["identity"])  # a profiled child's own tools
    specs, guidance = catalog.specs, catalog.guidance

    budget = context_budget(cfg)
    wm = working.state_of(state.get("working_memory"))
    # the conversation window the next turn's requests carry (what a first
    # turn would start it with, when there is none yet: nothing is written)
    hist = PromptHistory.load(store, repair=False)
    if hist.exists:
        memory, summary = hist.memory, hist.summary
    else:
        memory = wm if wm.get("current_working_memory") else None
        summary = earlier_conversation(
            store, exclude_messages=set(), exclude_turns=set(), max_chars=recent_chars_for(budget)
        )
    message = _preview_message(store, text) if text is not None else None
    built = build_frame(
        agent_id=store.agent_id,
        agent_home=store.layout.home,
        is_default_agent=rec["identity"]["kind"] == "default"
        or store.agent_id == default_agent_id(),
        ws=ws,
        message=message,
        tools=specs,
        guidance=guidance,
        work_queue=wi.project_work_queue(
            store, bound_work_item_id=state.get("current_work_item_id")
        ),
        recent=summary,
        active_skills=active_skill_rows(list(state.get("active_skills") or []), {}),
        trigger=context_trigger(
            store, provision=rec["identity"].get("ownership", "self_owned") == "self_owned"
        ),
        working_memory=working.render(
            working.state_of(memory), max_chars=working.memory_chars_for(budget)
        )
        if memory
        else None,
        memory_delta=working.render_delta(wm),
        policy=execution_projection(cfg, store.agent_id),
        inherited=block_for(store, dict(rec["identity"])),
        memory_revision=int(memory["working_memory_revision"]) if memory else 0,
        compression_epoch=hist.compression_epoch,
        history_digest=hist.digest(),
    )
    f = built.frame
    return {
        "agent_id": store.agent_id,
        **built.sources,
        "prompt_cache_key": f.prompt_cache_key,
        "context_fingerprint": f.context_fingerprint,
        # the frame's cache record (runtime spec: ProviderPromptCache)
        "cache": f.cache.to_dict() if f.cache is not None else None,
        # in prompt order, each with its text (the contract's `sections[] {title, text}`)
        "sections": [{**m, "text": t} for m, t in zip(built.sections, built.texts, strict=True)],
        "system_prompt": f.system_prompt,
        "system_blocks": f.system_blocks,
        "context_blocks": f.context_blocks,
        # the first ``stable_blocks`` context blocks come before the history
        "stable_blocks": f.stable_blocks,
        # estimated tokens (bytes / 4): instructions and tools, context blocks, history
        "tokens": {
            "fixed": fixed_tokens(f, specs),
            "context": cp.frame_tokens(f, specs) - fixed_tokens(f, specs),
            "history": hist.tokens(),
            "budget": budget,
        },
        "history": {
            "path": str(hist.path),
            "epoch": hist.epoch,
            "turns": len(hist.turns),
            "tokens": hist.tokens(),
            "items": [item_to_dict(i) for i in hist.items()],
        },
        "tools": [t.name for t in specs],
        # what runtime.context_budget_tokens must hold before anything else
        # (instructions and tool schemas), and the budget itself
        "fixed_tokens": fixed_tokens(f, specs),
        "context_budget_tokens": context_budget(cfg),
        **_tool_schemas(specs, getattr(catalog, "sources", {})),
        **_mcp_state(store, cfg, getattr(catalog, "problems", None)),
    }


def _tool_schemas(specs: list[Any], sources: dict[str, str]) -> dict[str, object]:
    """Each tool's schema cost in estimated tokens, by source (``builtin`` or
    ``mcp:<server>``): tool schemas are a large, fixed part of every request."""
    import json

    from holon_cli.runtime.memory.compaction import estimate

    rows = []
    totals: dict[str, int] = {}
    for t in specs:
        src = sources.get(t.name, "builtin")
        tokens = estimate(
            json.dumps([t.name, t.description, t.input_schema], sort_keys=True, default=str)
        )
        rows.append({"name": t.name, "source": src, "tokens": tokens})
        totals[src] = totals.get(src, 0) + tokens
    return {"tool_schemas": rows, "tool_schema_tokens": totals}


def _mcp_state(
    store: AgentStore, cfg: HolonConfig, problems: list[Mapping[str, object]] | None
) -> dict[str, object]:
    if problems is None:
        return {}
    from holon_cli.runtime.mcp.calls import server_rows

    return {"mcp_servers": server_rows(cfg, store.agent_id), "mcp_problems": problems}


def debug_latency(
    store: AgentStore, *, limit: int = 10, window: int = 5000
) -> list[dict[str, Any]]:
    """Per-turn breakdown for the newest ``limit`` turns (reads only the ledger tail)."""
    events = store.events.tail(window)
    admitted_at: dict[str, str] = {}
    turns: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for e in events:
        kind = e["kind"]
        d = e.get("data") or {}
        if kind == "message_admitted" and e.get("message_id"):
            # the spec's queue wait starts at admission (this event), not at the
            # envelope's createdAt (set by the writer, possibly much earlier)
            admitted_at[e["message_id"]] = e["at"]
        tid = d.get("turn_id") or e.get("turn_id")
        if not tid:
            continue
        t = turns.get(tid)
        if t is None:
            t = turns[tid] = {
                "turn_id": tid,
                "message_id": e.get("message_id"),
                "queue_wait_ms": None,
                "context_build_ms": None,
                "provider_rounds": [],
                "tools": [],
                "cleanup_ms": None,
                "total_ms": None,
                "status": None,
            }
            order.append(tid)
        if kind == "message_processing_started":
            t["started_at"] = e["at"]
            admitted = admitted_at.get(e.get("message_id") or "")
            if admitted is not None:
                t["queue_wait_ms"] = _ms_between(admitted, e["at"])
                t["queue_wait_from"] = "message_admitted"
            else:  # admission is older than the window read: the turn's own figure
                t["queue_wait_ms"] = d.get("queue_wait_ms")
                t["queue_wait_from"] = "created_at"
        elif kind == "turn_context_built":
            t["context_build_ms"] = d.get("context_build_ms")
        elif kind == "provider_round_completed":
            t["provider_rounds"].append(
                {
                    "round": d.get("round"),
                    "provider_round_ms": d.get("provider_round_ms"),
                    "context_build_ms": d.get("context_build_ms"),
                    "model_ref": d.get("model_ref"),
                    "tokens": (d.get("token_usage") or {}).get("total_tokens"),
                }
            )
        elif kind == "tool_executed":
            t["tools"].append(
                {
                    "tool_name": d.get("tool_name"),
                    "duration_ms": d.get("duration_ms"),
                    "ok": d.get("ok"),
                }
            )
        elif kind == "turn_terminal":
            t["cleanup_ms"] = d.get("cleanup_ms")
            t["total_ms"] = d.get("duration_ms")
            t["status"] = d.get("status")
    out = []
    for tid in order[-limit:]:
        t = turns[tid]
        prov = sum(r["provider_round_ms"] or 0 for r in t["provider_rounds"])
        tools = sum(x["duration_ms"] or 0 for x in t["tools"])
        ctx = sum(r["context_build_ms"] or 0 for r in t["provider_rounds"])
        t["provider_ms"] = round(prov, 3)
        t["tools_ms"] = round(tools, 3)
        if t["total_ms"] is not None:
            t["runtime_overhead_ms"] = round(t["total_ms"] - prov - tools, 3)
            t["context_build_total_ms"] = round(ctx, 3)
        out.append(t)
    return out


def _ms_between(start_iso: str, end_iso: str) -> int | None:
    from holon_cli import clock

    try:
        return max(0, round((clock.parse_iso(end_iso) - clock.parse_iso(start_iso)) * 1000))
    except (TypeError, ValueError):
        return None


def debug_providers(store: AgentStore, *, cli_model: str | None = None) -> dict[str, Any]:
    """The provider doctor for ``store``'s model chain: the retry policy, and
    per candidate its transport, endpoint, credential presence and whether it
    can be served. Sends nothing; never includes a credential's value."""
    from holon_cli.errors import ConfigError
    from holon_cli.providers.chain import retry_policy
    from holon_cli.providers.doctor import describe_candidate
    from holon_cli.providers.registry import model_chain, model_source

    config = load_config()
    override = store.read_record()["state"].get("model_override")
    out: dict[str, Any] = {
        "agent_id": store.agent_id,
        "retry_policy": retry_policy(),
        # flag | agent | HOLON_MODEL | config | default (none set)
        "model_source": model_source(override, cli_model, config=config),
        "candidates": [],
        "problem": None,
    }
    try:
        primary, fallbacks = model_chain(override, cli_model, config=config)
    except ConfigError as exc:
        out["problem"] = f"{exc.message}; {exc.hint}" if exc.hint else exc.message
        return out
    out["candidates"] = [describe_candidate(r, config=config) for r in (primary, *fallbacks)]
    if not any(c["supported"] for c in out["candidates"]):
        out["problem"] = "no candidate of the model chain can be served"
    return out
