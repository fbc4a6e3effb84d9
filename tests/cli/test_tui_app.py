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
from tui_serve import Surface, Turner

pytest.importorskip("textual", reason="textual (the tui extra) is not installed")

from textual.pilot import Pilot  # noqa: E402
from textual.widgets import Input, OptionList, RichLog, Static  # noqa: E402

from holon_cli.cli.tui.app import ConsoleApp, Overlay  # noqa: E402
from holon_cli.runtime.agents import create_agent, open_agent  # noqa: E402
from holon_cli.serve.client import AsyncServeClient  # noqa: E402

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
