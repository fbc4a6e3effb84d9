"""``holon replay TURN_ID --export FILE``: a recorded turn's model steps as a
``scripted:`` model script (format: :mod:`holon_cli.providers.scripted`).

Each recorded answer becomes a step (its text, its tool calls with their
recorded ids and arguments, its usage and stop reason); a request that
failed becomes a ``fail`` step per attempt the chain made; a request a
budget refused, or one in flight when the operator aborted, is no step (no
answer came). ``holon run --max-turns 1 --model scripted:FILE "<the
message>"`` then plays the model's side against real tools: a bug report anyone can run
offline. The tool results are not in the script: the tools run again, in
the run's workspace, so a step that depended on what a command printed
can take another turn there.

The file starts with comments naming the turn and the agent, the command
that re-plays it, and the message text (the ``#>`` lines, which that
command extracts). A tool call whose arguments the model sent as
invalid JSON has no scripted form: it is written with empty arguments and
a ``note``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from holon_cli.runtime.replay import docs

if TYPE_CHECKING:
    from holon_cli.runtime.replay.shapes import TurnRecordDoc


class ExportStep(TypedDict, total=False):
    """One model step of a script (``providers/scripted_script.py`` reads it)."""

    text: str
    tool_calls: list[dict[str, object]]
    usage: dict[str, int]
    stop_reason: str
    note: str
    fail: dict[str, object]


class ExportScript(TypedDict):
    description: str
    steps: list[ExportStep]


def script(record: TurnRecordDoc) -> ExportScript:
    """The script (a mapping ``yaml.safe_dump`` writes) of a record's model steps."""
    blobs = record.get("blobs") or {}
    steps: list[ExportStep] = []
    for step in record.get("steps") or []:
        k = step.get("k")
        if k == "resp":
            steps.append(_answer(docs.unpack(step["doc"], blobs)))
        elif k == "fail" and step.get("failure"):
            f = step["failure"]
            fail: dict[str, object] = {"kind": f.get("kind") or "provider_error"}
            if f.get("message"):
                fail["message"] = str(f["message"])
            if isinstance(f.get("status"), int):
                fail["status"] = f["status"]
            steps.extend({"fail": dict(fail)} for _ in range(max(1, int(f.get("attempts") or 1))))
    return {
        "description": f"turn {record.get('turn_id')} of agent {record.get('agent_id')}, "
        "exported by holon replay --export",
        "steps": steps,
    }


def _answer(resp: Mapping[str, object]) -> ExportStep:
    out: ExportStep = {}
    raw = resp.get("blocks")
    blocks = [b for b in raw if isinstance(b, dict)] if isinstance(raw, list) else []
    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
    calls: list[dict[str, object]] = []
    notes: list[str] = []
    for b in blocks:
        if b.get("type") != "tool_call":
            continue
        c = b.get("call") or {}
        args = c.get("arguments") if isinstance(c.get("arguments"), dict) else {}
        if c.get("arguments_error"):
            notes.append(f"{c.get('id')}: the model's arguments were not valid JSON")
        calls.append({"name": c.get("name"), "id": c.get("id"), "arguments": args})
    if text:
        out["text"] = text
    if calls:
        out["tool_calls"] = calls
    usage = resp.get("usage")
    if isinstance(usage, dict):
        keys = ("input_tokens", "output_tokens")
        out["usage"] = {k: int(usage[k]) for k in keys if isinstance(usage.get(k), int)}
    stop = resp.get("stop_reason")
    if isinstance(stop, str) and stop not in ("end_turn", "tool_use"):
        out["stop_reason"] = stop
    if notes:
        out["note"] = "; ".join(notes)
    if not (text or calls):
        out["text"] = ""  # an empty answer: the scripted model needs text or calls
        out["note"] = (out.get("note", "") + " the recorded answer was empty").strip()
    return out


def message_text(record: TurnRecordDoc) -> str:
    from holon_cli.model.envelope import body_text

    entry = docs.unpack(record["start"]["entry"], record.get("blobs") or {})
    env = entry.get("envelope") or {}
    return str(body_text(env.get("body") or {}))


def write(record: TurnRecordDoc, path: Path) -> dict[str, object]:
    """Write the script to ``path`` (atomically); returns ``{path, steps, message}``."""
    import yaml

    from holon_cli.store.fsio import atomic_write_bytes

    data = script(record)
    for s in data["steps"]:  # the scripted model needs text, tool calls or a failure
        if s.get("text") == "" and not s.get("tool_calls"):
            s["text"] = "(empty answer)"
    msg = message_text(record)
    head = [
        f"# turn {record.get('turn_id')} of agent {record.get('agent_id')}, "
        f"recorded by holon {record.get('holon')}",
        "# re-play the model's side against real tools (the message is the #> lines):",
        f"#   holon run --max-turns 1 --model scripted:{path} \"$(sed -n 's/^#> //p' {path})\"",
        *("#> " + line for line in (msg.splitlines() or [""])),
    ]
    body = yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )
    atomic_write_bytes(path, ("\n".join(head) + "\n" + body).encode("utf-8"))
    return {"path": str(path), "steps": len(data["steps"]), "message": msg}
