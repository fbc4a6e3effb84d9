"""The interactive console (Textual), driven by Textual's pilot against
serve's real HTTP surface on ``run/holon.sock`` (in this process) and the
scripted model: the layout, prompts and replies, display modes, overlays
and Esc, bad input, a serve that goes away and comes back, resize, and text
that would be terminal control."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitrepos import needs_git
from tui_serve import Surface, Turner

pytest.importorskip("textual", reason="textual (the tui extra) is not installed")

from textual.pilot import Pilot  # noqa: E402
from textual.widgets import Input, OptionList, RichLog, Static  # noqa: E402

from holon_cli.cli.tui.app import ConsoleApp, Overlay  # noqa: E402
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent  # noqa: E402
from holon_cli.serve.client import AsyncServeClient  # noqa: E402

# the pilot drives real widgets against serve's real HTTP app: one smoke test in the
# default run (the layout and a prompt with its reply), the rest are slow
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _model(tmp_path: Path, text: str = "hello back") -> str:
    script = tmp_path / "model.yaml"
    script.write_text(yaml.safe_dump({"loop": True, "steps": [{"text": text}]}))
    return f"scripted:{script}"


@pytest.fixture
def surface(holon_home: Path) -> Iterator[Surface]:
    open_agent(None)
    s = Surface().start()
    try:
        yield s
    finally:
        s.stop()


def _app(surface: Surface, agent: str = "main", mode: Any = "info") -> ConsoleApp:
    return ConsoleApp(AsyncServeClient(surface.path), agent, mode)


def conversation(app: ConsoleApp) -> list[str]:
    return [strip.text.rstrip() for strip in app.query_one("#conversation", RichLog).lines]


def bar(app: ConsoleApp, name: str) -> str:
    return str(app.query_one(f"#{name}", Static).render())


async def until(pilot: Pilot[Any], pred: Callable[[], bool], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if pred():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not reached")


async def submit(pilot: Pilot[Any], text: str) -> None:
    composer = pilot.app.query_one("#composer", Input)
    assert composer.has_focus  # the composer always has the focus
    composer.value = text
    await pilot.press("enter")


def _joined(app: ConsoleApp) -> str:
    return "\n".join(conversation(app))


async def test_layout_history_and_a_prompt_with_its_reply(surface: Surface, tmp_path: Path) -> None:
    app = _app(surface)
    with Turner(_model(tmp_path)):
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "connected" in bar(app, "agentbar"))
            assert "agent main" in bar(app, "agentbar") and "display info" in bar(app, "agentbar")
            await until(pilot, lambda: "workspace agent home" in bar(app, "statebar"))
            state = bar(app, "statebar")
            assert "workspace agent home" in state and "projection agent_home" in state
            assert "access public_named" in state
            await submit(pilot, "hi there")
            await until(pilot, lambda: "Result: hello back" in _joined(app))
            assert conversation(app)[:2] == ["Operator: hi there", "Result: hello back"]
            assert app.query_one("#composer", Input).value == ""
            (admitted,) = [
                e for e in open_agent(None).events.records() if e["kind"] == "message_admitted"
            ]
            assert admitted["delivery_surface"] == "http_control_prompt"
            assert admitted["authority_class"] == "operator_instruction"
            svg = app.export_screenshot()
            for word in ("agent", "main", "workspace", "Operator:", "Result:", "press", "Enter"):
                assert word in svg, word
    # a second console attaches and shows the history it finds
    app2 = _app(surface)
    async with app2.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: "Result: hello back" in _joined(app2))
        assert conversation(app2)[:2] == ["Operator: hi there", "Result: hello back"]


@pytest.mark.slow
async def test_display_modes_rerender_the_conversation(surface: Surface, tmp_path: Path) -> None:
    app = _app(surface)
    with Turner(_model(tmp_path, "done it")):
        async with app.run_test(size=(100, 30)) as pilot:
            await submit(pilot, "do it")
            await until(pilot, lambda: "Result: done it" in _joined(app))
            assert not any("Assistant progress" in line for line in conversation(app))
            await submit(pilot, "/display 4")
            await until(pilot, lambda: "Assistant: Assistant progress: done it" in _joined(app))
            assert "display verbose" in bar(app, "agentbar")
            await submit(pilot, "/display debug")
            await until(pilot, lambda: "Turn completed" in _joined(app))
            await submit(pilot, "/display loud")
            await until(pilot, lambda: "unknown display mode 'loud'" in _joined(app))
            assert app.conv.mode == "debug"


@pytest.mark.slow
async def test_bad_input_names_the_problem_and_changes_nothing(surface: Surface) -> None:
    create_agent(
        "kid",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id="main",
    )
    app = _app(surface)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.connected)
        await submit(pilot, "/bogus")
        await until(pilot, lambda: "unknown command '/bogus'" in _joined(app))
        await submit(pilot, "/agent nobody")
        await until(pilot, lambda: "unknown agent 'nobody'" in _joined(app))
        await submit(pilot, "/agent kid")
        await until(pilot, lambda: "unknown agent 'kid'" in _joined(app))
        await submit(pilot, "/agent")
        await until(pilot, lambda: "/agent needs an agent id" in _joined(app))
        assert app.agent_id == "main" and "agent main" in bar(app, "agentbar")
        assert app.query_one("#composer", Input).has_focus
    store = open_agent(None)
    assert [e for e in store.events.records() if e["kind"] == "message_admitted"] == []


@pytest.mark.slow
async def test_overlays_stack_and_esc_closes_the_top_one(surface: Surface) -> None:
    create_agent(
        "kid",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id="main",
    )
    app = _app(surface)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.connected)
        await pilot.press("f5")
        await until(pilot, lambda: app.screen.name == "actions")
        await pilot.press("enter")  # the first action: debug prompt
        await until(pilot, lambda: app.screen.name == "debug-prompt")
        body = _overlay_text(app)
        assert "sections (in prompt order):" in body and "tools" in body
        assert [s.name for s in app.screen_stack[1:]] == ["actions", "debug-prompt"]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen.name == "actions")
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        assert app.query_one("#composer", Input).has_focus
        await pilot.press("f2")
        await until(pilot, lambda: app.screen.name == "agents")
        options = app.screen.query_one(OptionList)
        labels = [str(o.prompt) for o in options.options]
        assert labels[0].startswith("* main") and labels[1].startswith("    kid")
        assert "private child" in labels[1] and options.get_option("kid").disabled
        await pilot.press("escape")
        for key, name in (("f1", "help"), ("f3", "transcript"), ("f4", "tasks")):
            await pilot.press(key)
            await until(pilot, lambda name=name: app.screen.name == name)
            await pilot.press("escape")
            await until(pilot, lambda: len(app.screen_stack) == 1)
        await submit(pilot, "/events")
        await until(pilot, lambda: app.screen.name == "events")
        assert "agent_created" in _overlay_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)


@pytest.mark.slow
async def test_the_agents_overlay_switches_agent(surface: Surface, tmp_path: Path) -> None:
    create_agent("helper", kind="named")
    app = _app(surface)
    with Turner(_model(tmp_path, "helping"), agents=("main", "helper")):
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.connected)
            await pilot.press("f2")
            await until(pilot, lambda: app.screen.name == "agents")
            options = app.screen.query_one(OptionList)
            options.highlighted = [o.id for o in options.options].index("helper")
            await pilot.press("enter")
            await until(pilot, lambda: "agent helper" in bar(app, "agentbar"))
            assert len(app.screen_stack) == 1 and app.agent_id == "helper"
            await submit(pilot, "help me")
            await until(pilot, lambda: "Result: helping" in _joined(app))
    helper = open_agent("helper", create_default=False)
    assert any(e["kind"] == "brief_recorded" for e in helper.events.records())


def _overlay_text(app: ConsoleApp) -> str:
    assert isinstance(app.screen, Overlay)
    return "\n".join(s.text for s in app.screen.query_one(RichLog).lines)


@pytest.mark.slow
async def test_serve_going_away_shows_a_banner_and_the_console_resumes(
    surface: Surface, tmp_path: Path
) -> None:
    app = _app(surface)
    with Turner(_model(tmp_path, "pong")):
        async with app.run_test(size=(100, 30)) as pilot:
            await submit(pilot, "ping 1")
            await until(pilot, lambda: "Result: pong" in _joined(app))
            surface.stop()
            await until(pilot, lambda: "serve is not answering" in bar(app, "banner"))
            assert "holon daemon start" in bar(app, "banner")
            await submit(pilot, "lost?")
            await until(pilot, lambda: "not sent" in _joined(app))
            assert app.query_one("#composer", Input).value == "lost?"  # kept for a retry
            open_agent(None)  # the turner keeps running turns meanwhile
            from holon_cli.runtime.enqueue import admit

            admit("while away")
            surface.start()
            await until(pilot, lambda: app.connected, timeout=15)
            assert bar(app, "banner") == ""
            await until(pilot, lambda: "Operator: while away" in _joined(app))
            await submit(pilot, "lost?")
            await until(pilot, lambda: _joined(app).count("Result: pong") == 3)
            lines = conversation(app)  # resumed from the cursor: nothing twice
            assert lines.count("Operator: ping 1") == 1
            assert lines.count("Operator: while away") == 1


@pytest.mark.slow
async def test_resize_and_control_characters(surface: Surface, tmp_path: Path) -> None:
    app = _app(surface)
    reply = "bell\x07 clear\x1b[2J csi\x9b31m end"
    with Turner(_model(tmp_path, reply)):
        async with app.run_test(size=(100, 30)) as pilot:
            await submit(pilot, "esc \x1b]0;title\x07 here")
            await until(pilot, lambda: "Result:" in _joined(app))
            text = _joined(app)
            assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
            assert "Operator: esc ␛]0;title␇ here" in text
            assert "Result: bell␇ clear␛[2J csi\\x9b31m end" in text
            for size in ((40, 12), (160, 50), (100, 30)):
                await pilot.resize_terminal(*size)
                await pilot.pause(0.1)
                assert app.query_one("#composer", Input).has_focus
                assert app.screen.size.width == size[0]
            assert "Result: bell" in _joined(app)


@pytest.mark.slow
async def test_quit_leaves_the_runtime_running(surface: Surface) -> None:
    import httpx2 as httpx

    before = open_agent(None).read_record()["state"]["status"]
    for how in ("/quit", "ctrl+q"):
        app = _app(surface)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda app=app: app.connected)
            if how == "/quit":
                await submit(pilot, "/quit")
            else:
                await pilot.press("ctrl+q")
            await until(pilot, lambda app=app: not app.is_running)
    transport = httpx.HTTPTransport(uds=str(surface.path))
    with httpx.Client(transport=transport, base_url="http://x") as c:
        assert c.get("/healthz").json() == {"ok": True}  # serve still answers
    assert open_agent(None).read_record()["state"]["status"] == before


def _overlay_error(app: ConsoleApp) -> str:
    return str(app.screen.query_one("#attach-error", Static).render())


def _active_workspace() -> str:
    state = open_agent(None).read_record()["state"]
    return str(state.get("active_workspace_id") or "agent_home")


async def _action(pilot: Pilot[Any], key: str) -> None:
    """F5, then the action ``key`` of the actions overlay."""
    app = pilot.app
    await pilot.press("f5")
    await until(pilot, lambda: app.screen.name == "actions")
    options = app.screen.query_one(OptionList)
    options.highlighted = [o.id for o in options.options].index(key)
    await pilot.press("enter")


@pytest.mark.slow
async def test_workspace_attach_enter_and_exit_actions(surface: Surface, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    app = _app(surface)
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: "workspace agent home" in bar(app, "statebar"))
        # enter with nothing attached: a clear notice, no overlay
        await _action(pilot, "workspace-enter")
        await until(pilot, lambda: "no attached workspace" in _joined(app))
        assert len(app.screen_stack) == 1
        # attach: a bad directory keeps the overlay and what was typed
        await _action(pilot, "workspace-attach")
        await until(pilot, lambda: app.screen.name == "workspace-attach")
        path_input = app.screen.query_one("#attach-path", Input)
        assert path_input.has_focus
        path_input.value = str(tmp_path / "missing")
        await pilot.press("enter")
        await until(pilot, lambda: "no such directory" in _overlay_error(app))
        assert app.screen.name == "workspace-attach" and path_input.value.endswith("missing")
        assert _active_workspace() == "agent_home"
        assert not any(line.startswith("Operator:") for line in conversation(app))
        path_input.value = str(proj)
        await pilot.press("enter")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        wid = _active_workspace()
        assert wid.startswith("ws_")
        await until(pilot, lambda: f"workspace {wid} {proj}" in bar(app, "statebar"))
        assert "projection canonical_root" in bar(app, "statebar")
        # the default sandbox (auto): bwrap with the network on where it works here
        from holon_cli.runtime.tasks.sandbox import projection

        boxed = projection({}, None)["sandbox"] == "bwrap"
        access = "bwrap (network on)" if boxed else "host_local"
        assert f"access public_named, {access}" in bar(app, "statebar")
        assert "(newly attached)" in _joined(app)
        assert app.query_one("#composer", Input).has_focus
        # exit: back to the agent's home at once
        await _action(pilot, "workspace-exit")
        await until(pilot, lambda: "workspace agent home" in bar(app, "statebar"))
        assert _active_workspace() == "agent_home" and len(app.screen_stack) == 1
        # enter: the attached workspace, direct
        await _action(pilot, "workspace-enter")
        await until(pilot, lambda: app.screen.name == "workspace-enter")
        options = app.screen.query_one(OptionList)
        ids = [o.id for o in options.options]
        assert ids == [f"direct:{wid}", f"isolated:{wid}"]
        options.highlighted = 0
        await pilot.press("enter")
        await until(pilot, lambda: f"workspace {wid}" in bar(app, "statebar"))
        assert _active_workspace() == wid and len(app.screen_stack) == 1
        # isolated in a directory that is not a git repository: refused, shown
        await _action(pilot, "workspace-enter")
        await until(pilot, lambda: app.screen.name == "workspace-enter")
        app.screen.query_one(OptionList).highlighted = 1
        await pilot.press("enter")
        await until(pilot, lambda: "not a git repository" in _overlay_error(app))
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        assert _active_workspace() == wid


@needs_git
@pytest.mark.slow
async def test_workspace_attach_isolated_shows_the_worktree(
    surface: Surface, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitrepos import isolate_git, make_repo
    from textual.widgets import Checkbox

    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    app = _app(surface)
    async with app.run_test(size=(200, 30)) as pilot:
        await until(pilot, lambda: app.connected)
        await submit(pilot, "/workspace-attach repo")  # relative to the console's cwd
        await until(pilot, lambda: app.screen.name == "workspace-attach")
        assert app.screen.query_one("#attach-path", Input).value == "repo"
        await pilot.press("tab", "space")
        assert app.screen.query_one("#attach-isolated", Checkbox).value
        app.screen.query_one("#attach-path", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        await until(pilot, lambda: "worktree " in bar(app, "statebar"))
        state = bar(app, "statebar")
        assert "projection git_worktree_root" in state and "from main" in state
        session = open_agent(None).read_record()["state"]["worktree_session"]
        assert session and session["original_working_directory"].startswith(str(repo))
        assert session["worktree_branch"] in state


@pytest.mark.slow
async def test_history_cut_by_retention_is_said_once(surface: Surface) -> None:
    from holon_cli.store.ledger import write_trimmed

    events = open_agent(None).events
    write_trimmed(events.segments_dir, events.path.stem, {"through_seq": 1, "before": "then"})
    app = _app(surface, mode="verbose")
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.connected)
        await until(pilot, lambda: "History trimmed:" in _joined(app))
        assert "Events through #1 were removed by retention" in _joined(app)
        assert _joined(app).count("History trimmed") == 1
