"""``docs/reference/exit-codes.md``: the exit codes, the error classes and
every error ``kind`` a command, a route or a tool call can report, from
``holon_cli/errors.py``, ``holon_cli/kinds.py``, ``holon_cli/model/events.py``
(tool error kinds) and the ``HttpError`` calls of ``holon_cli/serve/http/``.
Each kind links to what to do about it in the troubleshooting guide."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import get_args

from .facts import EXIT_STATUS
from .md import cell, code, note, page, table

SOURCE = "holon_cli/errors.py, holon_cli/kinds.py and the HTTP error calls"
GUIDE = "../guides/troubleshooting.md"


def error_kinds() -> list[str]:
    from holon_cli.kinds import ErrorKind, ProviderFailureKind

    provider = set(_flat(ProviderFailureKind))
    return [k for k in _flat(ErrorKind) if k not in provider]


def provider_kinds() -> list[str]:
    from holon_cli.kinds import FailFastFailureKind, RetryableFailureKind

    return [*_flat(RetryableFailureKind), *_flat(FailFastFailureKind)]


def tool_kinds() -> list[str]:
    from holon_cli.kinds import ErrorKind
    from holon_cli.model.events import ToolErrorKind

    known = set(_flat(ErrorKind))
    return [k for k in _flat(ToolErrorKind) if k not in known]


def _flat(tp: object) -> list[str]:
    out: list[str] = []
    for a in get_args(tp):
        out += _flat(a) if get_args(a) else [a]  # type: ignore[list-item]
    return out


def http_kinds() -> list[tuple[int, str]]:
    """``(status, kind)`` of every ``HttpError(STATUS, "kind", ...)`` and
    ``error_response(STATUS, "kind", ...)`` in ``serve/http/`` that names a kind
    the guards and routes answer with."""
    import holon_cli.serve.http as pkg

    found: set[tuple[int, str]] = set()
    for path in sorted(Path(pkg.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            status, kind = node.args[0], node.args[1]
            if (
                name in ("HttpError", "error_response")
                and isinstance(status, ast.Constant)
                and isinstance(kind, ast.Constant)
                and isinstance(kind.value, str)
            ):
                found.add((int(status.value), kind.value))
    return sorted(found, key=lambda sk: (sk[1], sk[0]))


def classes() -> list[type]:
    from holon_cli import errors

    out = [errors.HolonError]
    for _, obj in inspect.getmembers(errors, inspect.isclass):
        if issubclass(obj, errors.HolonError) and obj is not errors.HolonError:
            out.append(obj)
    return out


def _link(kind: str) -> str:
    return f"[{code(kind)}]({GUIDE}#{kind})"


def render() -> str:
    from holon_cli import errors

    lines = [
        note(SOURCE),
        "",
        "# Exit codes and errors",
        "",
        "## Exit codes",
        "",
    ]
    lines += table(
        ["code", "meaning"],
        ([code(str(getattr(errors, const))), cell(text)] for const, text in EXIT_STATUS),
    )
    worst = ", ".join(code(str(c)) for c in errors.EXIT_SEVERITY)
    lines += [
        f"`tick --all` and `turn --all` report an agent that cannot run by name, run the "
        f"others, and exit with the worst per-agent outcome, least to most severe: {worst}.",
        "",
        "## The error envelope",
        "",
        "Every expected failure says what happened and what to do next, on stderr as "
        "`Error: ...` and `Hint: ...`, or with `--json` as the one object on stdout:",
        "",
        "```json",
        '{"schema_version": 1, "ok": false, "command": "turn",',
        ' "error": {"kind": "agent_paused", "message": "...", "hint": "..."}}',
        "```",
        "",
        "`kind` is stable; scripts branch on it, not on the message. Over HTTP the "
        'body is `{"error": {"kind", "message", "hint"}}`; to the model a failing tool '
        "call is a tool result (`kind`, `message`, `recovery_hint`, `retryable`), never "
        "an ended turn. Errors speak the words of where they are read: flags on the "
        "command line, body fields over HTTP, argument names to the model.",
        "",
        "## Error classes",
        "",
    ]
    rows = []
    for cls in classes():
        doc = " ".join((cls.__doc__ or "").split("\n\n")[0].split())
        rows.append([code(cls.__name__), _link(str(cls.kind)), code(str(cls.exit_code)), cell(doc)])
    lines += table(["class", "kind", "exit", "what it is"], rows)
    lines += [
        "## Every kind",
        "",
        "What each means and what to do: follow the link into the "
        f"[troubleshooting guide]({GUIDE}).",
        "",
        "Raised by commands and routes (the exit code is the class's, above):",
        "",
        ", ".join(_link(k) for k in error_kinds()),
        "",
        "A model provider's failure (`holon run --json` `failure_kind`, the "
        "`runtime_error` event; exit 5 when it ends a run or turn). The first five are "
        "retried on the same model, the others move to the next fallback at once:",
        "",
        ", ".join(_link(k) for k in provider_kinds()),
        "",
        "Tool errors the model sees (besides any kind above a tool passes through):",
        "",
        ", ".join(_link(k) for k in tool_kinds()),
        "",
        "HTTP refusals `holon serve` makes itself (its guards and body checks; a runtime "
        "step's refusal carries that step's kind):",
        "",
    ]
    lines += table(["status", "kind"], ([code(str(s)), _link(k)] for s, k in http_kinds()))
    return page(lines)
