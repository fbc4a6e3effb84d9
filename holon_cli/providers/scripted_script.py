"""Loading a ``scripted:<path>`` model's YAML script into :class:`Script`
(the format is described in :mod:`holon_cli.providers.scripted`, which
replays it): every key checked, a bad script a ``script_error`` naming the
file and the step."""

from __future__ import annotations

import fnmatch
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict

from holon_cli.model.provider import (
    STOP_CONTENT_FILTER,
    STOP_END_TURN,
    STOP_MAX_TOKENS,
    STOP_STOP_SEQUENCE,
    STOP_TOOL_USE,
    TokenUsage,
)
from holon_cli.model.value import Value
from holon_cli.providers.base import (
    FAIL_FAST_KINDS,
    RETRYABLE_KINDS,
    ProviderFailure,
)

SCRIPT_KEYS = {"steps", "loop", "description", "name", "agents"}
SECTION_KEYS = {"steps", "loop", "description"}
STEP_KEYS = {
    "text",
    "tool_calls",
    "usage",
    "stop_reason",
    "fail",
    "sleep_ms",
    "expect_tool_result_contains",
    "note",
}
CALL_KEYS = {"name", "arguments", "id"}
FAIL_KEYS = {"kind", "message", "status", "retry_after_s"}
USAGE_KEYS = {
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
}
MAX_SLEEP_MS = 3_600_000  # an hour: longer is a mistake, and time.sleep overflows
STOP_REASONS = {
    STOP_END_TURN,
    STOP_TOOL_USE,
    STOP_MAX_TOKENS,
    STOP_STOP_SEQUENCE,
    STOP_CONTENT_FILTER,
}
CURSOR_VERSION = 1

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject


class ScriptCall(TypedDict):
    """A step's tool call, checked: its arguments have a JSON form."""

    name: str
    arguments: JsonObject
    id: str | None


class ScriptFail(TypedDict):
    """A step's ``fail``, checked (:data:`FAIL_KEYS`)."""

    kind: str
    message: NotRequired[str | None]
    status: NotRequired[int]
    retry_after_s: NotRequired[float | None]


class ScriptStep(Value):
    """One step of a script; ``number`` is 1-based, as shown to people."""

    def __init__(self, number: int, text: str = "") -> None:
        self.number = number
        self.text = text
        self.tool_calls: list[ScriptCall] = []
        self.usage: TokenUsage | None = None
        self.stop_reason: str | None = None
        self.fail: ScriptFail | None = None
        self.sleep_ms: float = 0
        self.expect_tool_result_contains: str | None = None


class AgentSection(NamedTuple):
    """``agents.<glob>``: the steps of the agents whose id matches ``glob``."""

    glob: str
    steps: list[ScriptStep]
    loop: bool = False


class Script(NamedTuple):
    path: Path
    steps: list[ScriptStep]
    loop: bool
    agents: list[AgentSection]

    def section_for(self, agent_id: str | None) -> tuple[str, list[ScriptStep], bool]:
        """(section label, steps, loop) for the requesting agent: the first
        matching glob of ``agents:``, else the plain ``steps:``."""
        for sec in self.agents:
            if agent_id is not None and fnmatch.fnmatchcase(agent_id, sec.glob):
                return f"agents[{sec.glob!r}]", sec.steps, sec.loop
        if not self.steps:
            globs = ", ".join(repr(s.glob) for s in self.agents)
            raise _err(
                self.path,
                f"no steps for agent {agent_id!r}: it matches none of the agents: globs "
                f"({globs}) and the script has no plain 'steps:' fallback",
                hint="add a matching glob under 'agents:' or a top-level 'steps:' list",
            )
        return "steps", self.steps, self.loop


def _err(path: Path, message: str, *, hint: str | None = None) -> ProviderFailure:
    return ProviderFailure(
        "script_error",
        f"{path}: {message}",
        stage="request",
        provider="scripted",
        hint=hint
        or "fix the script; the format is described in `holon_cli/providers/scripted.py` "
        "and examples/",
    )


def _unknown_key(keys: Any, known: set[str]) -> str | None:
    """The first key (in a stable order) that is not in ``known``, shown as
    YAML wrote it. Keys may be of any type YAML can build (``1``, ``null``,
    a date), so they are compared and ordered as text, never among themselves."""
    unknown = [k for k in keys if not (isinstance(k, str) and k in known)]
    if not unknown:
        return None
    return min((repr(k) for k in unknown), key=lambda r: (len(r), r))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _json_object(value: dict[Any, Any]) -> JsonObject | None:
    """``value`` as the JSON object a model would send (string keys, no NaN,
    no dates), or ``None`` when it has no JSON form."""
    try:
        out = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(out, dict) or len(out) != len(value):
        return None  # e.g. keys 1 and "1" collapsed into one
    return out


def _step(path: Path, number: int, raw: Any, section: str = "") -> ScriptStep:
    """One step of a script, checked field by field; errors name the file, the
    section (``agents['child-*']``) and the step."""
    where = f"{section} step {number}" if section else f"step {number}"
    if isinstance(raw, str):
        return ScriptStep(number, text=raw)
    if not isinstance(raw, dict):
        raise _err(path, f"{where}: expected a mapping or a string, got {type(raw).__name__}")
    unknown = _unknown_key(raw, STEP_KEYS)
    if unknown:
        raise _err(path, f"{where}: unknown key {unknown} (known: {', '.join(sorted(STEP_KEYS))})")
    step = ScriptStep(number)
    text = raw.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise _err(path, f"{where}: 'text' must be a string")
    step.text = text
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _err(path, f"{where}: 'tool_calls' must be a list")
    step.tool_calls = [_step_call(path, where, i, c) for i, c in enumerate(calls, 1)]
    if raw.get("usage") is not None:
        step.usage = _step_usage(path, where, raw["usage"])
    stop = raw.get("stop_reason")
    if stop is not None and not (isinstance(stop, str) and stop in STOP_REASONS):
        raise _err(path, f"{where}: stop_reason must be one of {', '.join(sorted(STOP_REASONS))}")
    step.stop_reason = stop
    if raw.get("fail") is not None:
        step.fail = _step_fail(path, where, raw["fail"])
    sleep_ms = raw.get("sleep_ms", 0) or 0
    if not _is_number(sleep_ms) or not 0 <= sleep_ms <= MAX_SLEEP_MS:
        raise _err(path, f"{where}: sleep_ms must be a number from 0 to {MAX_SLEEP_MS}")
    step.sleep_ms = float(sleep_ms)
    expect = raw.get("expect_tool_result_contains")
    if expect is not None and not isinstance(expect, str):
        raise _err(path, f"{where}: expect_tool_result_contains must be a string")
    step.expect_tool_result_contains = expect
    if not (step.text or step.tool_calls or step.fail):
        raise _err(path, f"{where}: needs 'text', 'tool_calls' or 'fail'")
    return step


def _step_call(path: Path, where: str, i: int, c: Any) -> ScriptCall:
    """``tool_calls[i]``: a name, JSON-able arguments (a mapping or a JSON string), an id."""
    if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
        raise _err(path, f"{where}: tool_calls[{i}] needs a 'name'")
    bad = _unknown_key(c, CALL_KEYS)
    if bad:
        raise _err(
            path, f"{where}: tool_calls[{i}]: unknown key {bad} (known: name, arguments, id)"
        )
    args = c.get("arguments", {})
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            raise _err(
                path, f"{where}: tool_calls[{i}].arguments is a string but not JSON"
            ) from None
    if not isinstance(args, dict):
        raise _err(path, f"{where}: tool_calls[{i}].arguments must be a mapping")
    json_args = _json_object(args)
    if json_args is None:
        raise _err(
            path,
            f"{where}: tool_calls[{i}].arguments has no JSON form "
            "(keys must be distinct strings; no dates, NaN or infinity)",
            hint='quote keys and dates in the script, e.g. "1": "2026-01-01"',
        )
    if "id" in c and not isinstance(c["id"], str):
        raise _err(path, f"{where}: tool_calls[{i}].id must be a string")
    return {"name": c["name"], "arguments": json_args, "id": c.get("id")}


def _step_usage(path: Path, where: str, usage: Any) -> TokenUsage:
    if not isinstance(usage, dict) or not all(
        type(usage.get(k, 0)) is int and usage.get(k, 0) >= 0 for k in sorted(USAGE_KEYS)
    ):
        raise _err(
            path,
            f"{where}: 'usage' must map input_tokens/output_tokens to non-negative integers",
        )
    i_t, o_t = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    return TokenUsage(
        i_t,
        o_t,
        usage.get("total_tokens") or i_t + o_t,
        cache_read_input_tokens=usage.get("cache_read_input_tokens", 0),
        cache_creation_input_tokens=usage.get("cache_creation_input_tokens", 0),
    )


def _step_fail(path: Path, where: str, fail: Any) -> ScriptFail:
    """``fail``: a failure kind (or a mapping with ``kind``, ``status``, ``message``, ...)."""
    if isinstance(fail, str):
        fail = {"kind": fail}
    if not isinstance(fail, dict):
        raise _err(path, f"{where}: 'fail' must be a mapping with at least 'kind'")
    bad = _unknown_key(fail, FAIL_KEYS)
    if bad:
        raise _err(
            path, f"{where}: fail: unknown key {bad} (known: {', '.join(sorted(FAIL_KEYS))})"
        )
    kind = fail.get("kind")
    known = RETRYABLE_KINDS | FAIL_FAST_KINDS
    if not (isinstance(kind, str) and kind in known):
        raise _err(
            path,
            f"{where}: fail.kind {kind!r} is not a failure kind "
            f"(one of: {', '.join(sorted(known))})",
        )
    if "status" in fail and type(fail["status"]) is not int:
        raise _err(path, f"{where}: fail.status must be an integer")
    if "message" in fail and not isinstance(fail["message"], (str, type(None))):
        raise _err(path, f"{where}: fail.message must be a string")
    ra = fail.get("retry_after_s")
    if ra is not None and (not _is_number(ra) or ra < 0):
        raise _err(path, f"{where}: fail.retry_after_s must be a non-negative number")
    out: ScriptFail = {"kind": kind}
    if "message" in fail:
        out["message"] = fail["message"]
    if "status" in fail:
        out["status"] = fail["status"]
    if "retry_after_s" in fail:
        out["retry_after_s"] = ra
    return out


def load_script(path: Path) -> Script:
    """Read and validate a script; every problem is a ``script_error`` naming file and step."""
    import yaml

    try:
        raw_text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _err(
            path,
            "script file not found",
            hint="check the path after `scripted:` "
            "(relative paths are resolved against the current directory)",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _err(path, f"cannot read script ({exc})") from None
    try:
        data = yaml.safe_load(raw_text)
    except RecursionError:
        raise _err(path, "invalid YAML (nested too deeply)") from None
    except yaml.YAMLError as exc:
        raise _err(path, f"invalid YAML ({' '.join(str(exc).split())})") from None
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict):
        raise _err(path, "expected a mapping with a 'steps' list")
    unknown = _unknown_key(data, SCRIPT_KEYS)
    if unknown:
        raise _err(
            path, f"unknown top-level key {unknown} (known: {', '.join(sorted(SCRIPT_KEYS))})"
        )
    loop = data.get("loop", False)
    if not isinstance(loop, bool):
        raise _err(path, "'loop' must be true or false")
    agents = _agent_sections(path, data.get("agents"), loop)
    steps = data.get("steps")
    if steps is None and agents:
        return Script(path, [], loop, agents)
    if not isinstance(steps, list) or not steps:
        raise _err(path, "'steps' must be a non-empty list")
    return Script(path, [_step(path, i, s) for i, s in enumerate(steps, 1)], loop, agents)


def _agent_sections(path: Path, raw: Any, default_loop: bool) -> list[AgentSection]:
    """``agents: {<glob>: {steps: [...], loop?}}``, in file order."""
    if raw is None:
        return []
    if not isinstance(raw, dict) or not raw:
        raise _err(path, "'agents' must be a non-empty mapping of agent-id globs to sections")
    out: list[AgentSection] = []
    for glob, sec in raw.items():
        if not isinstance(glob, str) or not glob:
            raise _err(path, f"agents: key {glob!r} must be a non-empty agent-id glob (text)")
        where = f"agents[{glob!r}]"
        if isinstance(sec, list):
            sec = {"steps": sec}
        if not isinstance(sec, dict):
            raise _err(path, f"{where}: expected a mapping with a 'steps' list")
        unknown = _unknown_key(sec, SECTION_KEYS)
        if unknown:
            known = ", ".join(sorted(SECTION_KEYS))
            raise _err(path, f"{where}: unknown key {unknown} (known: {known})")
        steps = sec.get("steps")
        if not isinstance(steps, list) or not steps:
            raise _err(path, f"{where}: 'steps' must be a non-empty list")
        loop = sec.get("loop", default_loop)
        if not isinstance(loop, bool):
            raise _err(path, f"{where}: 'loop' must be true or false")
        parsed = [_step(path, i, s, where) for i, s in enumerate(steps, 1)]
        out.append(AgentSection(glob, parsed, loop))
    return out
