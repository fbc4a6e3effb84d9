"""The spec's Additional State Fields a settled turn folds into the agent
(runtime spec: Additional State Fields): ``compacted_message_count``,
``context_summary``, ``tool_latency`` and ``execution_profile``.

Everything here is pure: :func:`fold` takes the agent state and what the
turn's journal holds (its compacted window, each tool call's duration) and
returns the new values. ``turn/settle.py`` applies them once per turn: the
profile remembers the last turn it counted (``last_turn_id``), so a settle
replayed after a kill between the agent update and the journal's removal
adds nothing twice.

- ``compacted_message_count``: messages removed from active windows, over
  the agent's life (each turn's compaction counts once, at settle);
- ``context_summary``: the newest compaction summary, bounded
  (:data:`SUMMARY_CHARS`); kept until a later turn compacts again;
- ``tool_latency``: per tool name, calls, errors and timing (total, mean,
  max, last), at most :data:`MAX_TOOLS` names (the least recently used
  name goes first);
- ``execution_profile``: turns, aborted turns, rounds, tool calls and turn
  durations with their means. Descriptive only: nothing reads it to decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli.model.agent import empty_execution_profile

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from holon_cli.model.agent import AgentState, ExecutionProfile, ToolLatencyMetrics

SUMMARY_CHARS = 4000
MAX_TOOLS = 64


def already_counted(state: Mapping[str, Any], turn_id: str) -> bool:
    """The turn was folded in already (a replayed settle)."""
    prof = state.get("execution_profile") or {}
    return bool(turn_id) and prof.get("last_turn_id") == turn_id


def fold_latency(
    prev: Iterable[Mapping[str, Any]] | None, calls: Iterable[tuple[str, float, bool]], at: str
) -> list[ToolLatencyMetrics]:
    """``tool_latency`` after this turn's calls ``(tool_name, ms, ok)``."""
    rows: dict[str, ToolLatencyMetrics] = {}
    for r in prev or []:
        name = str(r.get("tool_name") or "")
        if not name:
            continue
        rows[name] = {
            "tool_name": name,
            "calls": int(r.get("calls") or 0),
            "errors": int(r.get("errors") or 0),
            "total_ms": float(r.get("total_ms") or 0.0),
            "mean_ms": float(r.get("mean_ms") or 0.0),
            "max_ms": float(r.get("max_ms") or 0.0),
            "last_ms": float(r.get("last_ms") or 0.0),
            "last_at": str(r.get("last_at") or ""),
        }
    for name, ms, ok in calls:
        ms = max(0.0, float(ms))
        row = rows.pop(name, None) or {
            "tool_name": name,
            "calls": 0,
            "errors": 0,
            "total_ms": 0.0,
            "mean_ms": 0.0,
            "max_ms": 0.0,
            "last_ms": 0.0,
            "last_at": at,
        }
        row["calls"] += 1
        row["errors"] += 0 if ok else 1
        row["total_ms"] = round(row["total_ms"] + ms, 3)
        row["mean_ms"] = round(row["total_ms"] / row["calls"], 3)
        row["max_ms"] = max(row["max_ms"], round(ms, 3))
        row["last_ms"] = round(ms, 3)
        row["last_at"] = at
        rows[name] = row  # re-inserted: most recently used last
    kept = list(rows.values())[-MAX_TOOLS:]
    return sorted(kept, key=lambda r: r["tool_name"])


def fold_profile(
    prev: ExecutionProfile | None,
    *,
    turn_id: str,
    aborted: bool,
    rounds: int,
    tool_calls: int,
    duration_ms: int,
    compacted: bool,
    at: str,
) -> ExecutionProfile:
    """``execution_profile`` after one more settled turn."""
    p: ExecutionProfile = {**prev} if prev else empty_execution_profile()
    p["turns"] = int(p["turns"]) + 1
    p["aborted_turns"] = int(p["aborted_turns"]) + (1 if aborted else 0)
    p["model_rounds"] = int(p["model_rounds"]) + max(0, rounds)
    p["tool_calls"] = int(p["tool_calls"]) + max(0, tool_calls)
    d = max(0, int(duration_ms))
    p["total_turn_ms"] = int(p["total_turn_ms"]) + d
    p["max_turn_ms"] = max(int(p["max_turn_ms"]), d)
    p["last_turn_ms"] = d
    n = p["turns"]
    p["mean_turn_ms"] = round(p["total_turn_ms"] / n, 1)
    p["mean_rounds_per_turn"] = round(p["model_rounds"] / n, 3)
    p["mean_tool_calls_per_turn"] = round(p["tool_calls"] / n, 3)
    p["compacted_turns"] = int(p["compacted_turns"]) + (1 if compacted else 0)
    p["last_turn_id"] = turn_id
    p["updated_at"] = at
    return p


def fold(
    st: AgentState,
    *,
    turn_id: str,
    aborted: bool,
    rounds: int,
    duration_ms: int,
    calls: list[tuple[str, float, bool]],
    compaction: Mapping[str, Any] | None,
    at: str,
) -> None:
    """Apply one settled turn to ``st`` (the caller checks
    :func:`already_counted` first)."""
    compacted = int((compaction or {}).get("compacted") or 0)
    st["compacted_message_count"] = int(st.get("compacted_message_count") or 0) + compacted
    if compacted:
        summary = str((compaction or {}).get("summary") or "")
        st["context_summary"] = summary[:SUMMARY_CHARS] or None
    else:
        st.setdefault("context_summary", None)
    st["tool_latency"] = fold_latency(st.get("tool_latency"), calls, at)
    st["execution_profile"] = fold_profile(
        st.get("execution_profile"),
        turn_id=turn_id,
        aborted=aborted,
        rounds=rounds,
        tool_calls=len(calls),
        duration_ms=duration_ms,
        compacted=compacted > 0,
        at=at,
    )
