"""The interactive operator console (Textual; the ``tui`` extra).

One screen: the agent bar, the workspace / projection / access line, a
banner while serve does not answer, the primary conversation (operator
messages and briefs through the presentation layer, more at ``verbose`` and
``debug``), the turn-scoped activity line and the composer, which always has
focus (Enter submits). Overlays (help, agents, transcript, tasks, actions,
events, debug prompt) are modal screens stacked on top; Esc closes the top
one. Ctrl-Q or ``/quit`` quits; nothing in the runtime changes.

Live updates come from the SSE event stream, resumed from the last applied
``event_seq`` after a reconnect (serve restarted, socket gone a while). A
prompt that could not be sent goes back into the composer: nothing typed is
lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, OptionList, RichLog, Static
from textual.widgets.option_list import Option

from holon_cli.cli.tui import views
from holon_cli.cli.tui.session import (
    HISTORY_EVENTS,
    Command,
    Conversation,
    Line,
    parse_input,
    state_summary,
    visible,
)
from holon_cli.errors import HolonError
from holon_cli.runtime.presentation import DisplayMode
from holon_cli.serve.client import ServeUnavailable

if TYPE_CHECKING:
    from holon_cli.model.typed_base import Json, JsonObject

RECONNECT_MAX_S = 2.0
PLACEHOLDER = "Type a prompt and press Enter (/help: commands)"
REFRESH_KINDS = frozenset(
    {
        "agent_state_changed",
        "session_state_changed",
        "turn_terminal",
        "message_admitted",
        "workspace_bound",
        "workspace_detached",
    }
)
STYLES = {
    "action_required": "bold red",
    "work_done": "bold green",
    "turn_result": "bold",
    "progress": "dim",
    "trace": "dim italic",
}
CSS = """
#agentbar { height: 1; background: $primary; color: $text; padding: 0 1; }
#statebar { height: 1; color: $text-muted; padding: 0 1; }
#banner { height: auto; background: $error; color: $text; padding: 0 1; display: none; }
#banner.shown { display: block; }
#conversation { height: 1fr; padding: 0 1; }
#activity { height: 1; color: $text-muted; padding: 0 1; }
Screen:inline { height: 24; }
Overlay, ActionsOverlay, AgentsOverlay, AttachOverlay, EnterOverlay { align: center middle; }
#attach-error { color: $error; padding: 0 1; }
.overlay { width: 90%; height: 80%; border: round $accent; background: $surface; }
.overlay-title { text-style: bold; padding: 0 1; }
.overlay-hint { color: $text-muted; padding: 0 1; }
"""


class Control(Protocol):
    """What the console needs of serve (``serve.client.AsyncServeClient``)."""

    async def get(self, path: str, **params: Any) -> Any: ...

    async def post(self, path: str, body: Mapping[str, Json]) -> Any: ...

    async def prompt(self, agent_id: str, text: str) -> str: ...

    def events(
        self, agent_id: str, after: int, on_open: Callable[[], None] | None = None
    ) -> AsyncIterator[JsonObject]: ...

    async def aclose(self) -> None: ...


class Overlay(ModalScreen[None]):
    """A read-only text overlay; Esc closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, name: str, title: str, lines: list[str]) -> None:
        super().__init__(name=name)
        self.title_text, self.lines = title, lines

    def compose(self) -> ComposeResult:
        with Vertical(classes="overlay"):
            yield Static(Text(self.title_text), classes="overlay-title")
            yield RichLog(wrap=True, id="overlay-body", auto_scroll=False)
            yield Static("Esc closes", classes="overlay-hint")

    def on_mount(self) -> None:
        body = self.query_one(RichLog)
        for line in self.lines:
            body.write(Text(line))

    def action_close(self) -> None:
        self.dismiss()


class ActionsOverlay(ModalScreen[None]):
    """Local actions; choosing one opens its overlay on top of this one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self) -> None:
        super().__init__(name="actions")

    def compose(self) -> ComposeResult:
        with Vertical(classes="overlay"):
            yield Static("Actions", classes="overlay-title")
            yield OptionList(*(Option(text, id=key) for key, text in views.ACTIONS.items()))
            yield Static("Enter runs the action, Esc closes", classes="overlay-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        app = self.app
        assert isinstance(app, ConsoleApp)
        app.open_overlay(str(event.option.id))

    def action_close(self) -> None:
        self.dismiss()


class AgentsOverlay(ModalScreen[None]):
    """Agents with their children; Enter switches to the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, rows: list[views.AgentRow]) -> None:
        super().__init__(name="agents")
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(classes="overlay"):
            yield Static("Agents", classes="overlay-title")
            yield OptionList(
                *(Option(r.label, id=r.agent_id, disabled=not r.selectable) for r in self.rows)
            )
            yield Static("Enter switches to the agent, Esc closes", classes="overlay-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        app = self.app
        assert isinstance(app, ConsoleApp)
        self.dismiss()
        app.switch(str(event.option.id))

    def action_close(self) -> None:
        self.dismiss()


class AttachOverlay(ModalScreen[None]):
    """Workspace attach: a directory (``~`` and relative paths are taken
    from where the console runs) and direct or isolated mode; Enter attaches
    it and makes it active. A refusal stays here with the path kept."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, agent_id: str, path: str = "") -> None:
        super().__init__(name="workspace-attach")
        self.agent_id, self.path = agent_id, path

    def compose(self) -> ComposeResult:
        with Vertical(classes="overlay"):
            yield Static(
                Text(f"Attach a workspace to {visible(self.agent_id)}"), classes="overlay-title"
            )
            yield Input(self.path, placeholder="directory, e.g. ~/src/shop", id="attach-path")
            yield Checkbox("isolated: work in a managed git worktree", id="attach-isolated")
            yield Static(id="attach-error")
            yield Static("Enter attaches, Tab moves, Esc closes", classes="overlay-hint")

    def on_mount(self) -> None:
        self.query_one("#attach-path", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        import os

        event.stop()  # not the composer's: the console must not send it as a prompt
        raw = event.value.strip()
        if not raw:
            self.failed("give a directory to attach")
            return
        path = os.path.abspath(os.path.expanduser(raw))
        mode = "isolated" if self.query_one("#attach-isolated", Checkbox).value else "direct"
        app = self.app
        assert isinstance(app, ConsoleApp)
        app.use_workspace({"path": path, "mode": mode}, screen=self)

    def failed(self, message: str) -> None:
        self.query_one("#attach-error", Static).update(Text(visible(message)))

    def action_close(self) -> None:
        self.dismiss()


class EnterOverlay(ModalScreen[None]):
    """Workspace enter: the attached workspaces, each direct and isolated;
    Enter switches to the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, choices: list[tuple[str, str, bool]]) -> None:
        super().__init__(name="workspace-enter")
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(classes="overlay"):
            yield Static("Enter a workspace", classes="overlay-title")
            yield OptionList(
                *(Option(label, id=key, disabled=not ok) for key, label, ok in self.choices)
            )
            yield Static(id="attach-error")
            yield Static("Enter switches to it, Esc closes", classes="overlay-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        mode, _, wid = str(event.option.id).partition(":")
        app = self.app
        assert isinstance(app, ConsoleApp)
        app.use_workspace({"workspace_id": wid, "mode": mode}, screen=self)

    def failed(self, message: str) -> None:
        self.query_one("#attach-error", Static).update(Text(visible(message)))

    def action_close(self) -> None:
        self.dismiss()


class ConsoleApp(App[None]):
    CSS = CSS
    TITLE = "holon"
    AUTO_FOCUS = "#composer"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "overlay('help')", "Help"),
        Binding("f2", "overlay('agents')", "Agents"),
        Binding("f3", "overlay('transcript')", "Transcript"),
        Binding("f4", "overlay('tasks')", "Tasks"),
        Binding("f5", "overlay('actions')", "Actions"),
        Binding("pageup", "scroll_conversation(-1)", show=False),
        Binding("pagedown", "scroll_conversation(1)", show=False),
    ]

    def __init__(self, control: Control, agent_id: str, mode: DisplayMode) -> None:
        super().__init__()
        self.control = control
        self.agent_id = agent_id
        self.conv = Conversation(mode)
        self.connected = False
        self.notices: list[str] = []
        self.state: dict[str, str] = {}
        self._state_stale = self._state_reading = False

    # ------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        # kept as attributes: a worker finishing while the console closes
        # updates detached widgets instead of failing to find them
        self.agentbar, self.statebar = Static(id="agentbar"), Static(id="statebar")
        self.banner = Static(id="banner")
        self.log_view = RichLog(id="conversation", wrap=True, markup=False)
        self.log_view.can_focus = False  # the composer keeps the focus
        self.activity = Static(id="activity")
        self.composer = Input(placeholder=PLACEHOLDER, id="composer")
        self.composer.cursor_blink = False  # a blinking cursor repaints twice a second
        yield from (self.agentbar, self.statebar, self.banner, self.log_view)
        yield from (self.activity, self.composer)

    def on_mount(self) -> None:
        self._bars()
        self.attach(self.agent_id)

    async def on_unmount(self) -> None:
        self.workers.cancel_all()
        await self.control.aclose()

    def _bars(self) -> None:
        st = self.state
        link = "connected" if self.connected else "connecting…"
        self.agentbar.update(
            Text(
                f"agent {visible(self.agent_id)} · {st.get('status', '?')} · "
                f"display {self.conv.mode} · {link}"
            )
        )
        worktree = f" · worktree {st['worktree']}" if st.get("worktree") else ""
        self.statebar.update(
            Text(
                f"workspace {st.get('workspace', '-')} · projection {st.get('projection', '-')}"
                f"{worktree} · access {st.get('access', '-')} · pending {st.get('pending', '-')}"
                f" · work {st.get('work', '-')}" + (f" · mcp {st['mcp']}" if st.get("mcp") else "")
            )
        )
        act = self.conv.activity
        self.activity.update(Text(f"working: {act}" if act else ""))

    def _write(self, line: Line) -> None:
        style = STYLES.get(line.visibility, "")
        self.log_view.write(Text.assemble((line.title + ": ", style), line.text))

    def _rerender(self) -> None:
        self.log_view.clear()
        for line in self.conv.lines():
            self._write(line)
        self._bars()

    def notice(self, message: str, hint: str | None = None) -> None:
        """A console message (not part of the agent's conversation)."""
        text = visible(message + (f" ({hint})" if hint else ""))
        self.notices.append(text)
        self.log_view.write(Text("console: " + text, style="yellow"))

    def _banner(self, text: str | None) -> None:
        self.banner.update(Text(visible(text or "")))
        self.banner.set_class(bool(text), "shown")

    # ------------------------------------------------------------ serve
    def attach(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.conv = Conversation(self.conv.mode)
        self.state = {}
        self._rerender()
        self.follow()

    def _opened(self) -> None:
        self.connected = True
        self._banner(None)
        self._bars()

    def _lost(self, why: str) -> None:
        self.connected = False
        self._banner(f"serve is not answering: {why}. Reconnecting… (holon daemon start)")
        self._bars()

    @work(exclusive=True, group="follow")
    async def follow(self) -> None:
        """Live updates: history, then the stream, resumed after a reconnect."""
        agent, conv = self.agent_id, self.conv
        delay = 0.2
        while conv is self.conv:
            try:
                if conv.cursor == 0:
                    await self._history(agent, conv)
                self.refresh_state()
                async for ev in self.control.events(agent, conv.cursor, on_open=self._opened):
                    self._apply(conv, ev)
                    delay = 0.2
            except ServeUnavailable as exc:
                self._lost(exc.message)
            except HolonError as exc:
                self._banner(f"{exc.message} ({exc.hint or 'switch with /agent ID'})")
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def _history(self, agent: str, conv: Conversation) -> None:
        status = await self.control.get(f"/agents/{agent}/status")
        last = int(status.get("last_event_seq") or 0)
        page = await self.control.get(
            f"/agents/{agent}/events", after=max(0, last - HISTORY_EVENTS), limit=HISTORY_EVENTS
        )
        if isinstance(page.get("trimmed"), dict):
            self._apply(conv, {"kind": "history_trimmed", "data": page["trimmed"]})
        for ev in page.get("events") or []:
            self._apply(conv, ev)
        self._opened()

    def _apply(self, conv: Conversation, event: Mapping[str, object]) -> None:
        if conv is not self.conv:
            return  # an event of the agent we just left
        line = conv.feed(event)
        if line is not None:
            self._write(line)
        if event.get("kind") in REFRESH_KINDS:
            self.refresh_state()
        self._bars()

    def refresh_state(self) -> None:
        """Re-read the state line; requests already under way are not
        cancelled (one more read follows them instead)."""
        self._state_stale = True
        if not self._state_reading:
            self._state_reading = True
            self._read_state()

    @work(group="state")
    async def _read_state(self) -> None:
        try:
            while self._state_stale:
                self._state_stale = False
                payload = await self.control.get(f"/agents/{self.agent_id}/state")
                self.state = state_summary(payload)
                self._bars()
        except HolonError:
            pass  # the follower reports a serve that is gone
        finally:
            self._state_reading = False

    # ------------------------------------------------------------ input
    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        event.input.value = ""
        if not text.strip():
            return
        try:
            cmd = parse_input(text)
        except HolonError as exc:
            self.notice(exc.message, exc.hint)
            return
        self.run_command(cmd, text)

    def run_command(self, cmd: Command, typed: str) -> None:
        if cmd.name == "prompt":
            self.send(cmd.arg, typed)
        elif cmd.name == "quit":
            self.exit()
        elif cmd.name == "display":
            try:
                self.conv.set_mode(cmd.arg)
            except HolonError as exc:
                self.notice(exc.message, exc.hint)
                return
            self._rerender()
        elif cmd.name == "agent":
            self.switch(cmd.arg)
        else:
            self.open_overlay(cmd.name, cmd.arg)

    @work(group="send")
    async def send(self, text: str, typed: str) -> None:
        try:
            await self.control.prompt(self.agent_id, text)
        except HolonError as exc:
            if not self.composer.value:
                self.composer.value = typed  # not sent: nothing typed is lost
            self.notice(f"not sent: {exc.message}", exc.hint)

    @work(group="switch")
    async def switch(self, agent_id: str) -> None:
        if not agent_id:
            self.notice("/agent needs an agent id", "e.g. /agent main; F2 lists agents")
            return
        try:
            await self.control.get(f"/agents/{agent_id}/status")
        except HolonError as exc:
            self.notice(exc.message, exc.hint)
            return
        self.attach(agent_id)

    # ------------------------------------------------------------ overlays
    def action_overlay(self, name: str) -> None:
        self.open_overlay(name)

    def action_scroll_conversation(self, direction: int) -> None:
        log = self.log_view
        (log.scroll_page_down if direction > 0 else log.scroll_page_up)()

    @work(group="overlay")
    async def open_overlay(self, name: str, arg: str = "") -> None:
        if name == "actions":
            self.push_screen(ActionsOverlay())
            return
        if name.startswith("workspace-"):
            if isinstance(self.screen, ActionsOverlay):
                await self.pop_screen()  # the action replaces the menu
            await self._workspace_action(name, arg)
            return
        if name == "agents":
            try:
                rows = await asyncio.to_thread(views.agent_rows, self.agent_id)
            except HolonError as exc:
                self.notice(exc.message, exc.hint)
                return
            self.push_screen(AgentsOverlay(rows))
            return
        try:
            title, lines = await self._overlay_lines(name)
        except HolonError as exc:
            self.notice(exc.message, exc.hint)
            return
        self.push_screen(Overlay(name, title, lines))

    # ------------------------------------------------------------ workspaces
    async def _workspace_action(self, name: str, arg: str = "") -> None:
        """attach: the path overlay; enter: the attached workspaces; exit:
        back to agent_home at once (serve's UseWorkspace in each case)."""
        if name == "workspace-attach":
            self.push_screen(AttachOverlay(self.agent_id, arg))
            return
        if name == "workspace-exit":
            self.use_workspace({"workspace_id": "agent_home"})
            return
        try:
            page = await self.control.get(f"/agents/{self.agent_id}/workspaces")
        except HolonError as exc:
            self.notice(exc.message, exc.hint)
            return
        choices = views.workspace_choices(page.get("workspaces") or [])
        if not choices:
            self.notice(
                f"agent {self.agent_id} has no attached workspace",
                "F5 → Workspace attach (or /workspace-attach) attaches a directory",
            )
            return
        self.push_screen(EnterOverlay(choices))

    @work(group="workspace")
    async def use_workspace(
        self, body: dict[str, str], screen: AttachOverlay | EnterOverlay | None = None
    ) -> None:
        """POST the change; on success close the overlays and say where the
        agent now works; a refusal is shown where it was asked."""
        agent = self.agent_id
        try:
            got = await self.control.post(f"/control/agents/{agent}/workspace", body)
        except HolonError as exc:
            message = exc.message + (f" ({exc.hint})" if exc.hint else "")
            if screen is not None and screen in self.screen_stack:
                screen.failed(message)
            else:
                self.notice(exc.message, exc.hint)
            return
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.notice(views.workspace_notice(agent, got))
        self.refresh_state()

    async def _overlay_lines(self, name: str) -> tuple[str, list[str]]:
        agent = self.agent_id
        if name == "help":
            return "Help", views.help_lines()
        if name == "events":
            after = max(0, self.conv.cursor - 50)
            page = await self.control.get(f"/agents/{agent}/events", after=after, limit=50)
            return f"Events of {agent} (trace)", views.event_lines(page.get("events") or [])
        readers = {
            "transcript": (f"Transcript of {agent}", lambda: views.transcript_lines(agent)),
            "tasks": (f"Tasks of {agent}", lambda: views.tasks_lines(agent)),
            "debug-prompt": (f"Debug prompt of {agent}", lambda: views.debug_prompt_lines(agent)),
        }
        title, read = readers[name]
        return visible(title), await asyncio.to_thread(read)


def run_app(sock: Path, agent_id: str, mode: DisplayMode, *, inline: bool) -> None:
    from holon_cli.serve.client import AsyncServeClient

    ConsoleApp(AsyncServeClient(sock), agent_id, mode).run(inline=inline, inline_no_clear=inline)
