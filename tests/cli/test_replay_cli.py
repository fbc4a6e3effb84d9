"""``holon replay`` and ``holon agent fork`` from the command line: exit
codes (0 match, 1 divergence or a damaged record, 3 unknown, 4 dropped by
retention), the ``--json`` envelope, the diff on stdout, ``--export`` then
``holon run --model scripted:FILE``, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.inprocess_cli import bind_runner, run  # noqa: F401

LS = {"cmd": "echo seen"}


def recorded_turn(tmp_path: Path, text: str = "list it") -> str:
    p = tmp_path / "s.yaml"
    steps = [
        {"text": "looking", "tool_calls": [{"name": "ExecCommand", "id": "ls", "arguments": LS}]},
        "It said {{ls.stdout_preview}}",
    ]
    p.write_text(yaml.safe_dump({"steps": steps}))
    assert run("enqueue", text).returncode == 0
    res = run("turn", "--model", f"scripted:{p}", "--json")
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["data"]["turn_id"])


def data(res: Any) -> Any:
    return json.loads(res.stdout)["data"]


def test_a_recorded_turn_replays_and_exits_0(tmp_path: Path) -> None:
    tid = recorded_turn(tmp_path)
    res = run("replay", tid)
    assert res.returncode == 0, res.stderr
    assert "2 request(s) rebuilt; all match" in res.stderr and res.stdout == ""
    res = run("replay", tid, "--agent", "main", "--json")
    assert res.returncode == 0
    out = json.loads(res.stdout)
    assert out["ok"] and out["command"] == "replay"
    assert out["data"] == {
        "turn_id": tid,
        "agent_id": "main",
        "match": True,
        "rounds": 2,
        "recorded_rounds": 2,
        "divergence": None,
    }


def test_a_changed_agents_md_exits_1_with_the_round_and_the_diff(tmp_path: Path) -> None:
    tid = recorded_turn(tmp_path)
    home = Path(data(run("agent", "path", "main", "--json"))["agent_home"])
    md = home / "AGENTS.md"
    md.write_text(md.read_text().replace("\n", "\nNever use tabs.\n", 1))
    res = run("replay", tid)
    assert res.returncode == 1
    assert "request 1 (round 1) differs" in res.stderr
    assert "+  Never use tabs." in res.stdout and res.stdout.startswith("--- recorded")
    res = run("replay", tid, "--json")
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert out["ok"] is True  # the success envelope: the replay itself worked
    d = out["data"]["divergence"]
    assert out["data"]["match"] is False and d["round"] == 1
    assert set(d) >= {"round", "path", "recorded", "replayed", "diff"}


def test_unknown_dropped_and_damaged_records(tmp_path: Path) -> None:
    tid = recorded_turn(tmp_path)
    res = run("replay", "turn_01m8jxkn6d0000yhcrz3")
    assert res.returncode == 3 and "no agent of this home has a record" in res.stderr
    res = run("replay", "turn_01m8jxkn6d0000yhcrz3", "--json")
    assert json.loads(res.stdout)["error"]["kind"] == "turn_not_found"
    res = run("replay", tid, "--agent", "nobody")
    assert res.returncode == 3
    # damaged: one byte of the compressed record flipped, in place
    home = Path(data(run("agent", "path", "main", "--json"))["agent_home"])
    led = home / ".holon" / "ledger" / "turn_records.jsonl"
    raw = led.read_bytes()
    i = raw.index(b'"data":"') + 40
    led.write_bytes(raw[:i] + (b"A" if raw[i : i + 1] != b"A" else b"B") + raw[i + 1 :])
    res = run("replay", tid, "--json")
    assert res.returncode == 1
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "record_damaged" and tid in err["message"] and err["hint"]
    # dropped by retention: exit 4, naming the setting
    cfg = Path(data(run("home", "path", "--json"))["home"]) / "config.yaml"
    cfg.write_text(yaml.safe_dump({"retention": {"events_days": 0}}))
    assert run("home", "gc").returncode == 0
    res = run("replay", tid)
    assert res.returncode == 4 and "retention.events_days" in res.stderr


def test_export_then_run_replays_the_model_side(tmp_path: Path) -> None:
    tid = recorded_turn(tmp_path, "what does it say?")
    out = tmp_path / "bug.yaml"
    res = run("replay", tid, "--export", str(out), "--json")
    assert res.returncode == 0, res.stderr
    d = data(res)
    assert d["steps"] == 2 and d["path"] == str(out) and d["message"] == "what does it say?"
    res = run("run", "--model", f"scripted:{out}", "--json", d["message"])
    assert res.returncode == 0, res.stderr
    assert data(res)["raw_final_text"] == "It said seen\n"
    res = run("replay", tid, "--export", str(tmp_path))  # a folder
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_agent_fork_from_the_command_line(tmp_path: Path) -> None:
    tid = recorded_turn(tmp_path)
    res = run("agent", "fork", "main", "--as", "try-1", "--json")
    assert res.returncode == 0, res.stderr
    d = data(res)
    assert d["agent_id"] == "try-1" and d["forked_from"] == "main" and d["at"] is None
    res = run("agent", "fork", "main", "--as", "try-2", "--at", tid)
    assert res.returncode == 0 and "forked main as of turn" in res.stdout
    assert run("agent", "fork", "main", "--as", "try-1").returncode == 4  # exists
    assert run("agent", "fork", "ghost", "--as", "x").returncode == 3
    assert run("agent", "fork", "main", "--as", "bad id!").returncode == 2
    assert run("agent", "fork", "main", "--as", "y", "--at", "turn_nope").returncode == 3
    assert run("agent", "fork", "main").returncode == 2  # --as is required
    assert "try-2" in run("agent", "list").stdout


def test_a_fork_of_an_agent_bound_to_a_project_shares_it_and_says_so(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("# project rules\n")
    assert run("workspace", "use", str(project)).returncode == 0
    res = run("agent", "fork", "main", "--as", "twin", "--json")
    assert res.returncode == 0, res.stderr
    notes = data(res)["not_rewound"]
    assert any(str(project) in n and "same files" in n for n in notes)
    a = data(run("status", "--json"))
    b = data(run("status", "--agent", "twin", "--json"))
    assert json.dumps(a).count(str(project)) and json.dumps(b).count(str(project))


def home_hash(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def test_holon_replay_changes_nothing_in_the_home(tmp_path: Path) -> None:
    tid = recorded_turn(tmp_path)
    root = Path(data(run("home", "path", "--json"))["home"])
    before = home_hash(root)
    assert run("replay", tid).returncode == 0
    assert run("replay", tid, "--json").returncode == 0
    assert home_hash(root) == before
