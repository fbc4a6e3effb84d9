#!/usr/bin/env python3
"""Model-free projection benchmark (issues 23, 44): what the prompt keeps
when the context budget is small, and how much of each request a provider
can serve from its prompt cache.

Twelve frozen scenarios run through real turns (``run_turn`` against a
loopback model server, ``wire_providers.py``, answering from a script, and a
synthetic ``Probe`` tool whose 1 KB results carry evidence tokens), each
under budgets of 2k, 4k and 16k tokens, once per wire transport: OpenAI
Responses, Chat Completions, Anthropic Messages, and Responses with
``runtime.openai_incremental`` (``previous_response_id`` continuation, in
this one process). Working memory, work items and compaction are on (the
runtime's defaults; the small budgets compact). Every provider request (a
*projection*) is checked against hard invariants:

- ``budget``       the request's estimate (bytes / 4) stays within the budget;
- ``input_once``   the current input (its message id) is present exactly once;
- ``predecessor``  the direct predecessor is present (the previous round's
                   items within a turn; the previous turn's answer across turns);
- ``evidence``     each evidence token appears at most once, under its true
                   owner (tool output in a tool result, external text fenced);
- ``sections``     section kinds do not overlap (each block kind once, no
                   block carrying another's header);
- ``monotonic``    a smaller budget never keeps a token a larger one dropped;
- ``restart``      the projection after a restart is byte-identical (a fresh
                   process projects the same frame and history from the same
                   files; a turn killed mid-request replays the very request).

Prompt cache, measured on the bytes the transports sent (the server keeps
each body as it arrived; an incremental Responses request is measured as the
server expands it, the stored chain plus the new items; Anthropic's
``cache_control`` markers are taken out, as they are not prompt content).
For each pair of consecutive requests, *across* turns (the last request of a
turn and the first of the next) and *within* a turn:

- ``kept``     the share of the previous request's bytes (up to its closing
               brackets) the next request starts with: 1.0 when it extends
               the previous request (``extends``), the goal the issue sets
               (>= 0.95, byte-weighted over all pairs);
- ``cached``   the share of the next request's bytes that repeat the
               previous request's prefix (what a provider can serve from
               cache); bounded by 1 - new bytes / sent even when every
               request extends the previous one, so the small requests of
               the Probe-only runs (a 1 KB round, a 1,200-character answer on
               5-40 KB) stay below 0.95 whatever the layout. With ``--tools
               builtin`` (the built-in catalog offered besides Probe, as a
               real agent sends it; budgets grow by its size) the goal
               (>= 0.95) applies to it too.

A pair whose compression epoch changed (a compaction: the frame's cache
record says so) is counted apart: compaction changes the prefix once per
epoch. Figures are printed per transport (byte-weighted, and min / median /
max of the pairs) with the machine load. ``--mutate`` corrupts one
projection per invariant and shows each check catches it.

    python benchmarks/projection_eval.py [--json] [--mutate] [--case NAME]
        [--transport NAME] [--tools probe|builtin]

Exit status 1 when an invariant fails, a mutation goes unnoticed, or a
transport misses a goal (kept; with ``--tools builtin`` cached too) across or
within turns.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire_providers import WireServer, body_end, common_prefix, comparable  # noqa: E402

BUDGETS = (2000, 4000, 16000)
# ``--tools builtin``: the built-in tool catalog is offered besides Probe (what
# a real agent sends); each budget grows by the catalog's size, so what the
# conversation gets stays the same
TOOLS_ENV = "HOLON_BENCH_TOOLS"


def budgets() -> tuple[int, ...]:
    if os.environ.get(TOOLS_ENV) != "builtin":
        return BUDGETS
    from holon_cli.runtime.memory import compaction as cp
    from holon_cli.runtime.prompt import tool_guidance
    from holon_cli.tools.catalog import default_catalog

    cat = default_catalog()
    schemas = json.dumps([[t.name, t.description, t.input_schema] for t in cat.specs])
    extra = cp.estimate(schemas) + cp.estimate(tool_guidance(cat.specs, cat.guidance))
    extra = -(-extra // 500) * 500
    return tuple(b + extra for b in BUDGETS)


GOAL = 0.95  # the kept-prefix share across and within turns, per transport
# name -> (the provider's transport, runtime.openai_incremental)
TRANSPORTS: dict[str, tuple[str, bool]] = {
    "responses": ("openai_responses", False),
    "chat": ("openai_chat_completions", False),
    "anthropic": ("anthropic_messages", False),
    "responses-incremental": ("openai_responses", True),
}
REPLY = "Here is the considered answer, with its reasons. "  # ~50 chars, repeated
FENCE = re.compile(
    r"<<<evidence-(?P<t>[0-9a-f]{16})[^\n]*\n(?P<body>.*?)\nevidence-(?P=t)>>>", re.S
)
TOKEN = re.compile(r"\b(?:EV|EXT|OP)-\d+\b")

Step = tuple[Any, ...]

CASES: dict[str, list[Step]] = {
    "short_reference": [
        ("say", "Remember the codename Kestrel for later. OP-1", 300),
        ("say", "What time is it in Tokyo?", 300),
        ("say", "List three prime numbers.", 300),
        ("say", "What was the codename I gave you? OP-2", 200),
    ],
    "chain_10": [("say", f"Question {i}: explain topic {i}. OP-{i}", 1200) for i in range(10)],
    "chain_20": [("say", f"Question {i}: explain topic {i}. OP-{i}", 1200) for i in range(20)],
    "chain_40": [("say", f"Question {i}: explain topic {i}. OP-{i}", 800) for i in range(40)],
    "topic_return": [
        *[("say", f"Topic A, part {i}: the parser. OP-{i}", 900) for i in range(3)],
        *[("say", f"Topic B, part {i}: the scheduler. OP-{10 + i}", 900) for i in range(5)],
        ("say", "Back to topic A: where were we with the parser? OP-20", 600),
    ],
    "workitem_switch_return": [
        ("workitem", "build the parser"),
        ("probe", "work on the parser OP-1", 4),
        ("workitem", "fix the scheduler"),
        ("probe", "work on the scheduler OP-2", 4),
        ("pick", 0),
        ("probe", "back to the parser OP-3", 2),
    ],
    "wait_external_resume": [
        ("say", "Wait for the CI result before merging. OP-1", 300),
        ("external", "CI finished: all 412 tests passed. EXT-1"),
        ("say", "Resume: merge if CI was green. OP-2", 300),
    ],
    "task_result_after_switch": [
        ("workitem", "run the long migration"),
        ("probe", "start the migration OP-1", 2),
        ("workitem", "answer the support ticket"),
        ("probe", "handle the ticket OP-2", 2),
        ("task_result", "migration finished, exit 0. EV-900"),
        ("say", "Status of both? OP-3", 400),
    ],
    "wakes_interleaved": [
        ("say", "Watch the deploy. OP-1", 300),
        ("wake", "scheduled check of the deploy"),
        ("say", "Anything new? OP-2", 300),
        ("wake", "scheduled check of the deploy"),
        ("say", "And now? OP-3", 300),
        ("wake", "scheduled check of the deploy"),
    ],
    "long_tool_loop": [("probe", "run all 30 probes OP-1", 30)],
    "multi_turn_tools": [
        ("probe", "first batch OP-1", 8),
        ("probe", "second batch OP-2", 8),
        ("probe", "third batch OP-3", 8),
    ],
    "new_topic_then_old": [
        ("say", "The release branch is release/7.2. OP-1", 400),
        *[("probe", f"unrelated probe batch {i} OP-{10 + i}", 3) for i in range(3)],
        ("say", "Which release branch did I name? OP-2", 300),
    ],
    "restart_mid_compaction": [("probe_killed", "run 20 probes OP-1", 20, 14)],
}


# ------------------------------------------------------------- machinery


@dataclass
class Projection:
    turn: int
    round: int
    message_id: str
    request: Any
    text: str = ""
    answer: Any = None
    wire: bytes = b""  # the request's bytes as the provider matches them


@dataclass
class Run:
    case: str
    budget: int
    transport: str = "responses"
    projections: list[Projection] = field(default_factory=list)
    compactions: int = 0
    finals: list[str] = field(default_factory=list)  # each turn's final answer
    restart_pairs: list[tuple[str, str]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    wire_bytes: int = 0  # bytes the transport sent (an incremental request: its delta)


SENT: list[Any] = []
ANSWERS: dict[int, Any] = {}  # request number -> the model's answer to it
KILL_AT: list[int] = []  # request number at which the process "dies" (answer lost)
SERVER: list[WireServer] = []


class Killed(BaseException):
    """Stands for SIGKILL in the middle of a provider request."""


def _install_recorder() -> None:
    """Every wire transport's ``complete`` records the semantic request (the
    invariants) and its answer; the server keeps the bytes (the cache)."""
    from holon_cli.providers.anthropic import AnthropicTransport
    from holon_cli.providers.openai_chat import OpenAIChatTransport
    from holon_cli.providers.openai_responses import OpenAIResponsesTransport

    for cls in (OpenAIResponsesTransport, OpenAIChatTransport, AnthropicTransport):
        real = cls.complete
        if getattr(real, "recording", False):
            continue

        def complete(self: Any, request: Any, real: Any = real) -> Any:
            SENT.append(request)
            answer = real(self, request)
            if KILL_AT and len(SENT) == KILL_AT[0]:
                # the provider answered; the process died before it recorded
                # the answer: the replay sends the same request again
                KILL_AT.clear()
                SERVER[0].steps.appendleft(SERVER[0].last_step)
                raise Killed
            ANSWERS[len(SENT)] = answer
            return answer

        complete.recording = True  # type: ignore[attr-defined]
        cls.complete = complete  # type: ignore[method-assign]


class ProbeBox:
    """One synthetic tool: ``Probe`` returns 1 KB carrying an evidence token."""

    def __init__(self) -> None:
        from holon_cli.model.provider import ToolSpec

        self.counter = 0
        self.specs = [
            ToolSpec(
                "Probe",
                "Look something up (synthetic, for the projection benchmark).",
                {
                    "type": "object",
                    "properties": {"topic": {"type": "string"}},
                    "required": ["topic"],
                },
            )
        ]
        self.guidance = {"Probe": "look something up"}
        if os.environ.get(TOOLS_ENV) == "builtin":
            # offered as a real agent offers them (only Probe is called)
            from holon_cli.tools.catalog import default_catalog

            cat = default_catalog()
            self.specs = [*cat.specs, *self.specs]
            self.guidance = {**cat.guidance, **self.guidance}

    def execute(self, ctx: Any, call: Any) -> Any:
        from holon_cli.model.tool import ToolResult

        self.counter += 1
        topic = str(call.arguments.get("topic", ""))
        body = f"EV-{self.counter} result for {topic}: " + "data " * 200
        return ToolResult(True, body[:1024])


def _items(req: Any) -> list[Any]:
    """Everything the request carries as conversation: the history of
    earlier turns, then this turn's (a build without a history has none:
    the benchmark also measures older builds, for a before/after figure)."""
    return [*getattr(req, "history", []), *req.conversation]


def _text(req: Any) -> str:
    f = req.frame
    parts = [f.system_prompt, *f.system_blocks, *f.context_blocks]
    for it in _items(req):
        parts.append(it.text)
        parts += [json.dumps(c.arguments, sort_keys=True) for c in it.tool_calls]
    return "\n".join(parts)


def request_bytes(req: Any) -> bytes:
    """The semantic request, canonically serialized in prompt order (tool
    schemas, instructions, stable context, history, turn context,
    conversation): what the restart invariant compares."""
    f = req.frame
    tools = json.dumps(
        [[t.name, t.description, t.input_schema] for t in req.tools or []], sort_keys=True
    )
    stable = getattr(f, "stable_blocks", 0)
    parts = [tools, f.system_prompt, *f.system_blocks, *f.context_blocks[:stable], "\x02"]

    def item(it: Any) -> str:
        calls = json.dumps([[c.id, c.name, c.arguments] for c in it.tool_calls], sort_keys=True)
        return f"{it.role}\x00{it.call_id}\x00{it.text}\x00{calls}"

    parts += [item(it) for it in getattr(req, "history", [])]
    parts += ["\x02", *f.context_blocks[stable:], "\x02"]
    parts += [item(it) for it in req.conversation]
    return "\x01".join(parts).encode("utf-8")


def request_tokens(req: Any) -> int:
    from holon_cli.runtime.memory import compaction as cp

    return cp.frame_tokens(req.frame, req.tools) + cp.items_tokens(_items(req))


def _reply(chars: int, n: int) -> str:
    return (f"Answer {n}. " + REPLY * (chars // len(REPLY) + 1))[:chars]


def _admit(step: Step) -> Any:
    from holon_cli.runtime.enqueue import admit

    kind = step[0]
    if kind == "external":
        return admit(step[1], origin="channel:ci")
    if kind == "task_result":
        return admit(
            step[1],
            kind="task_result",
            origin="task:tsk_bench",
            admission_context="runtime_owned",
            delivery_surface="task_rejoin",
        )
    if kind == "wake":
        return admit(
            step[1],
            kind="system_tick",
            origin="system:runtime",
            admission_context="runtime_owned",
            delivery_surface="runtime_system",
        )
    return admit(step[1])


MODEL = "bench/m"


def _turn(run: Run, steps: list[Any], box: ProbeBox, kill_at: int | None) -> None:
    from holon_cli.runtime.turn import run_turn

    srv = SERVER[0]
    srv.steps = deque(steps)
    start = len(SENT)
    if kill_at is not None:
        KILL_AT[:] = [start + kill_at + 1]
        try:
            run_turn(None, cli_model=MODEL, catalog=box)
        except Killed:
            in_flight = request_bytes(SENT[-1])
            KILL_AT.clear()
            res = run_turn(None, cli_model=MODEL, catalog=box)
            replayed = request_bytes(SENT[start + kill_at + 1])
            run.restart_pairs.append((in_flight.hex(), replayed.hex()))
            run.finals.append(res.final_text)
            _collect(run, start)
            return
    res = run_turn(None, cli_model=MODEL, catalog=box)
    run.finals.append(res.final_text)
    _collect(run, start)


def _collect(run: Run, start: int) -> None:
    turn = len(run.finals)
    wire = SERVER[0].requests
    assert len(wire) == len(SENT), (len(wire), len(SENT))  # one request, one body
    for n, req in enumerate(SENT[start:], 1):
        first = req.conversation[0].text
        mid = first.split(" ", 2)[1].removeprefix("id=") if first.startswith("[message ") else ""
        answer = ANSWERS.get(start + n)
        w = wire[start + n - 1]
        run.wire_bytes += len(w.raw)
        run.projections.append(Projection(turn, n, mid, req, _text(req), answer, comparable(w)))


def run_case(name: str, budget: int, home: Path, transport: str = "responses") -> Run:
    """One scenario under one budget and one transport, in a fresh home."""
    import yaml

    from holon_cli.providers import incremental as inc

    kind, incremental = TRANSPORTS[transport]
    os.environ["HOLON_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    runtime: dict[str, Any] = {"context_budget_tokens": budget}
    if incremental:
        runtime["openai_incremental"] = True
    provider = {"transport": kind, "base_url": SERVER[0].base_url}
    (home / "config.yaml").write_text(
        yaml.safe_dump({"runtime": runtime, "providers": {"bench": provider}})
    )
    inc.STATE._links.clear()  # a new process's memory: nothing to continue
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.agents.lifecycle import open_agent

    run = Run(name, budget, transport)
    box = ProbeBox()
    items: list[str] = []
    for i, step in enumerate(CASES[name]):
        kind_ = step[0]
        if kind_ == "workitem":
            store = open_agent(None)
            items.append(wi.create_work_item(store, step[1])["work_item"]["id"])
            wi.pick_work_item(store, items[-1], reason="benchmark")
            continue
        if kind_ == "pick":
            wi.pick_work_item(open_agent(None), items[step[1]], reason="benchmark")
            continue
        _admit(step)
        if kind_ in ("probe", "probe_killed"):
            call = {"name": "Probe", "arguments": {"topic": f"step {i}"}}
            steps: list[Any] = [{"tool_calls": [call]}] * step[2] + [_reply(300, i)]
        else:
            steps = [_reply(step[2] if kind_ == "say" else 300, i)]
        _turn(run, steps, box, step[3] if kind_ == "probe_killed" else None)
    store = open_agent(None)
    run.compactions = sum(
        1
        for e in store.events.records()
        if e["kind"] in ("context_compacted", "context_window_rolled")
    )
    return run


# ------------------------------------------------------------- invariants


def _ids_in(text: str, mid: str) -> int:
    return text.count(f"id={mid} ") + text.count(f"[{mid}]")


def check_budget(run: Run) -> list[str]:
    return [
        f"{run.case}/{run.budget} turn {p.turn} round {p.round}: {request_tokens(p.request)} tokens"
        for p in run.projections
        if request_tokens(p.request) > run.budget
    ]


def check_input_once(run: Run) -> list[str]:
    out = []
    for p in run.projections:
        # this turn's conversation and the history of earlier turns alike
        conv = "\n".join(i.text for i in _items(p.request))
        blocks = "\n".join(p.request.frame.context_blocks)
        if not p.message_id or conv.count(f"[message id={p.message_id} ") != 1:
            out.append(f"{run.case}/{run.budget} turn {p.turn} round {p.round}: input not once")
        elif f"id={p.message_id} " in blocks:
            out.append(f"{run.case}/{run.budget} turn {p.turn}: input repeated in a block")
    return out


def check_predecessor(run: Run) -> list[str]:
    out = []
    prev: Projection | None = None
    for p in run.projections:
        conv = p.request.conversation
        if prev is not None and prev.turn == p.turn and prev.answer is not None:
            # the previous round: the answer to the previous request and its results
            ids = {c.id for c in prev.answer.tool_calls}
            asked = [
                i for i in conv if i.role == "assistant" and {c.id for c in i.tool_calls} == ids
            ]
            answered = {i.call_id for i in conv if i.role == "tool"}
            if not asked or not ids <= answered:
                out.append(f"{run.case}/{run.budget} turn {p.turn} round {p.round}: lost last")
        elif p.turn > 1 and p.round == 1:
            answer = " ".join(run.finals[p.turn - 2].split())[:60]
            if answer and answer not in " ".join(p.text.split()):
                out.append(f"{run.case}/{run.budget} turn {p.turn}: previous answer missing")
        prev = p
    return out


def _owner_ok(p: Projection, token: str) -> bool:
    if token.startswith("EV-"):
        inside = [i for i in _items(p.request) if token in i.text]
        return all(i.role in ("tool", "user") for i in inside) and not any(
            token in b for b in p.request.frame.context_blocks if b.startswith("# Working memory")
        )
    if token.startswith("EXT-"):
        fenced = sum(m.group("body").count(token) for m in FENCE.finditer(p.text))
        return fenced == p.text.count(token)
    return True


def check_evidence(run: Run) -> list[str]:
    out = []
    for p in run.projections:
        seen: dict[str, int] = {}
        for t in TOKEN.findall(p.text):
            if not t.startswith("OP-"):
                seen[t] = seen.get(t, 0) + 1
        for t, n in seen.items():
            if n > 1 or not _owner_ok(p, t):
                out.append(f"{run.case}/{run.budget} turn {p.turn} round {p.round}: {t} x{n}")
    return out


HEADERS = {
    "# Working memory": "working memory",
    "# Since your last turn": "memory delta",
    "# Recent conversation": "recent conversation",
    "# Earlier conversation": "recent conversation",
    "## Work queue": "work queue",
    "# Active skills": "active skills",
    "# External trigger": "external trigger",
    "Turn mode:": "turn mode",
}


def check_sections(run: Run) -> list[str]:
    out = []
    for p in run.projections:
        kinds = []
        for b in p.request.frame.context_blocks:
            kind = next((k for h, k in HEADERS.items() if b.startswith(h)), "other")
            kinds.append(kind)
            inner = [h for h in HEADERS if h in b[1:] and not b.startswith(h)]
            if any(f"\n{h}" in b for h in inner):
                out.append(f"{run.case}/{run.budget} turn {p.turn}: {kind} carries {inner}")
        dup = {k for k in kinds if kinds.count(k) > 1}
        if dup:
            out.append(f"{run.case}/{run.budget} turn {p.turn}: repeated {sorted(dup)}")
    return out


def kept(p: Projection) -> set[str]:
    return set(TOKEN.findall(p.text))


def check_monotonic(runs: list[Run]) -> list[str]:
    out = []
    by_budget = sorted(runs, key=lambda r: r.budget)
    for small, large in zip(by_budget, by_budget[1:], strict=False):
        for a, b in zip(small.projections, large.projections, strict=False):
            extra = kept(a) - kept(b)
            if extra:
                out.append(
                    f"{small.case} turn {a.turn} round {a.round}: {small.budget} keeps "
                    f"{sorted(extra)[:3]} that {large.budget} dropped"
                )
    return out


def projection_now(catalog: Any) -> str:
    """The frame a next message would get, from the files alone."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.debug import debug_prompt

    d = debug_prompt(open_agent(None), catalog=catalog, text="next")
    history = (d.get("history") or {}).get("items")
    return json.dumps([d["system_prompt"], d["system_blocks"], d["context_blocks"], history])


def same_bytes(what: str, a: str, b: str) -> list[str]:
    return [] if a == b else [f"{what}: bytes differ at {len(os.path.commonprefix([a, b]))}"]


def check_restart(run: Run, home: Path) -> list[str]:
    out: list[str] = []
    for a, b in run.restart_pairs:
        out += same_bytes(f"{run.case}/{run.budget} replayed request", a, b)
    here = projection_now(ProbeBox())
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('pe', {str(Path(__file__))!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['pe'] = m\n"
        "spec.loader.exec_module(m)\n"
        "sys.stdout.write(m.projection_now(m.ProbeBox()))\n"
    )
    env = {**os.environ, "HOLON_HOME": str(home)}
    fresh = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    run.restart_pairs.append((here, fresh))  # kept for the mutation test
    return out + same_bytes(f"{run.case}/{run.budget} fresh process", here, fresh)


@dataclass
class Pair:
    """Two consecutive requests: the previous one's bytes (up to its closing
    brackets), the next one's, and the prefix they share."""

    across: bool  # the last request of a turn and the first of the next
    compaction: bool  # the compression epoch changed between them
    prev: int
    sent: int
    shared: int

    @property
    def kept(self) -> float:
        return min(1.0, self.shared / self.prev) if self.prev else 1.0

    @property
    def cached(self) -> float:
        return self.shared / self.sent if self.sent else 1.0

    @property
    def extends(self) -> bool:
        return self.shared >= self.prev


def _epoch(p: Projection) -> int:
    """The request's compression epoch (its frame's cache record; an older
    build without one: the number of compactions in its conversation's head)."""
    cache = getattr(p.request.frame, "cache", None)
    if cache is not None:
        return int(cache.compression_epoch)
    m = re.search(r"context compacted, epoch (\d+)", p.request.conversation[0].text)
    return int(m.group(1)) if m else 0


def pairs(run: Run) -> list[Pair]:
    """Every pair of consecutive requests of a run, across and within turns."""
    out = []
    for a, b in zip(run.projections, run.projections[1:], strict=False):
        end = body_end(a.wire)
        out.append(
            Pair(
                a.turn != b.turn,
                _epoch(a) != _epoch(b),
                end,
                len(b.wire),
                min(common_prefix(a.wire, b.wire), end),
            )
        )
    return out


def cache_figures(ps: list[Pair]) -> dict[str, Any]:
    """Byte-weighted kept and cached shares of the pairs outside a
    compaction, min / median / max per pair, and the counts; ``None`` shares
    when there is no such pair (a case with one request per turn has no
    pair within a turn: n/a, not 1.000)."""
    regular = [p for p in ps if not p.compaction]
    out: dict[str, Any] = {
        "pairs": len(regular),
        "compaction_pairs": len(ps) - len(regular),
        "extends": sum(p.extends for p in regular),
        "kept": None,
        "cached": None,
        # every pair, compactions included (what a provider bills over a run)
        "kept_all": round(sum(p.shared for p in ps) / sum(p.prev for p in ps), 4) if ps else None,
        "cached_all": round(sum(p.shared for p in ps) / sum(p.sent for p in ps), 4) if ps else None,
    }
    if not regular:
        return out
    kept = [p.kept for p in regular]
    cached = [p.cached for p in regular]
    out["kept"] = round(sum(p.shared for p in regular) / sum(p.prev for p in regular), 4)
    out["cached"] = round(sum(p.shared for p in regular) / sum(p.sent for p in regular), 4)
    out["kept_min_med_max"] = [
        round(min(kept), 3),
        round(statistics.median(kept), 3),
        round(max(kept), 3),
    ]
    out["cached_min_med_max"] = [
        round(min(cached), 3),
        round(statistics.median(cached), 3),
        round(max(cached), 3),
    ]
    return out


CHECKS: dict[str, Callable[[Run], list[str]]] = {
    "budget": check_budget,
    "input_once": check_input_once,
    "predecessor": check_predecessor,
    "evidence": check_evidence,
    "sections": check_sections,
}


# ------------------------------------------------------------- mutations


def applicable(run: Run) -> set[str]:
    """The invariants a case has material for (a chat-only case has no
    second round to lose and no evidence to repeat)."""
    out = {"budget", "input_once", "sections", "monotonic", "restart"}
    if any(p.round > 1 for p in run.projections):
        out.add("predecessor")
        if any(TOKEN.search(i.text) for p in run.projections for i in p.request.conversation[-1:]):
            out.add("evidence")
    return out


def mutations(run: Run) -> dict[str, Callable[[], list[str]]]:
    """Each invariant against a deliberately broken copy of one projection."""
    import copy
    from dataclasses import replace as dc_replace

    def broken(fn: Callable[[Any], Any]) -> Run:
        r = copy.copy(run)
        r.projections = list(run.projections)
        i = max(
            (k for k, p in enumerate(r.projections) if p.round > 1),
            default=len(r.projections) - 1,
        )
        p = r.projections[i]
        req = copy.copy(p.request)
        fn(req)
        r.projections[i] = dc_replace(p, request=req, text=_text(req))
        return r

    def dup_input(req: Any) -> None:
        req.conversation = [req.conversation[0], *req.conversation]

    def drop_last(req: Any) -> None:
        req.conversation = req.conversation[:-2] or req.conversation[:1]

    def dup_tool(req: Any) -> None:
        req.conversation = [*req.conversation, req.conversation[-1]]

    def overlap(req: Any) -> None:
        f = copy.copy(req.frame)
        f.context_blocks = [*f.context_blocks, f.context_blocks[0]]
        req.frame = f

    small = copy.copy(run)
    small.budget = 100
    bigger = copy.copy(run)
    bigger.budget = run.budget * 2
    bigger.projections = [dc_replace(p, text="") for p in run.projections]
    return {
        "budget": lambda: check_budget(small),
        "input_once": lambda: check_input_once(broken(dup_input)),
        "predecessor": lambda: check_predecessor(broken(drop_last)),
        "evidence": lambda: check_evidence(broken(dup_tool)),
        "sections": lambda: check_sections(broken(overlap)),
        "monotonic": lambda: check_monotonic([run, bigger]),
        "restart": lambda: same_bytes(
            "mutated", run.restart_pairs[-1][0], run.restart_pairs[-1][1][:-1] + " "
        ),
    }


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--mutate", action="store_true", help="show each invariant can fail")
    ap.add_argument("--case", action="append", help="run only these cases")
    ap.add_argument(
        "--transport", action="append", choices=list(TRANSPORTS), help="only these transports"
    )
    ap.add_argument(
        "--tools",
        choices=["probe", "builtin"],
        default="probe",
        help="offer only Probe (default), or the built-in catalog besides it",
    )
    args = ap.parse_args(argv)
    os.environ[TOOLS_ENV] = args.tools
    _install_recorder()
    names = args.case or list(CASES)
    transports = args.transport or list(TRANSPORTS)
    rows: list[dict[str, Any]] = []
    all_pairs: dict[str, list[Pair]] = {t: [] for t in transports}
    failed = 0
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="holon-pe-"))
    old_home = os.environ.get("HOLON_HOME")
    try:
        with WireServer() as srv:
            SERVER[:] = [srv]
            for ti, transport in enumerate(transports):
                for ci, name in enumerate(names):
                    runs = []
                    for bi, budget in enumerate(budgets()):
                        # a short home path: it is in every prompt (the execution
                        # binding, plan paths), and the 2k budget is tight
                        home = tmp / f"{ti}.{ci}.{bi}"
                        SENT.clear()
                        ANSWERS.clear()
                        srv.requests.clear()
                        run = run_case(name, budget, home, transport)
                        for check in CHECKS.values():
                            run.violations += check(run)
                        # a fresh process projects the same bytes: the frame and
                        # history do not depend on the transport, checked once
                        if ti == 0:
                            run.violations += check_restart(run, home)
                        else:
                            run.violations += [
                                v
                                for a, b in run.restart_pairs
                                for v in same_bytes(f"{name}/{budget} replayed request", a, b)
                            ]
                        runs.append(run)
                    mono = check_monotonic(runs)
                    for run in runs:
                        ps = pairs(run)
                        all_pairs[transport] += ps
                        ok = not run.violations and not mono
                        failed += not ok
                        rows.append(
                            {
                                "transport": transport,
                                "case": run.case,
                                "budget": run.budget,
                                "requests": len(run.projections),
                                "compactions": run.compactions,
                                "max_tokens": max(
                                    request_tokens(p.request) for p in run.projections
                                ),
                                "wire_bytes": run.wire_bytes,
                                "across": cache_figures([p for p in ps if p.across]),
                                "within": cache_figures([p for p in ps if not p.across]),
                                "violations": run.violations + mono,
                                "pass": ok,
                            }
                        )
                    if args.mutate and ti == 0:
                        material = applicable(runs[0])
                        for inv, fn in mutations(runs[0]).items():
                            if inv not in material:
                                rows.append({"case": name, "mutation": inv, "caught": None})
                                continue
                            caught = bool(fn())
                            failed += not caught
                            rows.append({"case": name, "mutation": inv, "caught": caught})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old_home is None:
            os.environ.pop("HOLON_HOME", None)
        else:
            os.environ["HOLON_HOME"] = old_home
    summary = []
    for transport, ps in all_pairs.items():
        for where, sel in (("across", True), ("within", False)):
            fig = cache_figures([p for p in ps if p.across is sel])
            met = fig["kept"] is None or fig["kept"] >= GOAL
            if args.tools == "builtin":  # a real agent's request sizes: the cached share too
                met = met and (fig["cached"] is None or fig["cached"] >= GOAL)
            failed += not met
            summary.append({"transport": transport, "pairs_of": where, **fig, "goal_met": met})
    load = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    _print(rows, summary, load, as_json=args.json)
    return 1 if failed else 0


def _share(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _print(
    rows: list[dict[str, Any]],
    summary: list[dict[str, Any]],
    load: list[float],
    *,
    as_json: bool,
) -> None:
    if as_json:
        print(json.dumps({"runs": rows, "cache": summary, "goal": GOAL, "load": load}, indent=2))
        return
    cases = [r for r in rows if "budget" in r]
    print(
        f"{'transport':22} {'case':24} {'budget':>6} {'reqs':>4} {'cmp':>3} {'max tok':>7}  "
        f"{'across kept/cached (ext)':>25}  {'within kept/cached (ext)':>25}  invariants"
    )
    for r in cases:
        cols = []
        for where in ("across", "within"):
            f = r[where]
            cols.append(
                f"{_share(f['kept']):>5}/{_share(f['cached']):>5} "
                f"({f['extends']}/{f['pairs']}+{f['compaction_pairs']}c)"
            )
        print(
            f"{r['transport']:22} {r['case']:24} {r['budget']:>6} {r['requests']:>4} "
            f"{r['compactions']:>3} {r['max_tokens']:>7}  {cols[0]:>25}  {cols[1]:>25}  "
            f"{'pass' if r['pass'] else 'FAIL'}"
        )
        for v in r["violations"][:5]:
            print(f"    {v}")
    muts = [r for r in rows if "mutation" in r]
    if muts:
        print("\nmutations (each invariant must catch its broken projection):")
        for r in muts:
            verdict = {True: "caught", False: "MISSED", None: "n/a (no material)"}[r["caught"]]
            print(f"  {r['case']:26} {r['mutation']:12} {verdict}")
    passed = sum(r["pass"] for r in cases)
    print(f"\n{passed} of {len(cases)} transport x case x budget runs keep every invariant")
    print(
        f"\nprompt cache on the bytes sent (pairs of consecutive requests outside a "
        f"compaction; kept = share of the previous request the next one starts with; "
        f"cached = share of the next request that repeats it; goal >= {GOAL} for kept, "
        f"and for cached with --tools builtin); load "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before, {load[3]:.2f} {load[4]:.2f} "
        f"{load[5]:.2f} after"
    )
    print(
        f"{'transport':22} {'pairs':6} {'n':>4} {'compact':>7} {'extends':>7} {'kept':>6} "
        f"{'min/med/max':>17} {'cached':>6} {'min/med/max':>17} {'all pairs k/c':>13}  goal"
    )
    for r in summary:
        kmm = "/".join(f"{x:.3f}" for x in r.get("kept_min_med_max", [])) or "n/a"
        cmm = "/".join(f"{x:.3f}" for x in r.get("cached_min_med_max", [])) or "n/a"
        every = f"{_share(r['kept_all'])}/{_share(r['cached_all'])}"
        print(
            f"{r['transport']:22} {r['pairs_of']:6} {r['pairs']:>4} {r['compaction_pairs']:>7} "
            f"{r['extends']:>7} {_share(r['kept']):>6} {kmm:>17} {_share(r['cached']):>6} "
            f"{cmm:>17} {every:>13}  {'met' if r['goal_met'] else 'MISSED'}"
        )


if __name__ == "__main__":
    sys.exit(main())
