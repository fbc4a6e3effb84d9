"""One turn's spans and metrics (:class:`OtelTurn`, the
:class:`~holon_cli.runtime.telemetry.TurnTracer` used while tracing is on).

Span tree of a turn::

    invoke_agent <agent id>            INTERNAL, one per turn
      chat <model>                     CLIENT, one per provider attempt:
      chat <model>                       a retry or a fallback is a sibling
      execute_tool <tool>              INTERNAL, one per tool call; current
        (commands, tasks, child          while the call runs, so TRACEPARENT
         agents, MCP requests)           and a delegation carry it

``chat`` spans are made from the provider chain's attempt timeline after the
round (their start and end are the attempts' own), so the chain
(``providers/chain.py``, below this layer) needs no hook. Spans are given
their parent explicitly: provider and tool calls run on worker threads.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from holon_cli import clock
from holon_cli.model.tracecontext import TraceContext, from_env
from holon_cli.runtime.telemetry import semconv as sc

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span
    from opentelemetry.util.types import AttributeValue

    from holon_cli.model.envelope import Envelope
    from holon_cli.model.turn import ProviderAttemptRecord
    from holon_cli.runtime.telemetry.sdk import Plane
    from holon_cli.store.agent_store import AgentStore


_F = TypeVar("_F", bound=Callable[..., None])


def _never_fails(fn: _F) -> _F:
    """Telemetry never fails a turn: a bug here loses a span, not the turn."""

    @functools.wraps(fn)
    def safe(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - see the docstring
            pass

    return safe  # type: ignore[return-value]


def _ns(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        return int(clock.parse_iso(iso) * 1e9)
    except ValueError:
        return None


class _Tool:
    """The handle ``OtelTurn.tool`` yields: records the call's result."""

    def __init__(self, span: Span, policy: sc.ContentPolicy) -> None:
        self.span = span
        self.policy = policy

    @_never_fails
    def result(self, res: Any) -> None:
        if not getattr(res, "ok", True):
            err = getattr(res, "error", None) or {}
            kind = err.get("kind") if isinstance(err, dict) else None
            self.span.set_attribute(sc.ERROR_TYPE, str(kind or "tool_error"))
            self.span.set_status(Status(StatusCode.ERROR))
        if self.policy.capture:
            out = getattr(res, "output", None)
            if out is None:
                out = getattr(res, "content", None)
            if out is not None:
                self.span.set_attribute(sc.TOOL_RESULT, self.policy.dumps(out))


class _Untraced:
    def result(self, res: Any) -> None:
        return None


class OtelTurn:
    """The spans and metrics of one turn (see the module docstring)."""

    def __init__(
        self,
        plane: Plane,
        store: AgentStore,
        message: Envelope,
        *,
        inherited: Callable[[], TraceContext | None] | None = None,
    ) -> None:
        self.plane = plane
        self.store = store
        self.msg = message
        self.inherited = inherited
        self.span: Span | None = None
        self.ctx: Context | None = None
        self.agent_id = store.agent_id

    # ---------------------------------------------------------------- parent

    def parent(self) -> Context | None:
        """The trace this turn continues: the message's, the delegation's,
        the process's TRACEPARENT; ``None`` starts a trace."""
        tc: TraceContext | None = self.msg.get("trace_context")
        if not tc and self.inherited is not None:
            try:
                tc = self.inherited()
            except Exception:  # noqa: BLE001 - a lost link never fails a turn
                tc = None
        if not tc:
            import os

            tc = from_env(os.environ)
        return self.plane.extract(tc)

    # ----------------------------------------------------------------- turn

    @_never_fails
    def start(self, turn_id: str) -> None:
        attrs = {
            sc.OPERATION: sc.INVOKE_AGENT,
            sc.AGENT_ID: self.agent_id,
            sc.AGENT_NAME: self.agent_id,  # an agent's id is its name
            sc.CONVERSATION_ID: self.agent_id,
            sc.MESSAGE_ID: self.msg["id"],
            sc.TURN_ID: turn_id,
        }
        self.span = self.plane.tracer.start_span(
            f"{sc.INVOKE_AGENT} {self.agent_id}",
            context=self.parent(),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
        )
        self.ctx = trace.set_span_in_context(self.span)
        if self.plane.content.capture:
            from holon_cli.model.envelope import body_text

            text = body_text(self.msg.get("body"))
            msg = {"role": "user", "parts": [{"type": "text", "content": text}]}
            self.span.set_attribute(sc.INPUT_MESSAGES, self.plane.content.messages([msg]))

    @_never_fails
    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        span = self.span
        if span is None:
            return
        outcome = _outcome(result, error)
        span.set_attribute(sc.TURN_OUTCOME, outcome)
        if error is not None:
            span.set_attribute(sc.ERROR_TYPE, type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
        elif outcome in ("failed", "aborted"):
            kind = getattr(result, "failure_kind", None)
            span.set_attribute(sc.ERROR_TYPE, str(kind or "_OTHER"))
            span.set_status(Status(StatusCode.ERROR))
        if result is not None and self.plane.content.capture and result.final_text:
            msg = {
                "role": "assistant",
                "parts": [{"type": "text", "content": result.final_text}],
            }
            span.set_attribute(sc.OUTPUT_MESSAGES, self.plane.content.messages([msg]))
        span.end()
        self.plane.turns.add(1, {sc.TURN_OUTCOME: outcome})
        self.span = None

    # ----------------------------------------------------------------- chat

    @_never_fails
    def chat(self, timeline: Any, response: Any, request: Any) -> None:
        """One span per attempt of the round (siblings under the turn)."""
        attempts = list((timeline or {}).get("attempts") or [])
        for i, att in enumerate(attempts):
            last_ok = response is not None and i == len(attempts) - 1
            self._attempt(att, response if last_ok else None, request)

    def _attempt(self, att: ProviderAttemptRecord, response: Any, request: Any) -> None:
        ref = str(att.get("model_ref") or "")
        model = sc.request_model(ref)
        provider = sc.provider_name(att.get("provider"), ref)
        start = _ns(att.get("started_at")) or time.time_ns()
        end = start + int(att.get("duration_ms") or 0) * 1_000_000
        attrs: dict[str, AttributeValue] = {
            sc.OPERATION: sc.CHAT,
            sc.PROVIDER: provider,
            sc.REQUEST_MODEL: model,
            sc.CONVERSATION_ID: self.agent_id,
            sc.MODEL_REF: ref,
            sc.ATTEMPT: int(att.get("attempt") or 1),
        }
        span = self.plane.tracer.start_span(
            f"{sc.CHAT} {model}",
            context=self.ctx,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=start,
        )
        usage = att.get("token_usage") or {}
        if usage:
            span.set_attribute(sc.INPUT_TOKENS, int(usage.get("input_tokens", 0)))
            span.set_attribute(sc.OUTPUT_TOKENS, int(usage.get("output_tokens", 0)))
            span.set_attribute(sc.CACHE_READ, int(usage.get("cache_read_input_tokens", 0)))
            span.set_attribute(sc.CACHE_CREATION, int(usage.get("cache_creation_input_tokens", 0)))
        error = att.get("failure_kind") if att.get("outcome") != "succeeded" else None
        metric_attrs: dict[str, AttributeValue] = {
            sc.OPERATION: sc.CHAT,
            sc.PROVIDER: provider,
            sc.REQUEST_MODEL: model,
        }
        if response is not None:
            if response.model:
                span.set_attribute(sc.RESPONSE_MODEL, response.model)
                metric_attrs[sc.RESPONSE_MODEL] = response.model
            if response.response_id:
                span.set_attribute(sc.RESPONSE_ID, response.response_id)
            span.set_attribute(
                sc.FINISH_REASONS, [response.raw_stop_reason or response.stop_reason]
            )
            if self.plane.content.capture:
                self._content(span, request, response)
        if error:
            span.set_attribute(sc.ERROR_TYPE, str(error))
            span.set_status(Status(StatusCode.ERROR))
            metric_attrs[sc.ERROR_TYPE] = str(error)
        span.end(end_time=end)
        self.plane.duration.record((end - start) / 1e9, metric_attrs)
        if usage and not error:
            tok = {k: v for k, v in metric_attrs.items() if k != sc.ERROR_TYPE}
            self.plane.token_usage.record(
                int(usage.get("input_tokens", 0)), {**tok, sc.TOKEN_TYPE: "input"}
            )
            self.plane.token_usage.record(
                int(usage.get("output_tokens", 0)), {**tok, sc.TOKEN_TYPE: "output"}
            )

    def _content(self, span: Span, request: Any, response: Any) -> None:
        pol = self.plane.content
        if request is not None:
            items = [sc.conversation_item(i) for i in getattr(request, "conversation", [])]
            span.set_attribute(sc.INPUT_MESSAGES, pol.messages(items))
            frame = getattr(request, "frame", None)
            if frame is not None and frame.system_prompt:
                instr = [{"type": "text", "content": frame.system_prompt}]
                span.set_attribute(sc.SYSTEM_INSTRUCTIONS, pol.dumps(instr))
        span.set_attribute(sc.OUTPUT_MESSAGES, pol.messages([sc.output_message(response)]))

    # ----------------------------------------------------------------- tool

    @contextmanager
    def tool(self, call: Any) -> Iterator[Any]:
        try:
            span, token = self._tool_span(call)
        except Exception:  # noqa: BLE001 - never fails the call (see _never_fails)
            yield _Untraced()
            return
        try:
            yield _Tool(span, self.plane.content)
        except BaseException as exc:
            span.set_attribute(sc.ERROR_TYPE, type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            self.plane.detach(token)
            span.end()

    def _tool_span(self, call: Any) -> tuple[Span, object]:
        name = str(call.name)
        attrs: dict[str, AttributeValue] = {
            sc.OPERATION: sc.EXECUTE_TOOL,
            sc.TOOL_NAME: name,
            sc.TOOL_CALL_ID: str(call.id),
            sc.TOOL_TYPE: "function",
            sc.CONVERSATION_ID: self.agent_id,
        }
        if name.startswith(sc.MCP_PREFIX):
            attrs[sc.MCP_METHOD] = "tools/call"
        if self.plane.content.capture:
            attrs[sc.TOOL_ARGUMENTS] = self.plane.content.dumps(call.arguments)
        span = self.plane.tracer.start_span(
            f"{sc.EXECUTE_TOOL} {name}", context=self.ctx, kind=SpanKind.INTERNAL, attributes=attrs
        )
        # current while the call runs: the worker thread copies this context,
        # so a command's TRACEPARENT and a delegation name this span
        return span, self.plane.attach(trace.set_span_in_context(span, self.ctx))


def _outcome(result: Any, error: BaseException | None) -> str:
    """``holon.turn.outcome``: the closure's outcome (completed, continuable,
    waiting, failed), ``aborted`` for an aborted turn, ``interrupted`` or
    ``error`` when an exception ended it."""
    if error is not None:
        return "interrupted" if isinstance(error, KeyboardInterrupt) else "error"
    if result is None:
        return "error"
    if getattr(result, "status", None) == "aborted":
        return "aborted"
    closure = getattr(result, "closure", None) or {}
    return str(closure.get("outcome") or "completed")
