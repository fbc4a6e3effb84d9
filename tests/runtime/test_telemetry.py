"""The telemetry plane against the SDK's in-memory exporter and reader: the
GenAI span tree of a turn (names, kinds, attributes as the conventions
name them), retries as sibling chat spans, tool spans and the trace context
a command inherits, the message's trace continued, content capture, and the
metrics. (The OTLP wire, other processes and serve: tests/e2e/test_telemetry_otlp.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from holon_cli.model.tracecontext import parse_traceparent  # noqa: E402
from holon_cli.runtime import telemetry  # noqa: E402
from holon_cli.runtime.enqueue import admit  # noqa: E402
from holon_cli.runtime.telemetry import semconv as sc  # noqa: E402
from holon_cli.runtime.telemetry.sdk import Plane  # noqa: E402
from holon_cli.runtime.turn import run_turn  # noqa: E402
from holon_cli.tools.catalog import default_catalog  # noqa: E402

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Traced:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.plane = Plane(self.spans, self.reader, batch=False)
        telemetry.use(self.plane)

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def named(self, prefix: str) -> list[Any]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def metrics(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for scope in rm.scope_metrics:
                for m in scope.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out


@pytest.fixture
def traced() -> Traced:
    return Traced()


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def test_a_one_round_turn_is_invoke_agent_over_one_chat(tmp_path: Path, traced: Traced) -> None:
    usage = {"input_tokens": 120, "output_tokens": 7, "cache_read_input_tokens": 100}
    model = script(tmp_path, [{"text": "Hello.", "usage": usage}])
    env = admit("hi")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.ran and res.status == "completed"
    (agent,) = traced.named("invoke_agent")
    (chat,) = traced.named("chat")
    assert agent.name == "invoke_agent main" and agent.kind == SpanKind.INTERNAL
    a = dict(agent.attributes)
    assert a[sc.OPERATION] == "invoke_agent" and a[sc.AGENT_ID] == "main"
    assert a[sc.CONVERSATION_ID] == "main" and a[sc.AGENT_NAME]
    assert a[sc.MESSAGE_ID] == env["id"] and a[sc.TURN_ID] == res.turn_id
    assert a[sc.TURN_OUTCOME] == "completed"
    assert agent.parent is None  # nothing to continue: a new trace
    assert chat.parent.span_id == agent.context.span_id
    assert chat.context.trace_id == agent.context.trace_id
    assert chat.kind == SpanKind.CLIENT and chat.name == f"chat {model}"
    c = dict(chat.attributes)
    assert c[sc.OPERATION] == "chat" and c[sc.PROVIDER] == "scripted"
    assert c[sc.REQUEST_MODEL] == model
    assert c[sc.INPUT_TOKENS] == 120 and c[sc.OUTPUT_TOKENS] == 7
    assert c[sc.CACHE_READ] == 100 and c[sc.CACHE_CREATION] == 0
    assert tuple(c[sc.FINISH_REASONS]) == ("end_turn",)
    assert sc.ERROR_TYPE not in c
    # no content unless asked for
    assert sc.INPUT_MESSAGES not in c and sc.INPUT_MESSAGES not in a
    assert agent.start_time <= chat.start_time <= chat.end_time <= agent.end_time
    m = traced.metrics()
    tokens = {p.attributes[sc.TOKEN_TYPE]: p for p in m["gen_ai.client.token.usage"]}
    assert tokens["input"].sum == 120 and tokens["output"].sum == 7
    assert tokens["input"].attributes[sc.PROVIDER] == "scripted"
    assert list(tokens["input"].explicit_bounds)[:3] == [1, 4, 16]
    (dur,) = m["gen_ai.client.operation.duration"]
    assert dur.count == 1 and list(dur.explicit_bounds)[:2] == [0.01, 0.02]
    (turns,) = m["holon.turns"]
    assert turns.value == 1 and turns.attributes[sc.TURN_OUTCOME] == "completed"
    (depth,) = m["holon.queue.depth"]
    assert depth.value == 0 and depth.attributes[sc.AGENT_ID] == "main"


def test_retries_are_sibling_chat_spans_with_error_type(tmp_path: Path, traced: Traced) -> None:
    fail = {"kind": "rate_limited", "message": "slow down", "status": 429, "retry_after_s": 0}
    model = script(tmp_path, [{"fail": fail}, {"text": "ok"}])
    admit("hi")
    res = run_turn(None, cli_model=model, catalog=default_catalog(), sleep=lambda s: None)
    assert res.status == "completed"
    (agent,) = traced.named("invoke_agent")
    first, second = sorted(traced.named("chat"), key=lambda s: s.start_time)
    assert first.parent.span_id == second.parent.span_id == agent.context.span_id
    assert first.attributes[sc.ERROR_TYPE] == "rate_limited"
    assert first.status.status_code == StatusCode.ERROR
    assert first.attributes[sc.ATTEMPT] == 1 and second.attributes[sc.ATTEMPT] == 2
    assert sc.ERROR_TYPE not in second.attributes
    durations = traced.metrics()["gen_ai.client.operation.duration"]
    errors = [p for p in durations if p.attributes.get(sc.ERROR_TYPE) == "rate_limited"]
    assert len(errors) == 1


def test_a_failed_turn_carries_its_failure(tmp_path: Path, traced: Traced) -> None:
    fail = {"kind": "auth", "message": "bad key", "status": 401}
    model = script(tmp_path, [{"fail": fail}])
    admit("hi")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "aborted"
    (agent,) = traced.named("invoke_agent")
    assert agent.attributes[sc.TURN_OUTCOME] == "aborted"
    assert agent.attributes[sc.ERROR_TYPE] == "auth"
    (chat,) = traced.named("chat")
    assert chat.attributes[sc.ERROR_TYPE] == "auth"
    assert traced.metrics()["holon.turns"][0].attributes[sc.TURN_OUTCOME] == "aborted"


def test_a_tool_call_is_execute_tool_and_its_command_gets_traceparent(
    tmp_path: Path, traced: Traced
) -> None:
    call = {"name": "ExecCommand", "arguments": {"cmd": 'echo "tp=$TRACEPARENT"'}, "id": "c1"}
    model = script(tmp_path, [{"text": "", "tool_calls": [call]}, {"text": "done"}])
    admit("run it")
    res = run_turn(None, cli_model=model, catalog=default_catalog())
    assert res.status == "completed"
    (agent,) = traced.named("invoke_agent")
    (tool,) = traced.named("execute_tool")
    assert tool.name == "execute_tool ExecCommand" and tool.kind == SpanKind.INTERNAL
    assert tool.parent.span_id == agent.context.span_id
    t = dict(tool.attributes)
    assert t[sc.OPERATION] == "execute_tool" and t[sc.TOOL_NAME] == "ExecCommand"
    assert t[sc.TOOL_CALL_ID] == "c1" and t[sc.TOOL_TYPE] == "function"
    assert len(traced.named("chat")) == 2
    # the command ran in a real process with the tool span as its parent
    from holon_cli.runtime.agents.lifecycle import open_agent

    out = next(
        r for r in open_agent(None).ledger("transcript").records() if r["kind"] == "tool_result"
    )
    stdout = json.loads(out["output"])["stdout_preview"]
    tp = parse_traceparent(stdout.split("tp=", 1)[1].strip())
    assert tp is not None
    assert tp.trace_id == format(agent.context.trace_id, "032x")
    assert tp.span_id == format(tool.context.span_id, "016x")


def test_a_failing_tool_call_has_error_type(tmp_path: Path, traced: Traced) -> None:
    call = {"name": "ExecCommand", "arguments": {"nope": 1}}
    model = script(tmp_path, [{"text": "", "tool_calls": [call]}, {"text": "done"}])
    admit("run it")
    run_turn(None, cli_model=model, catalog=default_catalog())
    (tool,) = traced.named("execute_tool")
    assert tool.attributes[sc.ERROR_TYPE] == "invalid_arguments"
    assert tool.status.status_code == StatusCode.ERROR


def test_the_message_trace_is_continued(tmp_path: Path, traced: Traced) -> None:
    model = script(tmp_path, [{"text": "ok"}])
    env = admit("hi", trace_context={"traceparent": PARENT, "tracestate": "rojo=1"})
    assert env["trace_context"] == {"traceparent": PARENT, "tracestate": "rojo=1"}
    run_turn(None, cli_model=model, catalog=default_catalog())
    (agent,) = traced.named("invoke_agent")
    assert format(agent.context.trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert format(agent.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert agent.parent.is_remote


def test_the_process_traceparent_is_continued(
    tmp_path: Path, traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEPARENT", PARENT)
    model = script(tmp_path, [{"text": "ok"}])
    admit("hi")
    run_turn(None, cli_model=model, catalog=default_catalog())
    (agent,) = traced.named("invoke_agent")
    assert format(agent.context.trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_bad_trace_context_is_dropped_not_refused() -> None:
    env = admit("hi", trace_context={"traceparent": "00-zz-nope-01"})
    assert "trace_context" not in env
    env = admit("hi", trace_context={"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"})
    assert "trace_context" not in env


def test_content_only_when_asked_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sc.CAPTURE_VAR, "true")
    traced = Traced()
    call = {"name": "ExecCommand", "arguments": {"cmd": "echo hi"}}
    model = script(tmp_path, [{"text": "", "tool_calls": [call]}, {"text": "x" * 50000}])
    admit("please " * 10)
    run_turn(None, cli_model=model, catalog=default_catalog())
    chats = sorted(traced.named("chat"), key=lambda s: s.start_time)
    inputs = json.loads(chats[1].attributes[sc.INPUT_MESSAGES])
    assert [m["role"] for m in inputs][-2:] == ["assistant", "tool"]
    assert inputs[-1]["parts"][0]["type"] == "tool_call_response"
    out = chats[1].attributes[sc.OUTPUT_MESSAGES]
    assert len(out) <= sc.MAX_CONTENT_CHARS
    assert sc.SYSTEM_INSTRUCTIONS in chats[0].attributes
    (tool,) = traced.named("execute_tool")
    assert json.loads(tool.attributes[sc.TOOL_ARGUMENTS]) == {"cmd": "echo hi"}
    assert "hi" in tool.attributes[sc.TOOL_RESULT]


@pytest.mark.parametrize(
    ("opt_in", "value", "on"),
    [
        ("", "true", True),
        ("", "TRUE", True),
        ("", "false", False),
        ("", "SPAN_ONLY", False),
        ("gen_ai_latest_experimental", "SPAN_ONLY", True),
        ("gen_ai_latest_experimental", "span_and_event", True),
        ("gen_ai_latest_experimental", "EVENT_ONLY", False),
        ("gen_ai_latest_experimental", "NO_CONTENT", False),
        ("gen_ai_latest_experimental", "", False),
    ],
)
def test_the_content_switch(opt_in: str, value: str, on: bool) -> None:
    env = {sc.CAPTURE_VAR: value, sc.OPT_IN_VAR: opt_in}
    assert sc.ContentPolicy.from_env(env).capture is on


@pytest.mark.parametrize(
    ("env", "cfg", "on"),
    [
        ({}, {}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, {}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"}, {}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, {}, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, {}, False),
        ({}, {"telemetry": {"enabled": True}}, True),
        ({}, {"telemetry": {"enabled": False}}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, {}, False),
    ],
)
def test_when_tracing_is_on(env: dict[str, str], cfg: dict[str, Any], on: bool) -> None:
    assert telemetry.wanted(cfg, env) is on


def test_off_is_a_no_op_and_passes_the_environment_on() -> None:
    assert telemetry.plane({}) is None
    assert telemetry.child_env() == {} and telemetry.trace_meta() == {}
    env = {"TRACEPARENT": PARENT}
    assert telemetry.with_child_env(dict(env)) == env


def test_context_helpers_name_the_current_span(traced: Traced) -> None:
    from opentelemetry import trace

    with traced.plane.tracer.start_as_current_span("x") as span:
        tp = parse_traceparent(telemetry.current_traceparent())
        assert tp is not None and tp.span_id == format(span.get_span_context().span_id, "016x")
        assert telemetry.trace_meta()["traceparent"] == telemetry.current_traceparent()
        env = telemetry.with_child_env({"TRACEPARENT": PARENT, "TRACESTATE": "old=1"})
        assert env["TRACEPARENT"] == telemetry.current_traceparent() and "TRACESTATE" not in env
        telemetry.annotate({"mcp.session.id": "s1"})
    assert traced.finished()[0].attributes["mcp.session.id"] == "s1"
    assert not trace.get_current_span().is_recording()


def test_dropped_spans_are_counted_in_the_home(holon_home: Path) -> None:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.inspect import agent_summary

    class Down(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.FAILURE

    plane = Plane(Down(), None, home=holon_home, batch=False)
    for _ in range(3):
        plane.tracer.start_span("s").end()
    plane.shutdown(0.05)
    s = agent_summary(open_agent(None))
    assert s["telemetry"] == {"enabled": False, "dropped": 3}


def test_status_text_names_tracing_and_drops(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch, script_runner: Any
) -> None:
    from holon_cli.store.telemetry import add_dropped

    res = script_runner.run(["holon", "status"], print_result=False)
    assert not any(line.startswith("tracing") for line in res.stdout.splitlines())  # no row
    add_dropped(holon_home, 5)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    res = script_runner.run(["holon", "status"], print_result=False)
    assert "on, 5 span(s) never reached the collector" in res.stdout


def test_the_exit_flush_is_bounded_whatever_the_exporter_does(holon_home: Path) -> None:
    """An export that hangs (a collector that never answers) is abandoned at
    the flush budget; what it held is counted as dropped."""
    import threading
    import time

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    release = threading.Event()

    class Hangs(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            release.wait(30)
            return SpanExportResult.SUCCESS

    plane = Plane(Hangs(), None, home=holon_home, flush_budget_s=0.05)
    for _ in range(4):
        plane.tracer.start_span("s").end()
    t0 = time.monotonic()
    plane.shutdown()
    took = time.monotonic() - t0
    release.set()
    assert took < 1.0, took  # 50 ms of budget; a loaded machine adds its share
    from holon_cli.store.telemetry import read_dropped

    assert read_dropped(holon_home) == 4
    plane.shutdown()  # twice: nothing more
    assert read_dropped(holon_home) == 4


# the attributes the GenAI conventions define for these spans (gen-ai-spans.md,
# gen-ai-agent-spans.md, mcp.md), as of the latest experimental version
CONVENTION_ATTRIBUTES = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.agent.id",
    "gen_ai.agent.name",
    "gen_ai.conversation.id",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "error.type",
    "mcp.method.name",
}


def test_every_attribute_is_the_conventions_or_holons_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sc.CAPTURE_VAR, "true")
    traced = Traced()
    fail = {"kind": "server_error", "message": "oops", "status": 500, "retry_after_s": 0}
    calls = [
        {"name": "ExecCommand", "arguments": {"cmd": "true"}},
        {"name": "mcp__files__read", "arguments": {}},
    ]
    usage = {"input_tokens": 9, "output_tokens": 2}
    steps = [{"fail": fail}, {"text": "", "tool_calls": calls, "usage": usage}, {"text": "ok"}]
    model = script(tmp_path, steps)
    admit("go")
    run_turn(None, cli_model=model, catalog=default_catalog(), sleep=lambda s: None)
    spans = traced.finished()
    assert {s.name.split()[0] for s in spans} == {"invoke_agent", "chat", "execute_tool"}
    for span in spans:
        for key in span.attributes:
            assert key in CONVENTION_ATTRIBUTES or key.startswith("holon."), (span.name, key)
        assert span.attributes[sc.OPERATION] == span.name.split()[0]
    (mcp,) = [s for s in spans if s.name == "execute_tool mcp__files__read"]
    assert mcp.attributes[sc.MCP_METHOD] == "tools/call"
    assert mcp.attributes[sc.ERROR_TYPE]  # an unknown tool: a tool error
    m = traced.metrics()
    for name, unit_bounds in (
        ("gen_ai.client.token.usage", [4**i for i in range(14)]),
        (
            "gen_ai.client.operation.duration",
            [
                0.01,
                0.02,
                0.04,
                0.08,
                0.16,
                0.32,
                0.64,
                1.28,
                2.56,
                5.12,
                10.24,
                20.48,
                40.96,
                81.92,
            ],
        ),
    ):
        assert list(m[name][0].explicit_bounds) == unit_bounds, name
    for point in m["gen_ai.client.operation.duration"]:
        assert set(point.attributes) <= {
            sc.OPERATION,
            sc.PROVIDER,
            sc.REQUEST_MODEL,
            sc.RESPONSE_MODEL,
            sc.ERROR_TYPE,
        }


def test_an_mcp_call_carries_the_tool_spans_traceparent_in_meta(
    tmp_path: Path, traced: Traced, holon_home: Path
) -> None:
    """The MCP plane's ``_meta`` hook (issue 38) reads the current span: a
    real call through the fake stdio server logs the ``_meta`` it received."""
    pytest.importorskip("mcp")
    from mcp_helpers import close_servers, fake, write_config

    log = tmp_path / "fake.log"
    # the server writes its log outside any execution root: run it on the host
    write_config(
        holon_home,
        {"fake": fake("--era", "modern", "--log", str(log))},
        execution={"sandbox": "none"},
    )
    call = {"name": "mcp__fake__echo", "arguments": {"text": "hi"}, "id": "c1"}
    model = script(tmp_path, [{"text": "", "tool_calls": [call]}, {"text": "done"}])
    admit("go")
    try:
        res = run_turn(None, cli_model=model, catalog=default_catalog())
    finally:
        close_servers()
    assert res.status == "completed"
    (tool,) = traced.named("execute_tool")
    assert tool.attributes[sc.MCP_METHOD] == "tools/call"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    (sent,) = [c for c in calls if c["method"] == "tools/call"]
    tp = parse_traceparent(sent["meta"]["traceparent"])
    assert tp is not None and tp.span_id == format(tool.context.span_id, "016x")
    assert tp.trace_id == format(tool.context.trace_id, "032x")


def test_mcp_meta_is_none_when_off() -> None:
    pytest.importorskip("mcp")
    from holon_cli.runtime.mcp.tracing import request_meta

    assert request_meta() is None
