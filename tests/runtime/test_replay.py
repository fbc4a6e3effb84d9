"""Record, replay and fork (issue 40): every settled turn keeps a record;
``replay_turn`` rebuilds each request with today's code from the state
before the turn and finds them equal, or names the first difference; the
real home is never written; ``--export`` re-plays the model side; ``fork``
copies an agent now or as of a turn."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from holon_cli.errors import CorruptStateError, NotFoundError, RejectedError
from holon_cli.runtime.agents.lifecycle import open_agent, set_model_override
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.replay import records as R
from holon_cli.runtime.replay.replay import replay_turn
from holon_cli.runtime.turn import run_turn
from holon_cli.store.layout import home_root
from holon_cli.tools.catalog import default_catalog


def script(tmp_path: Path, steps: list[Any], name: str = "s.yaml", **extra: Any) -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps, **extra}, sort_keys=False))
    return f"scripted:{p}"


def turn(model: str | None, text: str = "go", agent: str | None = None) -> Any:
    admit(text, agent_id=agent)
    res = run_turn(agent, cli_model=model, catalog=default_catalog())
    assert res.ran and res.turn_id, res
    return res


def replay(turn_id: str, agent: str | None = None) -> dict[str, Any]:
    return replay_turn(turn_id, agent_id=agent, catalog=default_catalog())


def assert_match(turn_id: str, rounds: int, agent: str | None = None) -> None:
    out = replay(turn_id, agent)
    assert out["match"], (out["divergence"] or {}).get("diff")
    assert out["rounds"] == out["recorded_rounds"] == rounds, out


def tree_hash(root: Path) -> str:
    """Every name, mode, symlink target and file content under ``root``."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)}\0{st.st_mode}\0".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


PLAN = "{{c1.work_item.plan_artifact.path}}"  # the plan file of the work item made by call c1


def call(name: str, cid: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "id": cid, "arguments": args}


# ------------------------------------------------------------- every kind


def test_a_text_turn_is_recorded_and_replays(tmp_path: Path) -> None:
    res = turn(script(tmp_path, ["hello there"]))
    store = open_agent(None)
    assert R.turn_ids(store) == [res.turn_id]
    rec = R.load(store, res.turn_id)
    assert rec["v"] == 1 and rec["turn_id"] == res.turn_id and rec["agent_id"] == "main"
    assert [s["k"] for s in rec["steps"]] == ["req", "resp"]
    assert_match(res.turn_id, 1)


def test_a_request_is_packed_into_the_record_after_it_went_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packing a request (its whole history) is the record's costliest step:
    it waits until the call ended, off the path from a message to its
    provider request (issue 44's serve reaction). The record is the same."""
    from holon_cli.providers import chain
    from holon_cli.runtime.replay import docs

    seen: list[str] = []
    real_call, real_pack = chain.call_with_fallback, docs.packed_request

    def send(*a: Any, **k: Any) -> Any:
        seen.append("sent")
        return real_call(*a, **k)

    def pack(*a: Any, **k: Any) -> Any:
        seen.append("packed")
        return real_pack(*a, **k)

    monkeypatch.setattr(chain, "call_with_fallback", send)
    monkeypatch.setattr(docs, "packed_request", pack)
    res = turn(script(tmp_path, [{"tool_calls": [call("ExecCommand", "e", cmd="true")]}, "ok"]))
    assert seen == ["sent", "packed", "sent", "packed"]
    rec = R.load(open_agent(None), res.turn_id)
    assert [s["k"] for s in rec["steps"]] == ["req", "resp", "tool", "req", "resp"]
    assert_match(res.turn_id, 2)


def test_exec_command_and_apply_patch_turns_replay_without_running_anything(
    tmp_path: Path,
) -> None:
    # in the execution root (the agent home): the default sandbox lets it write there
    marker = open_agent(None).layout.home / "ran.txt"
    patch = "--- /dev/null\n+++ b/notes/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    steps = [
        {"text": "look", "tool_calls": [call("ExecCommand", "e1", cmd=f"echo x >> {marker}; ls")]},
        {"tool_calls": [call("ApplyPatch", "p1", patch=patch)]},
        {"tool_calls": [call("ExecCommand", "e2", cmd="cat notes/new.txt")]},
        "patched and checked",
    ]
    res = turn(script(tmp_path, steps))
    assert res.final_text == "patched and checked"
    home = open_agent(None).layout.home
    assert (home / "notes" / "new.txt").read_text() == "one\ntwo\n"
    assert marker.read_text() == "x\n"
    before = tree_hash(home_root())
    assert_match(res.turn_id, 4)
    assert marker.read_text() == "x\n"  # no command ran again
    assert tree_hash(home_root()) == before  # nothing in the home changed


def test_work_item_changes_and_plan_edits_replay(tmp_path: Path) -> None:
    """A work item made, picked, its plan edited twice by commands and its
    todos updated: each later prompt previews the plan as it was then."""
    steps = [
        {"tool_calls": [call("CreateWorkItem", "c1", objective="fix the bug", plan="1. look\n")]},
        {"tool_calls": [call("PickWorkItem", "k1", work_item_id="{{c1.work_item_id}}")]},
        {"tool_calls": [call("ExecCommand", "e1", cmd=f"echo '2. fix it' >> {PLAN}")]},
        {
            "tool_calls": [
                call(
                    "UpdateWorkItem",
                    "u1",
                    work_item_id="{{c1.work_item_id}}",
                    todo_list=[{"text": "write the test", "state": "in_progress"}],
                )
            ]
        },
        {"tool_calls": [call("ExecCommand", "e2", cmd=f"echo '3. ship' >> {PLAN}")]},
        "planned",
    ]
    res = turn(script(tmp_path, steps))
    assert res.final_text == "planned", res
    # later turns change the plan again: the record keeps the turn's versions
    wid = open_agent(None).read_record()["state"]["current_work_item_id"]
    plan = open_agent(None).layout.work_items_dir / wid / "plan.md"
    assert "3. ship" in plan.read_text()
    plan.write_text("rewritten later\n")
    assert_match(res.turn_id, 6)


def test_a_task_turn_replays(tmp_path: Path) -> None:
    """A command promoted to a background task, then its status asked."""
    steps = [
        {"tool_calls": [call("ExecCommand", "t1", cmd="sleep 0.4; echo done", yield_time_ms=50)]},
        {"tool_calls": [call("TaskList", "l1")]},
        "started it",
    ]
    res = turn(script(tmp_path, steps))
    assert res.final_text == "started it", res
    assert_match(res.turn_id, 3)


def test_a_child_turn_replays(tmp_path: Path) -> None:
    p = tmp_path / "family.yaml"
    spawn = call("SpawnAgent", "sp", initial_message="Compute the answer.")
    p.write_text(
        yaml.safe_dump(
            {
                "agents": {"child-*": {"steps": ["42"]}},
                "steps": [{"tool_calls": [spawn]}, "Spawned; waiting."],
            },
            sort_keys=False,
        )
    )
    open_agent(None)
    set_model_override("main", f"scripted:{p}")
    res = turn(None)
    assert res.final_text == "Spawned; waiting."
    children = [d for d in (home_root() / "agents").iterdir() if d.name.startswith("child-")]
    assert children
    before = tree_hash(home_root())
    assert_match(res.turn_id, 2, agent="main")
    assert tree_hash(home_root()) == before  # no child made, nothing written


def test_a_compacted_turn_replays(tmp_path: Path) -> None:
    (home_root()).mkdir(parents=True, exist_ok=True)
    (home_root() / "config.yaml").write_text(
        yaml.safe_dump({"runtime": {"context_budget_tokens": 16000}})
    )
    out = "printf '%08192d\\n' 0"  # 8 KB of output a round
    steps = [{"tool_calls": [call("ExecCommand", f"x{i}", cmd=out)]} for i in range(10)]
    res = turn(script(tmp_path, [*steps, "all done"]))
    assert res.final_text == "all done", res
    kinds = [e["kind"] for e in open_agent(None).events.records()]
    assert "context_compacted" in kinds
    assert_match(res.turn_id, 11)


def test_an_interjected_message_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from holon_cli.runtime.queue import steps as qsteps

    real = qsteps.take_interjects
    sent: list[bool] = []

    def take(store: Any, turn_id: str) -> Any:
        if not sent:
            sent.append(True)
            admit("also check the README", priority="interject", store=store)
        return real(store, turn_id)

    monkeypatch.setattr("holon_cli.runtime.queue.take_interjects", take)
    steps = [{"tool_calls": [call("ExecCommand", "e1", cmd="true")]}, "checked both"]
    res = turn(script(tmp_path, steps))
    rec = R.load(open_agent(None), res.turn_id)
    assert any(s["k"] == "interject" for s in rec["steps"])
    monkeypatch.setattr("holon_cli.runtime.queue.take_interjects", real)
    assert_match(res.turn_id, 2)


def test_turns_of_holon_run_serve_and_a_steps_recorder_are_recorded(tmp_path: Path) -> None:
    """`holon run`'s kept agent, a local serve pass and a turn through a step
    recorder (what `serve --engine dbos` passes; its real workers are
    checked in tests/e2e/test_scaleout_dbos_steps.py) keep records that replay."""
    from holon_cli.runtime.run import run_once
    from holon_cli.runtime.turn.steps import Direct
    from holon_cli.serve.loop import Scheduler

    model = script(tmp_path, [{"tool_calls": [call("ExecCommand", "e", cmd="true")]}, "ran"])
    data = run_once("do it", model=model, keep_agent=True, catalog=default_catalog())
    aid = data["agent_id"]
    (tid,) = R.turn_ids(open_agent(aid))
    assert_match(tid, 2)  # found without --agent

    class Counting(Direct):
        n = 0

        def round(self, n: int, fn: Any) -> None:
            Counting.n += 1
            fn()

    admit("again")
    res = run_turn(
        None,
        cli_model=script(tmp_path, ["fine"], "t.yaml"),
        catalog=default_catalog(),
        steps=Counting(),
    )
    assert Counting.n == 1
    assert_match(res.turn_id, 1)

    set_model_override("main", script(tmp_path, ["served"], "u.yaml"))
    admit("from serve")
    Scheduler(concurrency=1)._pass("main")  # what serve runs for an agent with work
    served = R.turn_ids(open_agent(None))[0]
    assert served != res.turn_id
    assert_match(served, 1)


def test_a_turn_a_budget_stopped_replays(tmp_path: Path) -> None:
    """Round 2 was built, then refused by the budget: the replay builds and
    compares it too and stops where the live turn stopped (no budget is
    checked: the recorded refusal is served)."""
    home_root().mkdir(parents=True, exist_ok=True)
    (home_root() / "config.yaml").write_text(yaml.safe_dump({"budgets": {"tokens_per_day": 150}}))
    first = {
        "tool_calls": [call("ExecCommand", "e", cmd="true")],
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
    res = turn(script(tmp_path, [first, "never sent"]))
    assert res.model_rounds == 1 and res.budget is not None, res
    rec = R.load(open_agent(None), res.turn_id)
    assert [s["k"] for s in rec["steps"]] == ["req", "resp", "tool", "req", "fail"]
    # the output cap the budget gate put on the request as it went out
    assert isinstance(rec["steps"][1].get("max_output_tokens"), int)
    (home_root() / "config.yaml").write_text("{}\n")  # today: no budget at all
    assert_match(res.turn_id, 2)


@pytest.mark.slow
@pytest.mark.parametrize("seen", ["mid_call", "after_return"])
def test_a_turn_the_operator_aborted_mid_call_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: str
) -> None:
    """``after_return``: the call returns before the turn's next look at the
    request (what a loaded machine did now and then: the turn then recorded
    the call's result and a third request, and the replay counted 3 rounds).
    An abort asked for during the call ends the turn at that call either way."""
    import time

    from holon_cli.runtime.turn import abort
    from holon_cli.tools import catalog

    real = catalog.ToolCatalog.execute

    def execute(self: Any, ctx: Any, call_: Any) -> Any:
        if call_.id == "slow":
            abort.request_abort(ctx.store)  # `holon agent abort` while this call runs
            time.sleep(0.5 if seen == "mid_call" else 0)
        return real(self, ctx, call_)

    monkeypatch.setattr(catalog.ToolCatalog, "execute", execute)
    if seen == "after_return":  # the turn looks at the request only every 30 s
        monkeypatch.setattr(abort.AbortWatch.__init__, "__kwdefaults__", {"poll_s": 30.0})
    steps = [
        {"tool_calls": [call("ExecCommand", "e", cmd="true")]},
        {"tool_calls": [call("ExecCommand", "slow", cmd="true")]},
        "never",
    ]
    res = turn(script(tmp_path, steps))
    assert res.status == "aborted" and res.failure_kind == "operator_aborted", res
    monkeypatch.setattr(catalog.ToolCatalog, "execute", real)
    assert_match(res.turn_id, 2)


# ------------------------------------------------------------ divergence


def test_a_changed_agents_md_diverges_at_round_one_with_the_line(tmp_path: Path) -> None:
    res = turn(script(tmp_path, [{"tool_calls": [call("ExecCommand", "e", cmd="true")]}, "ok"]))
    agents_md = open_agent(None).layout.home / "AGENTS.md"
    agents_md.write_text(agents_md.read_text() + "\nAlways answer in French.\n")
    out = replay(res.turn_id)
    assert not out["match"] and out["rounds"] == 0
    d = out["divergence"]
    assert d["round"] == 1 and d["request"] == 1
    assert d["path"].startswith("frame.system_blocks[")
    assert "+  Always answer in French." in d["diff"]
    assert "Always answer in French." in d["replayed"] and "French" not in d["recorded"]


def test_a_turn_that_makes_fewer_requests_today_diverges(tmp_path: Path) -> None:
    steps = [{"tool_calls": [call("ExecCommand", "e", cmd="true")]}, "ok"]
    res = turn(script(tmp_path, steps))
    config = {"runtime": {"max_provider_rounds": 1}}
    (home_root() / "config.yaml").write_text(yaml.safe_dump(config))
    out = replay(res.turn_id)
    assert not out["match"] and out["rounds"] == 1
    d = out["divergence"]
    assert d["request"] == 2 and d["replayed"] is None and d["path"] == ""
    assert d["diff"].startswith("--- recorded")


# ---------------------------------------------------- a moved home, a copy


def test_a_home_copied_elsewhere_replays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [
        {"tool_calls": [call("CreateWorkItem", "c1", objective="o", plan="p\n" * 40)]},
        {"tool_calls": [call("ExecCommand", "e", cmd="pwd; ls")]},
        "done",
    ]
    res = turn(script(tmp_path, steps))
    copy = tmp_path / "elsewhere" / "home-copy"
    shutil.copytree(home_root(), copy, symlinks=True)
    shutil.rmtree(home_root())  # the original is gone: nothing may point back at it
    monkeypatch.setenv("HOLON_HOME", str(copy))
    assert_match(res.turn_id, 3)


# --------------------------------------------------------------- errors


def test_an_unknown_turn_is_not_found(tmp_path: Path) -> None:
    turn(script(tmp_path, ["hi"]))
    with pytest.raises(NotFoundError) as err:
        replay("turn_01m8jxkn6d0000yhcrz3")
    assert err.value.kind == "turn_not_found" and err.value.exit_code == 3
    with pytest.raises(NotFoundError):
        replay("turn_01m8jxkn6d0000yhcrz3", agent="main")


def test_a_record_retention_dropped_names_the_setting(tmp_path: Path) -> None:
    from holon_cli.runtime.home.gc import gc_home

    res = turn(script(tmp_path, ["hi"]))
    (home_root() / "config.yaml").write_text(yaml.safe_dump({"retention": {"events_days": 0}}))
    report = gc_home()
    assert any(d["ledger"] == "turn_records" for d in report["dropped"]), report
    with pytest.raises(RejectedError) as err:
        replay(res.turn_id)
    assert err.value.kind == "record_dropped" and err.value.exit_code == 4
    assert "retention.events_days" in err.value.message
    # no 4 MB copy of the closed tail is kept beside the records' segments
    seg = open_agent(None).layout.ledger_dir / "segments"
    assert all(p.stat().st_size < 200 for p in seg.glob("turn_records.*.tail"))


def test_records_of_one_segment_share_what_turns_repeat(tmp_path: Path) -> None:
    """The second turn's record leaves out the blobs (instructions, tools)
    the segment's first record holds; both decode whole; a damaged first
    record makes the second one's error name it."""
    first = turn(script(tmp_path, ["one"]))
    second = turn(script(tmp_path, ["two"], "t.yaml"))
    path = open_agent(None).layout.ledger_path("turn_records")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines[1]["data"]) * 3 < len(lines[0]["data"]), [len(x["data"]) for x in lines]
    assert_match(first.turn_id, 1)
    assert_match(second.turn_id, 1)
    lines[0]["data"] = lines[0]["data"][:-12] + "AAAAAAAAAAAA"
    path.write_text("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines))
    with pytest.raises(CorruptStateError) as err:
        replay(second.turn_id)
    assert first.turn_id in err.value.message and second.turn_id in err.value.message


def test_a_damaged_record_is_a_clear_error(tmp_path: Path) -> None:
    res = turn(script(tmp_path, ["hi"]))
    path = open_agent(None).layout.ledger_path("turn_records")
    line = json.loads(path.read_text())
    data = bytearray(base64.b64decode(line["data"]))
    data[len(data) // 2] ^= 0xFF
    line["data"] = base64.b64encode(bytes(data)).decode()
    path.write_text(json.dumps(line, separators=(",", ":")) + "\n")
    with pytest.raises(CorruptStateError) as err:
        replay(res.turn_id)
    assert err.value.kind == "record_damaged" and res.turn_id in err.value.message
    assert str(path) in err.value.message


def line_start(doc: dict[str, Any]) -> dict[str, Any]:
    start = doc["start"]
    assert isinstance(start, dict)
    return start


def test_a_record_that_does_not_fit_its_type_names_the_field(tmp_path: Path) -> None:
    """A record that decodes but is not a turn record (its ``start`` lost
    its ``home``): ``record_damaged`` naming the field, never a KeyError."""
    res = turn(script(tmp_path, ["hi"]))
    store = open_agent(None)
    path = store.layout.ledger_path("turn_records")
    line = json.loads(path.read_text())
    doc = dict(R.decode(line, path))
    doc["start"] = {k: v for k, v in line_start(doc).items() if k != "home"}
    line = R.encode_line(res.turn_id, str(line["message_id"]), doc)
    path.write_text(json.dumps(line, separators=(",", ":")) + "\n")
    with pytest.raises(CorruptStateError) as err:
        replay(res.turn_id)
    assert err.value.kind == "record_damaged"
    assert "start.home is required" in err.value.message and str(path) in err.value.message


def test_a_failed_capture_still_settles_the_turn_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.runtime.replay import docs

    def boom(*_a: Any) -> Any:
        raise TypeError("not serialisable")

    real = docs.packed_request
    monkeypatch.setattr(docs, "packed_request", boom)
    res = turn(script(tmp_path, ["still fine"]))
    assert res.status == "completed" and res.final_text == "still fine"
    monkeypatch.setattr(docs, "packed_request", real)
    with pytest.raises(CorruptStateError) as err:
        replay(res.turn_id)
    assert "not serialisable" in err.value.message


# ----------------------------------------------------------------- export


def test_export_then_a_scripted_run_gives_the_same_final_text(tmp_path: Path) -> None:
    from holon_cli.runtime.replay.export import write
    from holon_cli.runtime.run import run_once

    steps = [
        {"text": "listing", "tool_calls": [call("ExecCommand", "ls", cmd="echo visible")]},
        {"tool_calls": [call("ExecCommand", "e2", cmd="true")]},
        "It printed {{ls.stdout_preview}}",
    ]
    res = turn(script(tmp_path, steps), text="what is here?")
    out = write(R.load(open_agent(None), res.turn_id), tmp_path / "bug.yaml")
    assert out["steps"] == 3 and out["message"] == "what is here?"
    text = (tmp_path / "bug.yaml").read_text()
    assert "#> what is here?" in text
    data = run_once(
        out["message"], model=f"scripted:{tmp_path / 'bug.yaml'}", catalog=default_catalog()
    )
    assert data["raw_final_text"] == res.final_text == "It printed visible\n"


# ------------------------------------------------------------------- fork


def test_fork_now_copies_work_memory_transcript_and_binding(tmp_path: Path) -> None:
    from holon_cli.runtime.replay.fork import fork_agent
    from holon_cli.store.workitem_index import load

    steps = [
        {"tool_calls": [call("CreateWorkItem", "c1", objective="ship it", plan="1. do\n")]},
        {"tool_calls": [call("PickWorkItem", "k", work_item_id="{{c1.work_item_id}}")]},
        "on it",
    ]
    turn(script(tmp_path, steps))
    a = open_agent(None)
    out = fork_agent("main", "copy")
    b = open_agent("copy")
    assert out["forked_from"] == "main" and out["at"] is None
    items = load(b).items
    (wid,) = items
    assert items[wid]["agent_id"] == "copy"
    assert items[wid]["plan_artifact"]["path"].startswith(str(b.layout.home))
    assert (b.layout.work_items_dir / wid / "plan.md").read_text() == "1. do\n"
    st_a, st_b = a.read_record()["state"], b.read_record()["state"]
    assert st_b["current_work_item_id"] == st_a["current_work_item_id"] == wid
    assert st_b["working_memory"] == st_a["working_memory"]
    assert st_b["status"] == "awake_idle" and st_b["current_run_id"] is None
    assert b.read_record()["identity"]["kind"] == "named"
    assert len(b.ledger("transcript").records()) == len(a.ledger("transcript").records())
    assert not b.layout.ledger_path("queue").exists()
    assert not b.layout.ledger_path("turn_records").exists()
    created = [e for e in b.events.records() if e["kind"] == "agent_created"]
    assert created[0]["data"]["forked_from"] == {"agent_id": "main", "turn_id": None}
    # independent: B's work does not reach A
    turn(script(tmp_path, ["b's answer"], "b.yaml"), agent="copy")
    assert len(a.ledger("transcript").records()) < len(b.ledger("transcript").records())
    with pytest.raises(RejectedError):
        fork_agent("main", "copy")
    with pytest.raises(NotFoundError):
        fork_agent("nobody", "other")


def test_fork_at_a_turn_takes_the_state_after_it(tmp_path: Path) -> None:
    from holon_cli.runtime.replay.fork import fork_agent
    from holon_cli.store.workitem_index import load

    first = turn(
        script(
            tmp_path,
            [{"tool_calls": [call("CreateWorkItem", "c1", objective="one", plan="v1\n")]}, "a"],
        )
    )
    a = open_agent(None)
    wid = next(iter(load(a).items))
    plan = a.layout.work_items_dir / wid / "plan.md"
    n_transcript = len(a.ledger("transcript").records())
    turn(
        script(
            tmp_path,
            [
                {"tool_calls": [call("CreateWorkItem", "c2", objective="two")]},
                {"tool_calls": [call("ExecCommand", "e", cmd=f"echo v2 > {plan}")]},
                "b",
            ],
            "two.yaml",
        )
    )
    assert len(load(a).items) == 2 and plan.read_text() == "v2\n"
    out = fork_agent("main", "past", at=first.turn_id)
    b = open_agent("past")
    assert out["at"] == first.turn_id and out["not_rewound"]
    assert list(load(b).items) == [wid]
    assert len(b.ledger("transcript").records()) == n_transcript
    st = b.read_record()["state"]
    assert st["working_memory"]["last_applied_turn_id"] == first.turn_id
    assert st["status"] == "awake_idle" and st["current_run_id"] is None


# ----------------------------------------------------------------- codecs


class FakeZstd:
    """Stands in for Python 3.14's ``compression.zstd`` (this machine runs
    3.11): the plumbing around the codec is what is tested."""

    @staticmethod
    def compress(data: bytes, level: int | None = None) -> bytes:
        import zlib

        return b"ZS" + zlib.compress(data, level or 3)

    @staticmethod
    def decompress(data: bytes) -> bytes:
        import zlib

        assert data[:2] == b"ZS"
        return zlib.decompress(data[2:])


def test_records_use_zstd_where_the_standard_library_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(R, "_ZSTD", [FakeZstd])
    res = turn(script(tmp_path, ["compressed"]))
    path = open_agent(None).layout.ledger_path("turn_records")
    line = json.loads(path.read_text())
    assert line["codec"] == "zstd" and base64.b64decode(line["data"])[:2] == b"ZS"
    assert_match(res.turn_id, 1)
    # a holon without zstd (Python < 3.14) says what it needs
    monkeypatch.setattr(R, "_ZSTD", [None])
    with pytest.raises(CorruptStateError) as err:
        replay(res.turn_id)
    assert "Python 3.14" in err.value.message


def test_a_turn_still_running_is_not_replayable_yet(tmp_path: Path) -> None:
    from holon_cli.runtime.turn.journal import Journal

    turn(script(tmp_path, ["one"]))
    store = open_agent(None)
    j = Journal(store, "turn_01m8jz00000000000000", "msg_x")
    j.begin()
    with pytest.raises(NotFoundError) as err:
        replay("turn_01m8jz00000000000000", agent="main")
    assert "has not settled yet" in err.value.message
    assert R.id_time("turn_01m8jz00000000000000") is not None
    assert R.id_time("nonsense") is None


def test_turns_carrying_earlier_turns_replay_also_across_a_roll(tmp_path: Path) -> None:
    """The requests carry the earlier turns (state/prompt_history.jsonl,
    issue 44): the record names where the history stood, the replay cuts it
    there (this epoch's file or the one before), so turns in a window and
    the turn whose start rolled the window both replay equal."""
    from holon_cli.runtime.debug import debug_prompt
    from holon_cli.runtime.memory.history import PromptHistory

    model = script(tmp_path, ["An answer with some length. " * 20], loop=True)
    turn(model, "first")
    second = turn(model, "second")
    assert len(PromptHistory.load(open_agent(None)).turns) == 2
    assert_match(second.turn_id, 1)
    # a budget the window outgrows: the next turn's start rolls it
    fixed = debug_prompt(open_agent(None), catalog=default_catalog())["fixed_tokens"]
    (home_root() / "config.yaml").write_text(f"runtime:\n  context_budget_tokens: {fixed + 600}\n")
    third = turn(model, "third")
    events = open_agent(None).events.records()
    assert any(e["kind"] == "context_window_rolled" for e in events)
    assert_match(third.turn_id, 1)
