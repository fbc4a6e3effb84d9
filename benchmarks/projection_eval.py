#!/usr/bin/env python3
"""Model-free projection benchmark (issue 23): what the prompt keeps when the
context budget is small.

Twelve frozen scenarios run through real turns (``run_turn`` with the
scripted model and a synthetic ``Probe`` tool whose 1 KB results carry
evidence tokens), each under budgets of 2k, 4k and 16k tokens. Every
provider request (a *projection*) is checked against hard invariants:

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
                   process projects the same frame from the same files; a
                   turn killed mid-request replays the very request).

It prints, per case and budget, the requests, compactions, the largest
request and the cacheable-prefix ratio: bytes of each request (tool schemas,
frame, conversation: what is sent) that repeat the previous request's prefix
/ bytes sent, within a turn, leaving out the first
request after a compaction (target >= 0.9), and how many of those requests
start with the *whole* previous request (``extends``: the frame did not move;
with small budgets and 1 KB rounds the ratio is bounded by 1 - appended /
sent even when every request extends the previous one). ``--mutate``
corrupts one projection per invariant and shows each check catches it.

    python benchmarks/projection_eval.py [--json] [--mutate] [--case NAME]

Exit status 1 when an invariant fails (or a mutation goes unnoticed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUDGETS = (2000, 4000, 16000)
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


@dataclass
class Run:
    case: str
    budget: int
    projections: list[Projection] = field(default_factory=list)
    compactions: int = 0
    finals: list[str] = field(default_factory=list)  # each turn's final answer
    restart_pairs: list[tuple[str, str]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


SENT: list[Any] = []
ANSWERS: dict[int, Any] = {}  # request number -> the model's answer to it
KILL_AT: list[int] = []  # request number at which the provider "dies"


class Killed(BaseException):
    """Stands for SIGKILL in the middle of a provider request."""


def _install_recorder() -> None:
    from holon_cli.providers.scripted import ScriptedTransport

    real = ScriptedTransport.complete

    def complete(self: Any, request: Any) -> Any:
        SENT.append(request)
        if KILL_AT and len(SENT) == KILL_AT[0]:
            KILL_AT.clear()
            raise Killed
        answer = real(self, request)
        ANSWERS[len(SENT)] = answer
        return answer

    ScriptedTransport.complete = complete  # type: ignore[method-assign]


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

    def execute(self, ctx: Any, call: Any) -> Any:
        from holon_cli.model.tool import ToolResult

        self.counter += 1
        topic = str(call.arguments.get("topic", ""))
        body = f"EV-{self.counter} result for {topic}: " + "data " * 200
        return ToolResult(True, body[:1024])


def _text(req: Any) -> str:
    f = req.frame
    parts = [f.system_prompt, *f.system_blocks, *f.context_blocks]
    for it in req.conversation:
        parts.append(it.text)
        parts += [json.dumps(c.arguments, sort_keys=True) for c in it.tool_calls]
    return "\n".join(parts)


def request_bytes(req: Any) -> bytes:
    """The request as a provider caches it: tool schemas, then the frame,
    then the conversation (every request sends all of them; Anthropic's
    cache order is tools, system, messages, and the Responses API caches the
    same prefix)."""
    f = req.frame
    tools = json.dumps(
        [[t.name, t.description, t.input_schema] for t in req.tools or []], sort_keys=True
    )
    parts = [tools, f.system_prompt, *f.system_blocks, *f.context_blocks]
    for it in req.conversation:
        calls = json.dumps([[c.id, c.name, c.arguments] for c in it.tool_calls], sort_keys=True)
        parts.append(f"{it.role}\x00{it.call_id}\x00{it.text}\x00{calls}")
    return "\x01".join(parts).encode("utf-8")


def request_tokens(req: Any) -> int:
    from holon_cli.runtime.memory import compaction as cp

    return cp.frame_tokens(req.frame, req.tools) + cp.items_tokens(req.conversation)


def _script(home: Path, steps: list[Any]) -> str:
    import yaml

    path = home / f"script-{len(list(home.glob('script-*')))}.yaml"
    path.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{path}"


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


def _turn(run: Run, home: Path, steps: list[Any], box: ProbeBox, kill_at: int | None) -> None:
    from holon_cli.runtime.turn import run_turn

    model = _script(home, steps)
    start = len(SENT)
    if kill_at is not None:
        KILL_AT[:] = [start + kill_at + 1]
        try:
            run_turn(None, cli_model=model, catalog=box)
        except Killed:
            in_flight = request_bytes(SENT[-1])
            KILL_AT.clear()
            res = run_turn(None, cli_model=model, catalog=box)
            replayed = request_bytes(SENT[start + kill_at + 1])
            run.restart_pairs.append((in_flight.hex(), replayed.hex()))
            run.finals.append(res.final_text)
            _collect(run, start)
            return
    res = run_turn(None, cli_model=model, catalog=box)
    run.finals.append(res.final_text)
    _collect(run, start)


def _collect(run: Run, start: int) -> None:
    turn = len(run.finals)
    for n, req in enumerate(SENT[start:], 1):
        first = req.conversation[0].text
        mid = first.split(" ", 2)[1].removeprefix("id=") if first.startswith("[message ") else ""
        answer = ANSWERS.get(start + n)
        run.projections.append(Projection(turn, n, mid, req, _text(req), answer))


def run_case(name: str, budget: int, home: Path) -> Run:
    """One scenario under one budget, in a fresh home."""
    import yaml

    os.environ["HOLON_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        yaml.safe_dump({"runtime": {"context_budget_tokens": budget}})
    )
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.agents.lifecycle import open_agent

    run = Run(name, budget)
    box = ProbeBox()
    items: list[str] = []
    for i, step in enumerate(CASES[name]):
        kind = step[0]
        if kind == "workitem":
            store = open_agent(None)
            items.append(wi.create_work_item(store, step[1])["work_item"]["id"])
            wi.pick_work_item(store, items[-1], reason="benchmark")
            continue
        if kind == "pick":
            wi.pick_work_item(open_agent(None), items[step[1]], reason="benchmark")
            continue
        _admit(step)
        if kind in ("probe", "probe_killed"):
            call = {"name": "Probe", "arguments": {"topic": f"step {i}"}}
            steps: list[Any] = [{"tool_calls": [call]}] * step[2] + [_reply(300, i)]
        else:
            steps = [_reply(step[2] if kind == "say" else 300, i)]
        _turn(run, home, steps, box, step[3] if kind == "probe_killed" else None)
    store = open_agent(None)
    run.compactions = sum(1 for e in store.events.records() if e["kind"] == "context_compacted")
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
        conv = "\n".join(i.text for i in p.request.conversation)
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
        inside = [i for i in p.request.conversation if token in i.text]
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
    return json.dumps([d["system_prompt"], d["system_blocks"], d["context_blocks"]])


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


def prefix_ratio(run: Run) -> tuple[float, float]:
    """(bytes repeating the previous request's prefix / bytes sent, share of
    requests that start with the whole previous request), within a turn,
    leaving out the first request after a compaction."""
    reused = sent = pairs = whole = 0
    prev: Projection | None = None
    for p in run.projections:
        if prev is not None and prev.turn == p.turn:
            a, b = request_bytes(prev.request), request_bytes(p.request)
            after_compaction = prev.request.conversation[0].text != p.request.conversation[0].text
            if not after_compaction:
                n = len(os.path.commonprefix([a, b]))
                reused += n
                sent += len(b)
                pairs += 1
                whole += n == len(a)
        prev = p
    return (reused / sent if sent else 1.0), (whole / pairs if pairs else 1.0)


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
    args = ap.parse_args(argv)
    _install_recorder()
    names = args.case or list(CASES)
    rows: list[dict[str, Any]] = []
    failed = 0
    tmp = Path(tempfile.mkdtemp(prefix="holon-projection-"))
    try:
        for name in names:
            runs = []
            for budget in BUDGETS:
                home = tmp / f"{name}-{budget}"
                SENT.clear()
                ANSWERS.clear()
                run = run_case(name, budget, home)
                for check in CHECKS.values():
                    run.violations += check(run)
                run.violations += check_restart(run, home)
                runs.append(run)
            mono = check_monotonic(runs)
            for run in runs:
                ratio, extends = prefix_ratio(run)
                ok = not run.violations and not mono
                failed += not ok
                rows.append(
                    {
                        "case": run.case,
                        "budget": run.budget,
                        "requests": len(run.projections),
                        "compactions": run.compactions,
                        "max_tokens": max(request_tokens(p.request) for p in run.projections),
                        "prefix_ratio": round(ratio, 3),
                        "prefix_target_met": ratio >= 0.9,
                        "extends_previous": round(extends, 3),
                        "violations": run.violations + mono,
                        "pass": ok,
                    }
                )
            if args.mutate:
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
    _print(rows, as_json=args.json)
    return 1 if failed else 0


def _print(rows: list[dict[str, Any]], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cases = [r for r in rows if "budget" in r]
    print(
        f"{'case':26} {'budget':>6} {'reqs':>5} {'compact':>7} {'max tok':>7} "
        f"{'prefix':>6} {'extends':>7}  invariants"
    )
    for r in cases:
        mark = "" if r["prefix_target_met"] else " (prefix < 0.9)"
        print(
            f"{r['case']:26} {r['budget']:>6} {r['requests']:>5} {r['compactions']:>7} "
            f"{r['max_tokens']:>7} {r['prefix_ratio']:>6.3f} {r['extends_previous']:>7.3f}  "
            f"{'pass' if r['pass'] else 'FAIL'}{mark}"
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
    met = sum(r["prefix_target_met"] for r in cases)
    print(f"\n{passed} of {len(cases)} case x budget runs keep every invariant")
    print(f"{met} of {len(cases)} reach a cacheable-prefix ratio of 0.9 within a turn")


if __name__ == "__main__":
    sys.exit(main())
