"""What the operator console knows, apart from how it is drawn: the
conversation built from raw events through the presentation layer, the
current display mode, the turn-scoped activity line, which messages are
settled, and what a typed line means.

Shared by the Textual app (``tui/app.py``) and ``holon tui --script``
(``tui/script.py``); imports neither Textual nor an HTTP library.

Invariants:
- every human-facing row comes from :func:`presentation.present` and is
  filtered by :func:`presentation.shown_at`; text that came from outside is
  passed through :func:`output.visible` (control characters and non-UTF-8
  replacement shown, never executed);
- events are applied once, in ``event_seq`` order: a resumed stream that
  repeats an event changes nothing (the cursor only moves forward).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from holon_cli.cli.output import visible as _visible
from holon_cli.errors import UsageError
from holon_cli.runtime.presentation import (
    Activity,
    DisplayMode,
    Presented,
    display_mode,
    present,
    row_text,
    shown_at,
    work_counts,
)

MAX_ROWS = 2000  # kept for re-rendering at another display mode
HISTORY_EVENTS = 500  # how far back a console looks when it attaches
SETTLING_KINDS = frozenset({"turn_terminal", "message_settled_without_turn"})

# the commands of the interactive console; --script knows the first three
COMMANDS: dict[str, str] = {
    "display": "/display info|verbose|debug (or 3|4|5): what the conversation shows",
    "agent": "/agent ID: switch to another (public) agent",
    "quit": "/quit (or Ctrl-Q): close the console; serve keeps running",
    "help": "/help (F1): keys and commands",
    "agents": "/agents (F2): agents and their children",
    "transcript": "/transcript (F3): the recent raw transcript",
    "tasks": "/tasks (F4): command tasks",
    "actions": "/actions (F5): local actions (workspace attach, enter, exit; debug prompt)",
    "workspace-attach": "/workspace-attach [PATH]: attach a directory and work in it",
    "workspace-enter": "/workspace-enter: switch to an attached workspace",
    "workspace-exit": "/workspace-exit: back to the agent's home (agent_home)",
    "events": "/events: raw events (trace)",
    "debug-prompt": "/debug-prompt: the prompt the next turn would see",
}
SCRIPT_COMMANDS = ("display", "agent", "quit")


class Command(NamedTuple):
    name: str  # "prompt" for plain text
    arg: str


class Line(NamedTuple):
    """One conversation row as shown: terminal-safe text."""

    seq: int
    title: str
    text: str
    visibility: str
    category: str


def visible(text: Any) -> str:
    """Terminal-safe text: control characters shown as symbols, and what is
    not valid UTF-8 (a lone surrogate from undecodable bytes) as ``\\udcxx``."""
    return _visible(text).encode("utf-8", "backslashreplace").decode("utf-8")


def parse_input(text: str, known: tuple[str, ...] | None = None) -> Command:
    """A typed line: ``/name arg`` is a command, anything else a prompt
    (``//text`` sends ``/text``). An unknown command is a :class:`UsageError`."""
    s = text.strip()
    if s.startswith("//"):
        return Command("prompt", s[1:])
    if not s.startswith("/"):
        return Command("prompt", s)
    name, _, arg = s[1:].partition(" ")
    name = name.lower()
    allowed = tuple(COMMANDS) if known is None else known
    if name not in allowed:
        listed = ", ".join("/" + n for n in allowed)
        raise UsageError(
            f"unknown command {visible('/' + name)!r}",
            hint=f"the commands are {listed} (start a prompt with // to send a leading /)",
        )
    return Command(name, arg.strip())


# what people type for the raw event view, which is no display mode
TRACE_WORDS = ("trace", "raw", "events")


def parse_mode(arg: str) -> DisplayMode:
    """``/display MODE`` in the console. ``trace`` is refused with the way
    to the raw events (the spec's trace view is ``/events``, not a mode)."""
    if not arg.strip():
        raise UsageError("/display needs a mode", hint="info, verbose, debug (or 3, 4, 5)")
    if arg.strip().lower() in TRACE_WORDS:
        raise UsageError(
            f"{arg.strip()!r} is not a display mode: the raw trace is its own view",
            hint="type /events for the raw events (trace); /display debug shows the most "
            "in the conversation (from a shell: `holon tail --agent ID`)",
        )
    try:
        return display_mode(arg)
    except ValueError as exc:
        raise UsageError(str(exc), hint="e.g. /display verbose (or /display 4)") from None


def parse_display_option(arg: str) -> DisplayMode:
    """``holon tui --display MODE``: the same modes, in the command line's words."""
    if arg.strip().lower() in TRACE_WORDS:
        raise UsageError(
            f"--display {arg.strip()!r} is not a display mode: the raw trace is its own view",
            hint="use --display debug for the most detail, /events inside the console, or "
            "`holon tail --agent ID` for the raw events",
        )
    try:
        return display_mode(arg)
    except ValueError as exc:
        raise UsageError(f"--display: {exc}", hint="e.g. --display verbose (or 4)") from None


def row_line(seq: int, row: Presented) -> Line:
    shown = visible(row_text(row))
    return Line(seq, visible(row["title"]), shown, row["visibility"], row["category"])


class Conversation:
    """The presented conversation of one agent."""

    def __init__(self, mode: DisplayMode = "info") -> None:
        self.mode: DisplayMode = mode
        self.cursor = 0
        self.rows: list[tuple[int, Presented]] = []
        self.settled: set[str] = set()
        self._activity = Activity()
        self.activity = ""
        self.trimmed_noted = False

    def feed(self, event: Mapping[str, Any]) -> Line | None:
        """Apply one raw event; the row to show now, if any."""
        seq = event.get("event_seq")
        if seq is None and event.get("kind") == "history_trimmed":
            return self._trimmed(event)
        if not isinstance(seq, int) or seq <= self.cursor:
            return None
        self.cursor = seq
        row = present(event)
        self.activity = visible(self._activity.update(event, row))
        mid = event.get("message_id")
        if event.get("kind") in SETTLING_KINDS and isinstance(mid, str):
            self.settled.add(mid)
        if row["category"] == "state_sync":
            return None
        self.rows.append((seq, row))
        del self.rows[:-MAX_ROWS]
        return row_line(seq, row) if shown_at(row, self.mode) else None

    def _trimmed(self, event: Mapping[str, Any]) -> Line | None:
        """Serve's notice that history starts after what retention removed
        (no ``event_seq``: shown once, at the top of what follows)."""
        if self.trimmed_noted:
            return None
        self.trimmed_noted = True
        row = present(event)
        self.rows.append((self.cursor, row))
        return row_line(self.cursor, row) if shown_at(row, self.mode) else None

    def lines(self) -> list[Line]:
        return [row_line(s, r) for s, r in self.rows if shown_at(r, self.mode)]

    def set_mode(self, arg: str) -> DisplayMode:
        self.mode = parse_mode(arg)
        return self.mode


def format_line(line: Line) -> str:
    """``Title: text``, continuation lines indented (the --script form)."""
    first, *rest = line.text.splitlines() or [""]
    return "\n".join([f"{line.title}: {first}", *("    " + r for r in rest)])


def _workspace_labels(
    agent: Mapping[str, Any], state: Mapping[str, Any]
) -> tuple[str, str, str | None]:
    """Workspace, projection and the worktree label from the agent's
    execution snapshot (``agent.workspace``, ``agent.worktree_session``);
    an older serve's record fields as a fallback."""
    raw_ws = agent.get("workspace")
    ws: Mapping[str, Any] = raw_ws if isinstance(raw_ws, Mapping) else {}
    ws_id = ws.get("workspace_id") or state.get("active_workspace_id")
    anchor = ws.get("workspace_anchor") or state.get("workspace_anchor")
    if ws_id == "agent_home" or not anchor:
        return "agent home", "agent_home", None
    workspace = f"{ws_id or 'workspace'} {anchor}"
    projection = str(ws.get("projection_kind") or "canonical_root")
    raw_wt = agent.get("worktree_session")
    wt: Mapping[str, Any] = raw_wt if isinstance(raw_wt, Mapping) else {}
    worktree = None
    if wt.get("worktree_branch"):  # the branch names it; its path is long
        worktree = f"{wt['worktree_branch']} from {wt.get('original_branch') or '?'}"
    root = ws.get("execution_root")
    if root and root != anchor and worktree is None:
        projection += f" {root}"
    cwd = ws.get("cwd")
    if cwd and cwd != (root or anchor):
        projection += f" (cwd {cwd})"
    return workspace, projection, worktree


def _access_label(profile: Any, payload: Mapping[str, Any]) -> str | None:
    """The profile, then where commands run: ``host_local`` (nothing
    confined) or ``bwrap`` with its network state (``execution_policy``)."""
    pol = payload.get("execution_policy")
    if not isinstance(pol, Mapping) or not pol.get("backend"):
        return str(profile) if profile else None
    backend = str(pol["backend"])
    if backend == "bwrap":
        net = "off" if pol.get("network_confinement") == "enforced" else "on"
        backend += f" (network {net})"
    return f"{profile or '-'}, {backend}"


def state_summary(payload: Mapping[str, Any]) -> dict[str, str]:
    """Agent, workspace, projection and access labels from ``GET
    /agents/{id}/state`` (``worktree`` only while an isolated worktree is
    the execution root)."""
    agent = payload.get("agent") or {}
    state = payload.get("state") or {}
    ident = payload.get("identity") or {}
    workspace, projection, worktree = _workspace_labels(agent, state)
    access = _access_label(state.get("access_mode") or ident.get("profile_preset"), payload)
    work = agent.get("work_items") or {}
    out = {
        "agent": visible(agent.get("agent_id") or "?"),
        "status": visible(agent.get("status") or state.get("status") or "?"),
        "workspace": visible(workspace),
        "projection": visible(projection),
        "access": visible(access or "-"),
        "pending": str(agent.get("pending", 0)),
        "work": visible(work_counts(work)),
    }
    if worktree is not None:
        out["worktree"] = visible(worktree)
    mcp = mcp_label(agent)
    if mcp:
        out["mcp"] = visible(mcp)
    return out


def mcp_label(agent: Mapping[str, Any]) -> str | None:
    """The agent's MCP servers and their states (a failed one shown, never
    dropped), and how many of their questions wait for an operator."""
    rows = agent.get("mcp_servers")
    if not isinstance(rows, list) or not rows:
        return None
    text = ", ".join(f"{r.get('name')} {r.get('state')}" for r in rows if isinstance(r, Mapping))
    waiting = agent.get("mcp_requests_open")
    if waiting:
        text += f" · {waiting} request(s) to answer (`holon mcp requests`)"
    return text
