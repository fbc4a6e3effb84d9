"""The text of the console's overlays: agents (children included),
transcript, tasks, the debug prompt, raw events and help.

Agents, transcript, tasks and the debug prompt are lock-free reads of the
home's files (what ``holon agent list``, ``holon transcript``, ``holon task
list`` and ``holon debug prompt`` read), never writes: the console owns no
runtime. Every line is terminal-safe (:func:`session.visible`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from holon_cli.cli.tui.session import COMMANDS, visible

TRANSCRIPT_ENTRIES = 40
KEYS = (
    "Enter: send the composer's text (a prompt or a /command)",
    "Esc: close the top overlay",
    "F1 help  F2 agents  F3 transcript  F4 tasks  F5 actions",
    "PageUp / PageDown: scroll the conversation",
    "Ctrl-Q: quit (serve, tasks, timers and children keep running)",
)
ACTIONS = {
    "debug-prompt": "Debug prompt: the prompt frame the next turn would see",
    "workspace-attach": "Workspace attach: attach a directory and work in it",
    "workspace-enter": "Workspace enter: an attached workspace (direct or isolated worktree)",
    "workspace-exit": "Workspace exit: back to the agent's home",
    "transcript": "Transcript: the recent raw transcript",
    "tasks": "Tasks: command tasks of this agent",
    "events": "Events: raw events (trace)",
    "agents": "Agents: switch agent; children are listed under their parent",
}


def workspace_choices(rows: list[Mapping[str, Any]]) -> list[tuple[str, str, bool]]:
    """The workspace-enter choices from ``GET /agents/{id}/workspaces``:
    ``(mode:workspace_id, label, enabled)``, each attached workspace direct
    and in an isolated worktree; one whose directory is gone is not
    enterable. AgentHome is the exit action, not listed here."""
    out: list[tuple[str, str, bool]] = []
    for r in rows:
        wid = str(r.get("workspace_id") or "")
        if not wid or wid == "agent_home" or not r.get("attached", True):
            continue
        exists = bool(r.get("exists", True))
        mark = "*" if r.get("active") else " "
        where = r.get("workspace_anchor") or "(unknown directory)"
        gone = "" if exists else "  (directory gone: detach it with `holon workspace detach`)"
        for mode, what in (("direct", "direct"), ("isolated", "isolated git worktree")):
            label = visible(f"{mark} {wid}  {where}  [{what}]{gone}")
            out.append((f"{mode}:{wid}", label, exists))
    return out


def workspace_notice(agent_id: str, got: Mapping[str, Any]) -> str:
    """What the console says after a workspace change (the UseWorkspace result)."""
    wid = got.get("workspace_id")
    if wid == "agent_home":
        return f"{agent_id} now works in its home (agent_home)"
    where = f"{got.get('execution_root')} ({got.get('projection_kind')})"
    text = f"{agent_id} now works in {wid}: {where}"
    wt = got.get("worktree_session")
    if isinstance(wt, Mapping) and wt.get("worktree_branch"):
        text += f", branch {wt['worktree_branch']} from {wt.get('original_branch')}"
    if got.get("newly_attached"):
        text += " (newly attached)"
    if got.get("guidance"):
        text += f". {got['guidance']}"
    return visible(text)


def help_lines() -> list[str]:
    return [*KEYS, "", *COMMANDS.values()]


class AgentRow(NamedTuple):
    agent_id: str
    label: str  # terminal-safe, indented under its parent
    selectable: bool  # private children are watched, not selected


def agent_rows(current: str) -> list[AgentRow]:
    """Every agent, children under their parent; private ones are marked
    (they can be watched with ``holon tail``, not selected)."""
    from holon_cli.runtime.agents.lifecycle import list_agents
    from holon_cli.store.agent_store import AgentStore
    from holon_cli.store.layout import HomeLayout

    home = HomeLayout.current()
    entries = {e.agent_id: e for e in list_agents(include_private=True)}
    parent = {
        aid: AgentStore(home.agent(aid)).read_record()["identity"].get("lineage_parent_agent_id")
        for aid in entries
    }
    out: list[AgentRow] = []

    def walk(aid: str, depth: int) -> None:
        e = entries[aid]
        mark = "*" if aid == current else " "
        private = e.visibility == "private"
        note = "  (private child: not selectable)" if private else ""
        label = visible(f"{mark} {'  ' * depth}{aid}  {e.status}  {e.kind}{note}")
        out.append(AgentRow(aid, label, not private))
        for child in sorted(a for a, p in parent.items() if p == aid):
            walk(child, depth + 1)

    for aid in sorted(a for a, p in parent.items() if p not in entries):
        walk(aid, 0)
    return out


def transcript_lines(agent_id: str) -> list[str]:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.inspect import transcript

    out: list[str] = []
    for t in transcript(open_agent(agent_id, create_default=False), limit=TRANSCRIPT_ENTRIES):
        kind = t.get("kind", "?")
        text = t.get("text") or ""
        if kind == "assistant_round":
            calls = ", ".join(str(c.get("name", "?")) for c in t.get("tool_calls", []))
            head = "assistant" + (f" -> {calls}" if calls else "")
        elif kind == "tool_result":
            head = f"tool {t.get('tool_name')} ({'ok' if t.get('ok', True) else 'error'})"
            text = t.get("output") or ""
        elif kind == "message":
            head = f"{t.get('origin_label', 'message')} ({t.get('authority_class', '')})"
        else:
            head = str(kind)
        out.append(visible(f"[{str(t.get('at', ''))[11:19]}] {head}"))
        out.extend(visible("    " + line) for line in str(text).splitlines()[:12])
    return out or ["(no transcript yet)"]


def tasks_lines(agent_id: str) -> list[str]:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.tasks.plane import list_tasks

    tasks = list_tasks(open_agent(agent_id, create_default=False), include_all=True)
    out = [
        visible(
            f"{t['task_id']}  {t['status']}"
            + ("" if t["exit_status"] is None else f" (exit {t['exit_status']})")
            + f"  {t['summary']}"
        )
        for t in tasks
    ]
    return out or ["(no tasks)"]


def debug_prompt_lines(agent_id: str) -> list[str]:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.debug import debug_prompt
    from holon_cli.tools.catalog import default_catalog

    d = debug_prompt(open_agent(agent_id, create_default=False), catalog=default_catalog())
    out = [
        f"workspace  {d['workspace_id']}  {d['workspace_anchor']}",
        f"cwd        {d['cwd']}",
        "policy     " + ", ".join(f"{k}={v}" for k, v in d["execution_policy"].items()),
        "tools      " + ", ".join(d["tools"]),
        f"history    {d['history']['turns']} earlier turn(s), ~{d['history']['tokens']} tokens "
        f"(epoch {d['history']['epoch']}), between the stable and the turn's context",
        "",
        "sections (in prompt order):",
    ]
    out += [
        f"  {i:>2}. [{s['scope']}] {s['title']} <- {s['source']} ({s['chars']} chars)"
        for i, s in enumerate(d["sections"], 1)
    ]
    return [visible(line) for line in out]


def event_lines(events: list[Mapping[str, Any]]) -> list[str]:
    """Raw events, one line each (the trace view)."""
    return [
        visible(
            f"#{e.get('event_seq')} {e.get('kind')} "
            + json.dumps(e.get("data") or {}, ensure_ascii=False, default=str)[:300]
        )
        for e in events
    ] or ["(no events)"]
