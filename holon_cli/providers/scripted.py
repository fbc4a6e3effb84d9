"""The ``scripted:<path>`` model: replays a YAML script of model steps, offline.

Script format::

    loop: false            # optional; true restarts from the first step when exhausted
    steps:
      - text: "Looking at the repo first."
        tool_calls:
          - name: ExecCommand
            arguments: {cmd: "ls"}
            id: call_ls      # optional; default is unique per replayed step
        usage: {input_tokens: 120, output_tokens: 12}   # optional; output is
                                                        # clipped to the request's
                                                        # max_output_tokens
      - expect_tool_result_contains: "README"   # optional check on the latest tool results
        text: "Done."
        stop_reason: end_turn                  # optional; default tool_use/end_turn
      - fail: {kind: rate_limited, message: "simulated", status: 429, retry_after_s: 1}
      - sleep_ms: 200                          # simulated latency, combinable with anything
        text: "slow answer"
      - "a bare string is a text-only step"
      - tool_calls:                            # refer to an earlier tool result by call id
          - name: PickWorkItem
            arguments: {work_item_id: "{{c_a.work_item_id}}"}

Per-agent sections: one script can drive several agents (a parent and the
children it spawns)::

    agents:
      "child-*":               # an fnmatch glob over the requesting agent's id
        steps: ["child's answer"]
        loop: false            # optional; defaults to the top-level loop
    steps: [...]               # the fallback for agents no glob matches

The first matching glob (in file order) picks the steps; plain ``steps:`` is
the fallback (optional when ``agents:`` is given). Each agent keeps its own
cursor (the cursor file lives in the agent's own state folder).

``{{<call_id>.<path>}}`` in step text or (string) tool arguments is replaced
by the value at ``<path>`` in the JSON result of the tool call with that id,
from this or an earlier turn (results are remembered in the cursor file).
Work item ids, output paths and other runtime-chosen values can be threaded
through a script this way; an unresolvable reference is a ``script_error``.

Steps replay in order *across processes*: the position is kept in a cursor
file in ``request.state_dir`` (``scripted-<sha of the absolute path>.json``,
replaced atomically), so consecutive ``holon turn`` runs continue the script.
Every call consumes one step, failing steps included, so a ``fail`` step
followed by a normal step exercises retry-then-success. An exhausted script
raises ``script_exhausted``; a missing or malformed script raises
``script_error`` naming the file and the step.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from holon_cli.digest import sha256_hex
from holon_cli.model.provider import (
    STOP_END_TURN,
    STOP_TOOL_USE,
    ModelResponse,
    PromptCapability,
    TokenUsage,
    ToolCall,
)
from holon_cli.providers.base import (
    ProviderFailure,
    ProviderRequest,
)
from holon_cli.providers.scripted_script import (
    CALL_KEYS as CALL_KEYS,
)
from holon_cli.providers.scripted_script import (
    CURSOR_VERSION,
    ScriptStep,
    load_script,
)
from holon_cli.providers.scripted_script import FAIL_KEYS as FAIL_KEYS

if TYPE_CHECKING:
    from holon_cli.model.provider import ResponseBlock
    from holon_cli.model.typed_base import Json, JsonObject
    from holon_cli.providers.scripted_script import ScriptFail
from holon_cli.providers.scripted_script import SCRIPT_KEYS as SCRIPT_KEYS
from holon_cli.providers.scripted_script import STEP_KEYS as STEP_KEYS

_REF = re.compile(r"\{\{\s*([A-Za-z0-9_.:-]+?)\s*\}\}")
MAX_REMEMBERED_RESULTS = 200


def _remember_results(request: ProviderRequest, known: Mapping[str, Json]) -> JsonObject:
    """Tool results (parsed JSON) by call id, newest last, bounded."""
    out = dict(known)
    for item in request.conversation:
        if item.role == "tool" and item.call_id:
            try:
                out[item.call_id] = json.loads(item.text)
            except (ValueError, TypeError):
                out[item.call_id] = item.text
            out[item.call_id] = out.pop(item.call_id)  # move to the end
    while len(out) > MAX_REMEMBERED_RESULTS:
        out.pop(next(iter(out)))
    return out


def _lookup(results: Mapping[str, Json], ref: str) -> Json:
    call_id, _, path = ref.partition(".")
    if call_id not in results:
        raise KeyError(f"no tool result with call id {call_id!r}")
    value = results[call_id]
    for part in path.split(".") if path else []:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(f"{ref!r}: no {part!r} in the result of {call_id!r}")
    return value


def _as_text(value: Json) -> str:
    """A referenced value inside text: strings as they are, anything else as JSON
    (``{{ls}}`` shows the tool's JSON result, not a Python repr)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _substitute(value: Json, results: Mapping[str, Json]) -> Json:
    if isinstance(value, str):
        whole = _REF.fullmatch(value.strip())
        if whole:  # a lone reference keeps the referenced value's type
            return _lookup(results, whole.group(1))
        return _REF.sub(lambda m: _as_text(_lookup(results, m.group(1))), value)
    if isinstance(value, list):
        return [_substitute(v, results) for v in value]
    if isinstance(value, dict):
        return _substitute_object(value, results)
    return value


def _substitute_object(value: JsonObject, results: Mapping[str, Json]) -> JsonObject:
    return {k: _substitute(v, results) for k, v in value.items()}


def _latest_tool_results(request: ProviderRequest) -> list[str]:
    out: list[str] = []
    for item in reversed(request.conversation):
        if item.role == "tool":
            out.append(item.text)
        elif item.role == "assistant":
            break
    return list(reversed(out))


class ScriptedTransport:
    """Replays a script; one step per ``complete`` call."""

    provider = "scripted"
    prompt_capabilities: frozenset[PromptCapability] = frozenset({"full_request_only"})

    def __init__(
        self,
        path: str,
        *,
        cwd: Path | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = (cwd or Path.cwd()) / p
        self.path = Path(os.path.abspath(p))
        self.model_ref = f"scripted:{path}"
        self._sleep = sleep
        self._memory: dict[str | None, JsonObject] = {}  # cursors by agent, no state_dir

    def __repr__(self) -> str:
        return f"ScriptedTransport({str(self.path)!r})"

    def preflight(self) -> None:
        """Load the script now, so a bad one fails before anything is admitted
        (``script_error``, or the loader's own failure, naming this model ref)."""
        try:
            load_script(self.path)
        except ProviderFailure as exc:
            exc.model_ref = self.model_ref
            raise
        except Exception as exc:  # a failure the loader does not name is still a bad script
            raise ProviderFailure(
                "script_error",
                f"{self.path}: not a valid script ({type(exc).__name__}: {exc})",
                provider="scripted",
                model_ref=self.model_ref,
            ) from None

    def cursor_path(self, state_dir: Path) -> Path:
        digest = sha256_hex(str(self.path).encode("utf-8"))[:16]
        return Path(state_dir) / f"scripted-{digest}.json"

    def _read_cursor(self, state_dir: Path | None, agent_id: str | None = None) -> JsonObject:
        if state_dir is None:
            return dict(self._memory.get(agent_id) or {})
        cp = self.cursor_path(state_dir)
        try:
            data = json.loads(cp.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ProviderFailure(
                "script_error",
                f"{cp}: unreadable script cursor ({exc})",
                provider="scripted",
                model_ref=self.model_ref,
                hint=f"delete {cp} to replay {self.path} from the first step",
            ) from None
        return data if isinstance(data, dict) else {}

    def _write_cursor(
        self, state_dir: Path | None, cursor: JsonObject, agent_id: str | None = None
    ) -> None:
        if state_dir is None:
            self._memory[agent_id] = dict(cursor)
            return
        from holon_cli.store.fsio import atomic_write_text

        atomic_write_text(self.cursor_path(state_dir), json.dumps(cursor, indent=2) + "\n")

    def estimate_input_tokens(self, request: ProviderRequest) -> int | None:
        """The input tokens the next step will report (its ``usage``), for the
        budget check before the request; None when it reports none (the
        runtime then counts sizes / 4, as it will for the spend)."""
        try:
            script = load_script(self.path)
            section, steps, loop = script.section_for(request.agent_id)
            cursor = self._read_cursor(request.state_dir, request.agent_id)
        except ProviderFailure:
            return None  # complete() reports it
        pos, _consumed = _cursor_position(cursor)
        if cursor.get("section", "steps") != section:
            pos = 0
        if pos >= len(steps):
            if not loop or not steps:
                return None
            pos = 0
        usage = steps[pos].usage
        return usage.input_tokens if usage is not None else None

    def complete(self, request: ProviderRequest) -> ModelResponse:
        """Replay the next step: advance the cursor first, then answer or fail as scripted."""
        try:
            script = load_script(self.path)
        except ProviderFailure as f:
            f.model_ref = self.model_ref
            raise
        try:
            section, steps, loop = script.section_for(request.agent_id)
        except ProviderFailure as f:
            f.model_ref = self.model_ref
            raise
        cursor = self._read_cursor(request.state_dir, request.agent_id)
        pos, consumed = _cursor_position(cursor)
        if cursor.get("section", "steps") != section:
            pos = 0  # the agent's section changed (script edited): start it from the top
        if pos >= len(steps):
            if not loop:
                raise self._exhausted(len(steps), request.state_dir, section)
            pos = 0
        step = steps[pos]
        known = cursor.get("results")
        remembered = _remember_results(request, known if isinstance(known, dict) else {})
        self._write_cursor(
            request.state_dir,
            {
                "v": CURSOR_VERSION,
                "script": str(self.path),
                "section": section,
                "next": pos + 1,
                "consumed": consumed + 1,
                "results": remembered,
            },
            request.agent_id,
        )
        if step.sleep_ms:
            self._sleep(step.sleep_ms / 1000.0)
        if step.expect_tool_result_contains is not None:
            self._check_expectation(step, step.expect_tool_result_contains, request)
        if step.fail is not None:
            raise self._scripted_failure(step, step.fail)
        return self._response(step, remembered, consumed + 1, request.max_output_tokens)

    def _failure(self, kind: str, message: str, hint: str) -> ProviderFailure:
        return ProviderFailure(
            kind,
            message,
            stage="request",
            provider="scripted",
            model_ref=self.model_ref,
            hint=hint,
        )

    def _exhausted(self, n: int, state_dir: Path | None, section: str = "steps") -> ProviderFailure:
        where = self.cursor_path(state_dir) if state_dir is not None else None
        part = "" if section == "steps" else f" ({section})"
        return self._failure(
            "script_exhausted",
            f"{self.path}: script exhausted{part}: all {n} step{'s' if n != 1 else ''} "
            "were replayed",
            "add steps, set `loop: true`, or "
            + (f"delete {where} to replay from the first step" if where else "start a new run"),
        )

    def _check_expectation(self, step: ScriptStep, expected: str, request: ProviderRequest) -> None:
        results = _latest_tool_results(request)
        if any(expected in r for r in results):
            return
        got = "; ".join(r[:160] for r in results) or "no tool results since the last model step"
        raise self._failure(
            "script_error",
            f"{self.path}: step {step.number} expected a tool result containing "
            f"{expected!r}; got: {got}",
            "the workflow under test did not produce the expected tool output",
        )

    def _scripted_failure(self, step: ScriptStep, spec: ScriptFail) -> ProviderFailure:
        retry_after = spec.get("retry_after_s")
        return ProviderFailure(
            spec["kind"],
            str(spec.get("message") or f"scripted failure at step {step.number} of {self.path}"),
            status=spec.get("status"),
            retry_after_s=float(retry_after) if retry_after is not None else None,
            stage="request",
            provider="scripted",
            model_ref=self.model_ref,
        )

    def _response(
        self,
        step: ScriptStep,
        remembered: JsonObject,
        number: int,
        max_output: int | None = None,
    ) -> ModelResponse:
        """The step's text and tool calls, with ``{{id.field}}`` references
        filled in. Its usage reports at most ``max_output`` output tokens, as
        a provider does (a budget's cap holds with the scripted model too)."""
        try:
            text = _substitute(step.text, remembered) if step.text else step.text
            calls = [(c, _substitute_object(c["arguments"], remembered)) for c in step.tool_calls]
        except KeyError as exc:
            raise self._failure(
                "script_error",
                f"{self.path}: step {step.number}: unresolved reference {exc.args[0]}",
                "give the earlier tool call an `id:` and refer to it as {{id.field}}",
            ) from None
        blocks: list[ResponseBlock] = []
        if text:
            blocks.append({"type": "text", "text": _as_text(text)})
        for i, (c, arguments) in enumerate(calls, 1):
            call = ToolCall(
                id=c["id"] or f"call_s{number}_{i}", name=c["name"], arguments=arguments
            )
            blocks.append({"type": "tool_call", "call": call})
        return ModelResponse(
            blocks=blocks,
            stop_reason=step.stop_reason or (STOP_TOOL_USE if step.tool_calls else STOP_END_TURN),
            usage=_clipped(step.usage, max_output),
            raw_stop_reason=step.stop_reason,
            response_id=f"scripted-{number}",
            model=f"scripted:{self.path.name}",
        )


def _clipped(usage: TokenUsage | None, max_output: int | None) -> TokenUsage | None:
    if usage is None or max_output is None or usage.output_tokens <= max_output:
        return usage
    return TokenUsage(usage.input_tokens, max_output, usage.input_tokens + max_output)


def _cursor_position(cursor: Mapping[str, Json]) -> tuple[int, int]:
    """(next step index, steps consumed so far); a damaged value counts from 0."""
    pos = cursor.get("next", 0)
    consumed = cursor.get("consumed", 0)
    pos = pos if isinstance(pos, int) and pos >= 0 else 0
    consumed = consumed if isinstance(consumed, int) and consumed >= 0 else 0
    return pos, consumed
