"""Event and error kinds live in one place each (``model/events.py``;
``kinds.py`` for the error tree's) and stay in sync with the code that raises
and emits them."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import holon_cli
from holon_cli import errors
from holon_cli.kinds import ErrorKind, ProviderFailureKind
from holon_cli.model.events import EventKind, ToolErrorKind
from holon_cli.providers.base import FAIL_FAST_KINDS, RETRYABLE_KINDS


def _args(tp: object) -> set[str]:
    out: set[str] = set()
    for a in typing.get_args(tp):
        out |= _args(a) if typing.get_args(a) else {a}  # type: ignore[arg-type]
    return out


def test_provider_failure_kinds_match_the_chain_policy() -> None:
    assert _args(ProviderFailureKind) == RETRYABLE_KINDS | FAIL_FAST_KINDS


def test_every_error_class_kind_is_listed() -> None:
    classes = [
        c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.HolonError)
    ]
    assert len(classes) >= 9
    assert {c.kind for c in classes} <= _args(ErrorKind)
    assert _args(ProviderFailureKind) <= _args(ErrorKind)


def test_event_kinds_are_unique_snake_case() -> None:
    kinds = typing.get_args(EventKind)
    assert len(kinds) == len(set(kinds))
    assert all(k == k.lower() and " " not in k for k in kinds)


def test_every_tool_error_kind_raised_is_listed() -> None:
    """mypy checks the same; this catches a kind mypy cannot see (a ``str`` variable)."""
    listed = _args(ToolErrorKind)
    seen: set[str] = set()
    for path in Path(holon_cli.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "ToolError(" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "ToolError"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                seen.add(node.args[0].value)
    assert len(seen) >= 15
    assert seen <= listed, sorted(seen - listed)
    assert _args(ErrorKind) <= listed
