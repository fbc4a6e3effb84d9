"""``docs/reference/events.md``: every event kind with the fields of its
``data`` (from ``holon_cli/model/events.py``: :data:`EventKind` and
:func:`event_payloads`) and how the consoles show it (from
``holon_cli/runtime/presentation.py``)."""

from __future__ import annotations

import typing
from typing import Any, get_args, get_origin

from .md import cell, code, note, page, prose, table

SOURCE = "holon_cli/model/events.py and holon_cli/runtime/presentation.py"

_SCALARS = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _ns() -> dict[str, Any]:
    """Names the payload modules import for the type checker only."""
    from holon_cli.model import timer

    return {"TimerPurpose": timer.TimerPurpose}


def hints(td: type) -> dict[str, Any]:
    return typing.get_type_hints(td, localns=_ns())


def type_text(tp: Any, shapes: dict[str, type]) -> str:
    """A field's type in words; a nested TypedDict is named (and collected
    into ``shapes`` for its own table)."""
    if tp is Any:
        return "any"
    if tp in _SCALARS:
        return _SCALARS[tp]
    if _is_typeddict(tp):
        shapes.setdefault(tp.__name__, tp)
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Literal:
        return " \\| ".join(code(a) for a in args)
    if origin in (typing.Union, __import__("types").UnionType):
        return " or ".join(type_text(a, shapes) for a in args)
    if origin is list:
        return f"list of {type_text(args[0], shapes)}" if args else "list"
    if origin is dict:
        return f"object of {type_text(args[1], shapes)}" if args else "object"
    if origin is tuple:
        return "list"
    return cell(getattr(tp, "__name__", str(tp)))


def _required(td: type) -> set[str]:
    """The keys always there, read from the annotations (``__required_keys__``
    misses ``NotRequired`` under ``from __future__ import annotations`` on
    Python 3.11)."""
    required = set(getattr(td, "__required_keys__", frozenset()))
    for name, tp in typing.get_type_hints(td, localns=_ns(), include_extras=True).items():
        origin = get_origin(tp)
        if origin is typing.Annotated:
            origin = get_origin(get_args(tp)[0])
        if origin is typing.NotRequired:
            required.discard(name)
        elif origin is typing.Required:
            required.add(name)
    return required


def fields_table(td: type, shapes: dict[str, type]) -> list[str]:
    rows = []
    required = _required(td)
    for name, tp in hints(td).items():
        rows.append([code(name), type_text(tp, shapes), "yes" if name in required else "no"])
    if not rows:
        return ["No fields.", ""]
    return table(["field", "type", "always there"], rows)


def render() -> str:
    from holon_cli.model import events
    from holon_cli.runtime import presentation

    kinds: list[str] = list(get_args(events.EventKind))
    payloads = events.event_payloads()
    lines = [
        note(SOURCE),
        "",
        "# Event kinds",
        "",
        "Every agent keeps an append-only event ledger (`.holon/ledger/events.jsonl`, "
        "one JSON object a line). `holon tail --jsonl` prints it, `GET "
        "/agents/{agent_id}/events` pages through it and `/events/stream` streams it "
        "as server-sent events named by kind (see [HTTP routes](http.md#server-sent-events)). "
        "`holon tail --presented`, `holon tui` and the web console show each event as a "
        "row: its *visibility* decides the display modes it appears in (`info`: "
        "action_required, work_done, turn_result; `verbose`: and progress; `debug`: "
        "and trace), and `state_sync` rows are never conversation rows.",
        "",
    ]
    record = getattr(events, "EventRecord", None)
    shapes: dict[str, type] = {}
    if record is not None:
        lines += [
            "## The event record",
            "",
            prose(" ".join((record.__doc__ or "").split())),
            "",
            *fields_table(record, shapes),
        ]
    lines += ["## Index", ""]
    rows = []
    for kind in kinds:
        row = presentation.present({"kind": kind, "data": {}})
        vis = "depends on the data" if kind in presentation.DEPENDS_ON_DATA else row["visibility"]
        rows.append([f"[{code(kind)}](#{kind})", vis, row["category"], cell(row["title"])])
    lines += table(["kind", "visibility", "category", "title"], rows)
    for kind in kinds:
        row = presentation.present({"kind": kind, "data": {}})
        lines += [f"## {code(kind)} {{#{kind}}}", ""]
        if kind in presentation.DEPENDS_ON_DATA:
            shown = f"depends on the data: {prose(presentation.DEPENDS_ON_DATA[kind])}"
        else:
            shown = f"{row['visibility']}, category {row['category']}"
        lines += [f"Shown as: **{cell(row['title'])}** ({shown}).", ""]
        shapes_of = payloads[kind]
        if not shapes_of:
            lines += ["Declared in the event model; no step of this version writes it.", ""]
        for i, td in enumerate(shapes_of):
            if len(shapes_of) > 1:
                lines += [f"Shape {i + 1} of {len(shapes_of)}: {code(td.__name__)}.", ""]
            doc = " ".join((td.__doc__ or "").split())
            if doc and not doc.startswith(td.__name__ + "("):
                lines += [prose(doc), ""]
            lines += fields_table(td, shapes)
    lines += ["## Nested shapes", ""]
    done: set[str] = set()
    while len(done) < len(shapes):
        for name in sorted(set(shapes) - done):
            done.add(name)
            td = shapes[name]
            lines += [f"### {code(name)} {{#{name.lower()}}}", ""]
            doc = " ".join((td.__doc__ or "").split())
            if doc:
                lines += [prose(doc), ""]
            lines += fields_table(td, shapes)
    return page(lines)
