"""Operator requests: an MCP server's question to the user, answered later.

When a call answers ``input_required`` (2026-07-28) or a 2025-11-25 server
sends an elicitation request during a call, the turn does not wait: the
request is recorded here, an ``action_required`` brief tells the operator,
and the model is told the result will come as a message. The operator
answers with ``holon mcp answer ID CONTENT_JSON`` (or ``--decline``); the
answer re-sends the original call at once (2026-07-28: with
``inputResponses`` and the echoed ``requestState``; 2025-11-25: the call
again, the server's elicitation answered from the record) and its result
reaches the agent as a queued ``mcp_result`` message.

The ledger ``.holon/ledger/mcp_requests.jsonl`` of the agent holds, per
request, ``opened`` (the call, the server's requests), ``answered`` (the
operator's answer, written before the re-send) and ``resolved`` (what came
of it, the ``mcp_result`` message id, or the next request when the server
asks again). One outcome per request, across restarts:

- an answer to a resolved request is refused (exit 4, ``mcp_request_closed``);
- a process killed after ``answered`` and before ``resolved`` leaves the
  answer recorded: answering again re-sends the recorded answer (a new
  answer is not taken), and the ``mcp_result`` message is admitted with the
  request id as its idempotency key, so the agent gets one message;
- a re-send that cannot reach the server (``mcp_unavailable``,
  ``mcp_timeout``) resolves nothing: the answer stays recorded for the next
  try.

Answers of one agent are serialised by a lock (``mcp_requests.answer``).
Sampling requests are declined: a call that needs one gets an error result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import HolonError, NotFoundError, RejectedError, UsageError

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.mcp import OperatorAnswer, RequestOpened
    from holon_cli.runtime.mcp.config import ServerSpec
    from holon_cli.runtime.mcp.sdk import CallOutcome
    from holon_cli.runtime.mcp.shapes import FormSchema, McpRequest, RequestRow, SentAnswer
    from holon_cli.store.agent_store import AgentStore

LEDGER = "mcp_requests"
VERSION = 1


def _ledger(store: AgentStore) -> Any:
    return store.ledger(LEDGER)


def _fold(store: AgentStore) -> dict[str, McpRequest]:
    """Every request of the agent with its state (``pending``, ``answered``,
    ``resolved``), oldest first. Each line is checked into its type
    (``model/mcp.py``); a damaged one is left out here, so one bad line
    hides no other request, and ``holon home check`` names it."""
    path = store.layout.ledger_path(LEDGER)
    if not path.exists():
        return {}
    from holon_cli.model.mcp import RequestOpened
    from holon_cli.model.typed import CheckError, check

    out: dict[str, McpRequest] = {}
    lines, _damaged = _ledger(store).records_skipping_damaged()
    for rec in lines:
        rid = rec.get("id")
        if not isinstance(rid, str):
            continue
        op = rec.get("op")
        if op == "opened":
            try:
                opened = check(rec, RequestOpened)
            except CheckError:
                continue
            out[rid] = {
                **opened,
                "state": "pending",
                "answer": None,
                "answered_at": None,
                "outcome": None,
                "result_message_id": None,
                "next_id": None,
                "resolved_at": None,
                "error": None,
            }
        elif rid in out and op == "answered":
            req = out[rid]
            req["state"] = "answered"
            req["answer"] = rec.get("answer")
            req["answered_at"] = rec.get("at")
        elif rid in out and op == "resolved":
            req = out[rid]
            req["state"] = "resolved"
            req["outcome"] = rec.get("outcome")
            req["result_message_id"] = rec.get("message_id")
            req["next_id"] = rec.get("next_id")
            req["resolved_at"] = rec.get("at")
            req["error"] = rec.get("error")
    return out


def open_count(store: AgentStore) -> int:
    """How many of the agent's requests wait for an operator (``holon status``)."""
    return sum(1 for r in _fold(store).values() if r["state"] != "resolved")


def _question(
    input_requests: Mapping[str, Mapping[str, object]],
) -> tuple[str, FormSchema | None, str | None]:
    """The first elicitation's message, form schema and URL (a schema that is
    not a flat form is none)."""
    for req in input_requests.values():
        if req.get("method") == "elicitation/create":
            p = req.get("params") or {}
            if not isinstance(p, dict):
                return "", None, None
            url = p.get("url")
            return (
                str(p.get("message") or ""),
                _form(p.get("requestedSchema")),
                (url if isinstance(url, str) else None),
            )
    return "", None, None


def _form(schema: object) -> FormSchema | None:
    from holon_cli.model.typed import CheckError, check
    from holon_cli.runtime.mcp.shapes import FormSchema

    if not schema:
        return None
    try:
        return check(schema, FormSchema)
    except CheckError:
        return None


def _fields(schema: FormSchema | None) -> list[str]:
    return sorted((schema or {}).get("properties") or {})


def open_request(
    store: AgentStore,
    spec: ServerSpec,
    tool: str,
    arguments: Mapping[str, object],
    outcome: CallOutcome,
    *,
    turn_id: str | None = None,
    call_id: str | None = None,
    message_id: str | None = None,
    previous_id: str | None = None,
) -> RequestOpened:
    """Record a server's request for input and tell the operator (an
    ``action_required`` brief). Returns the ``opened`` record."""
    from holon_cli.runtime.briefs import write_brief

    rid = clock.new_id("mcpreq")
    reqs = dict(outcome.input_requests or {})
    rec: RequestOpened = {
        "v": VERSION,
        "op": "opened",
        "id": rid,
        "at": clock.now_iso(),
        "agent_id": store.agent_id,
        "server": spec.name,
        "server_key": spec.key,
        "tool": tool,
        "arguments": arguments,
        "legacy": outcome.legacy,
        "input_requests": reqs,
        "request_state": outcome.request_state,
        "turn_id": turn_id,
        "call_id": call_id,
        "message_id": message_id,
        "previous_id": previous_id,
    }
    _ledger(store).append(rec)
    question, schema, url = _question(reqs)
    fields = ", ".join(_fields(schema))
    lines = [
        f"MCP server {spec.name!r} asks for input before its tool {tool!r} can answer"
        + (f": {question}" if question else "."),
    ]
    if url:
        lines.append(f"It asks you to open {url}.")
    if fields:
        lines.append(f"Fields: {fields}.")
    example = "'{}'" if not fields else "'{\"" + fields.split(", ")[0] + "\": ...}'"
    lines.append(
        f"Answer: `holon mcp answer {rid} {example}` or decline: "
        f"`holon mcp answer {rid} --decline`. The agent gets the result as a message."
    )
    write_brief(
        store,
        kind="result",
        visibility="action_required",
        title="mcp_input_required",
        text="\n".join(lines),
        related_message_id=message_id,
        turn_id=turn_id,
    )
    return rec


def _row(r: McpRequest) -> RequestRow:
    question, schema, url = _question(r.get("input_requests") or {})
    kinds = sorted({str(q.get("method")) for q in (r.get("input_requests") or {}).values()})
    return {
        "id": r["id"],
        "agent_id": r["agent_id"],
        "server": r["server"],
        "tool": r["tool"],
        "state": r["state"],
        "message": question,
        "requested_schema": schema,
        "url": url,
        "requests": kinds,
        "opened_at": r["at"],
        "answered_at": r.get("answered_at"),
        "resolved_at": r.get("resolved_at"),
        "outcome": r.get("outcome"),
        "result_message_id": r.get("result_message_id"),
        "next_id": r.get("next_id"),
        "previous_id": r.get("previous_id"),
    }


def list_requests(stores: list[AgentStore], *, include_resolved: bool = False) -> list[RequestRow]:
    """The requests of the given agents (open ones unless ``include_resolved``),
    oldest first."""
    rows = []
    for store in stores:
        for r in _fold(store).values():
            if include_resolved or r["state"] != "resolved":
                rows.append(_row(r))
    rows.sort(key=lambda r: str(r.get("opened_at") or ""))
    return rows


def find(stores: list[AgentStore], request_id: str) -> tuple[AgentStore, McpRequest]:
    for store in stores:
        got = _fold(store).get(request_id)
        if got is not None:
            return store, got
    raise NotFoundError(
        f"no MCP request {request_id!r}",
        hint="`holon mcp requests` lists the open ones",
        details={"request_id": request_id},
    )


def _check_content(content: object, schema: FormSchema | None) -> None:
    """The form's content against the server's flat schema (types, required
    fields, enums): a bad answer is refused before anything is sent."""
    if not isinstance(content, dict):
        raise UsageError(
            "CONTENT_JSON must be a JSON object (the form's fields)",
            hint='e.g. holon mcp answer ID \'{"color": "teal"}\'',
        )
    if not schema:
        return
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in content:
            raise UsageError(
                f"CONTENT_JSON lacks the required field {name!r}",
                hint=f"fields: {', '.join(sorted(props)) or '(none)'}",
            )
    types: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "boolean": bool,
        "integer": int,
        "number": (int, float),
    }
    for name, value in content.items():
        p = props.get(name)
        if p is None:
            raise UsageError(
                f"CONTENT_JSON has a field the form does not ask for: {name!r}",
                hint=f"fields: {', '.join(sorted(props)) or '(none)'}",
            )
        want = types.get(str(p.get("type")))
        bad_bool = isinstance(value, bool) and p.get("type") in ("integer", "number")
        if want is not None and (not isinstance(value, want) or bad_bool):
            raise UsageError(f"CONTENT_JSON field {name!r} must be a {p.get('type')}")
        enum = p.get("enum")
        if isinstance(enum, list) and value not in enum:
            raise UsageError(
                f"CONTENT_JSON field {name!r} must be one of {', '.join(map(str, enum))}"
            )


def _answers(req: McpRequest, answer: OperatorAnswer) -> dict[str, SentAnswer]:
    """Per key of the server's requests, what is sent back."""
    out: dict[str, SentAnswer] = {}
    elicits = [
        k for k, q in req["input_requests"].items() if q.get("method") == "elicitation/create"
    ]
    for key, q in req["input_requests"].items():
        method = q.get("method")
        if method == "elicitation/create":
            content = answer.get("content")
            if len(elicits) > 1 and isinstance(content, dict) and key in content:
                content = content[key]
            out[key] = {"action": answer["action"], "content": content}
        elif method == "roots/list":
            out[key] = {"roots": []}
        else:
            raise RejectedError(
                f"the server also asked for {method}, which holon declines",
                hint="the call cannot be completed; decline the request",
                kind="mcp_request_closed",
            )
    return out


def answer(
    stores: list[AgentStore],
    request_id: str,
    *,
    content: Any = None,
    decline: bool = False,
    cfg: HolonConfig | None = None,
) -> dict[str, object]:
    """Answer a request and re-send its call; returns the request's row with
    ``outcome`` (``result``, ``error`` or ``input_required`` with ``next_id``)."""
    from holon_cli.store.config import load_config
    from holon_cli.store.locks import locked

    store, _ = find(stores, request_id)
    cfg = load_config() if cfg is None else cfg
    lock = store.layout.locks_dir / "mcp_requests.answer.lock"
    with locked(lock, timeout=5.0, what=f"answers of agent {store.agent_id!r}"):
        req = _fold(store)[request_id]
        if req["state"] == "resolved":
            raise RejectedError(
                f"MCP request {request_id} was already answered ({req.get('outcome')})",
                hint=(
                    f"its result is message {req['result_message_id']}"
                    if req.get("result_message_id")
                    else (
                        f"the server asked again: request {req['next_id']}"
                        if req.get("next_id")
                        else "`holon mcp requests` lists the open ones"
                    )
                ),
                kind="mcp_request_closed",
                details={"request_id": request_id, "outcome": req.get("outcome")},
            )
        if req["state"] == "pending":
            if decline:
                ans: OperatorAnswer = {"action": "decline"}
            else:
                _, schema, url = _question(req["input_requests"])
                if url is None:
                    _check_content(content, schema)
                ans = {"action": "accept", "content": content if url is None else None}
            _answers(
                req, ans
            )  # a request holon cannot answer is refused before anything is written
            _ledger(store).append(
                {
                    "v": VERSION,
                    "op": "answered",
                    "id": request_id,
                    "at": clock.now_iso(),
                    "answer": ans,
                }
            )
            req = {**req, "state": "answered", "answer": ans}
        return _resend(store, cfg, req)


def decline(
    stores: list[AgentStore], request_id: str, *, cfg: HolonConfig | None = None
) -> dict[str, object]:
    """Refuse a request (``holon mcp answer ID --decline``): the call is sent
    again with the refusal and the server's answer reaches the agent."""
    return answer(stores, request_id, decline=True, cfg=cfg)


def _resend(store: AgentStore, cfg: HolonConfig, req: McpRequest) -> dict[str, object]:
    from holon_cli.runtime.mcp import calls
    from holon_cli.runtime.mcp.config import find as find_server

    spec = find_server(cfg, store.agent_id, req["server"])
    ans = req.get("answer")
    assert ans is not None, "an answered request carries its answer"
    answers = _answers(req, ans)
    arguments = dict(req.get("arguments") or {})
    if req.get("legacy"):
        legacy = [answers[k] for k in req["input_requests"] if "action" in answers[k]]
        out = calls.call_tool(store, cfg, spec, req["tool"], arguments, legacy_answers=legacy)
    else:
        out = calls.call_tool(
            store,
            cfg,
            spec,
            req["tool"],
            arguments,
            answers=answers,
            request_state=req.get("request_state"),
        )
    if out.kind == "error" and out.error_kind in ("mcp_unavailable", "mcp_timeout"):
        raise HolonError(
            f"MCP server {spec.name!r} did not take the answer: {out.error}",
            hint=(
                f"the answer is recorded; `holon mcp answer {req['id']}` sends it again once "
                f"the server is back (`holon mcp check {spec.name}`)"
            ),
            kind=out.error_kind,
            details={"request_id": req["id"]},
        )
    resolved: dict[str, object] = {
        "v": VERSION,
        "op": "resolved",
        "id": req["id"],
        "at": clock.now_iso(),
    }
    if out.kind == "input_required":
        nxt = open_request(
            store,
            spec,
            req["tool"],
            dict(req.get("arguments") or {}),
            out,
            turn_id=req.get("turn_id"),
            call_id=req.get("call_id"),
            message_id=req.get("message_id"),
            previous_id=req["id"],
        )
        resolved.update(outcome="input_required", next_id=nxt["id"])
    else:
        env = _admit_result(store, cfg, spec, req, out)
        resolved.update(
            outcome="result" if out.kind == "result" else "error",
            message_id=env["id"],
            error=out.error,
        )
    _ledger(store).append(resolved)
    return dict(_row(_fold(store)[req["id"]]))


def _admit_result(
    store: AgentStore, cfg: HolonConfig, spec: ServerSpec, req: McpRequest, out: CallOutcome
) -> Envelope:
    """The ``mcp_result`` message: the runtime's line, then the result fenced."""
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.mcp.result import CHARS_PER_TOKEN, render

    ans = req.get("answer")
    action = ans.get("action") if ans else None
    head = (
        f"MCP result of request {req['id']}: tool {req['tool']!r} of server {spec.name!r}, "
        f"sent again after the operator's answer ({action}).\n"
    )
    if out.kind == "result" and out.result is not None:
        rt = cfg.get("runtime") or {}
        budget = int(rt.get("default_tool_output_tokens") or 8000) * CHARS_PER_TOKEN
        r = render(
            store,
            out.result,
            server=spec.name,
            tool=req["tool"],
            salt=req["id"],
            budget=budget,
            fenced=False,  # the message's renderer fences the output span
        )
        status = "The tool reported an error.\n" if r.is_error else ""
        body = r.text
        meta_extra: dict[str, object] = {"is_error": r.is_error, "artifacts": r.artifacts}
    else:
        status = "The call failed.\n"
        body = f"{out.error_kind}: {out.error}"
        meta_extra = {"is_error": True, "error_kind": out.error_kind}
    text = head + status + body
    env = admit(
        text,
        store=store,
        kind="mcp_result",
        origin="system:mcp",
        causation_id=req.get("message_id"),
        delivery_surface="runtime_system",
        admission_context="runtime_owned",
        idempotency_key=f"mcp_result:{req['id']}",
        metadata={
            "mcp_request_id": req["id"],
            "server": spec.name,
            "tool": req["tool"],
            "answer": action,
            "output_offset": len(head) + len(status),
            "output_length": len(body),
            **meta_extra,
        },
    )
    return env
