"""The one door for JSON that a user or a remote caller hands in
(``holon enqueue --json-body``, the HTTP routes' bodies): standard JSON only.

Python's ``json`` accepts more than JSON and fails in ways no caller should
see: ``NaN``/``Infinity`` parse (and would be written into a ledger as
invalid JSON), ``"\\ud800"`` parses to a string that cannot be encoded as
UTF-8, deep nesting raises ``RecursionError`` and a 5,000-digit integer a
``ValueError``. :func:`parse_json` turns each into a :class:`UsageError`
(exit 2 on the CLI; the HTTP surface answers 400 ``invalid_json``) naming
what is wrong.
"""

from __future__ import annotations

import json
from typing import Any

from holon_cli.errors import UsageError

MAX_DEPTH = 100


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_json(data: str | bytes, what: str = "the body") -> Any:
    """Parse standard JSON; raise :class:`UsageError` naming what is wrong."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _invalid(what, f"not UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise _invalid(what, f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise _invalid(what, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # NaN/Infinity, an integer of more than 4,300 digits
        raise _invalid(what, str(exc).split(";", 1)[0]) from None
    check_value(value, what)
    return value


def check_value(value: Any, what: str = "the body") -> None:
    """Depth and text checks of a parsed value (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _invalid(what, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, what)
        elif isinstance(item, dict):
            for k, v in item.items():
                _check_text(k, what)
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(what, "a string holds a lone surrogate (\\ud800-\\udfff)") from None


def _invalid(what: str, why: str) -> UsageError:
    return UsageError(
        f"{what} is not valid JSON ({why})",
        hint='send standard JSON (no NaN or Infinity), e.g. {"event": "push"}',
    )
