"""Child agents from the operator's side: `enqueue --agent <child>` is
refused (exit 4), `agent list` hides children and `--all` shows them with
their parent, `task list|status|input|stop` work on the child's handle,
inspection and runtime steps still work on a child, `agent rm` of a parent
refuses while children run, and the HTTP routes answer 404 for a child."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.inprocess_cli import bind_runner, run  # noqa: F401


def family(tmp_path: Path, child_steps: list[Any] | None = None) -> tuple[str, str]:
    """main spawns one child through a real turn; returns (task id, child id)."""
    p = tmp_path / "family.yaml"
    spawn = {
        "tool_calls": [{"name": "SpawnAgent", "arguments": {"initial_message": "Count the files."}}]
    }
    p.write_text(
        yaml.safe_dump(
            {
                "agents": {"child-*": {"steps": child_steps or ["7 files"]}},
                "steps": [spawn, "Spawned.", "Thanks."],
            }
        )
    )
    assert run("enqueue", "delegate").returncode == 0
    assert run("agent", "model", "main", f"scripted:{p}").returncode == 0
    assert run("turn").returncode == 0
    tasks = json.loads(run("task", "list", "--json").stdout)["data"]["tasks"]
    (t,) = tasks
    return t["task_id"], t["child_agent_id"]


def test_operator_ingress_to_a_child_is_refused(tmp_path: Path) -> None:
    tid, cid = family(tmp_path)
    res = run("enqueue", "--agent", cid, "hello child")
    assert res.returncode == 4
    assert "private child of 'main'" in res.stderr and tid in res.stderr
    res = run("enqueue", "--agent", cid, "hello child", "--json")
    assert json.loads(res.stdout)["error"]["kind"] == "private_agent"
    # still inspectable and runnable from the CLI
    assert run("status", "--agent", cid).returncode == 0
    assert run("tail", "--agent", cid).returncode == 0
    res = run("turn", "--agent", cid, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["data"]["final_text"] == "7 files"
    assert run("transcript", "--agent", cid).returncode == 0
    assert run("tick", "--agent", cid).returncode == 0


def test_agent_list_hides_children_and_all_shows_them(tmp_path: Path) -> None:
    tid, cid = family(tmp_path)
    plain = json.loads(run("agent", "list", "--json").stdout)["data"]["agents"]
    assert [a["agent_id"] for a in plain] == ["main"]
    assert "archived" not in plain[0]
    every = json.loads(run("agent", "list", "--all", "--json").stdout)["data"]["agents"]
    (child,) = [a for a in every if a["agent_id"] == cid]
    assert child["kind"] == "child" and child["visibility"] == "private"
    assert child["lineage_parent_agent_id"] == "main" and child["archived"] is False
    text = run("agent", "list", "--all").stdout
    assert cid in text and "<- main" in text


def test_task_commands_work_on_the_child_handle(tmp_path: Path) -> None:
    tid, cid = family(tmp_path, ["first", "second"])
    listed = run("task", "list").stdout
    assert tid in listed and f"[child {cid}] Count the files." in listed
    status = run("task", "status", tid)
    assert status.returncode == 0 and "child phase" in status.stdout and cid in status.stdout
    res = run("task", "input", tid, "and the folders too", "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["data"]["input_target"] == "child_followup"
    out = run("task", "output", tid, "--json")
    assert json.loads(out.stdout)["data"]["retrieval_status"] == "not_ready"
    stop = run("task", "stop", tid, "--json")
    data = json.loads(stop.stdout)["data"]
    assert data["task"]["status"] == "cancelled" and data["archived"] is True
    refused = run("task", "input", tid, "too late")
    assert refused.returncode == 4
    every = json.loads(run("agent", "list", "--all", "--json").stdout)["data"]["agents"]
    assert [a["archived"] for a in every if a["agent_id"] == cid] == [True]


def test_agent_rm_of_a_parent_refuses_while_children_run(tmp_path: Path) -> None:
    tid, cid = family(tmp_path)
    assert run("agent", "stop", "main").returncode == 0
    res = run("agent", "rm", "main")
    assert res.returncode == 4 and cid in res.stderr and "--force" in res.stderr
    assert Path(
        json.loads(run("agent", "path", cid, "--json").stdout)["data"]["agent_home"]
    ).is_dir()
    res = run("agent", "rm", "main", "--force", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["stopped_children"] == [tid]
    every = json.loads(run("agent", "list", "--all", "--json").stdout)["data"]["agents"]
    assert [(a["agent_id"], a["archived"], a["status"]) for a in every] == [(cid, True, "stopped")]


def test_http_routes_answer_404_for_a_child(tmp_path: Path) -> None:
    from tests.serve.http_app import make_client

    tid, cid = family(tmp_path)
    with make_client() as client:
        listed = client.get("/agents/list").json()["agents"]
        assert [a["agent_id"] for a in listed] == ["main"]
        for method, path, body in (
            ("GET", f"/agents/{cid}/status", None),
            ("GET", f"/agents/{cid}/state", None),
            ("GET", f"/agents/{cid}/events", None),
            ("POST", f"/agents/{cid}/enqueue", {"text": "hi", "origin": "webhook:gh"}),
            ("POST", f"/control/agents/{cid}/prompt", {"text": "hi"}),
            ("POST", f"/control/agents/{cid}/work-items", {"objective": "x"}),
            ("POST", f"/control/agents/{cid}/abort", {}),
        ):
            res = client.request(method, path, json=body)
            assert res.status_code == 404, (path, res.status_code, res.text)
        assert client.get("/agents/main/status").status_code == 200


def test_run_drives_the_children_it_spawns_to_their_result(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    spawn = {"tool_calls": [{"name": "SpawnAgent", "arguments": {"initial_message": "Compute."}}]}
    p.write_text(
        yaml.safe_dump(
            {
                "agents": {"child-*": {"steps": ["child result: 42"]}},
                "steps": [spawn, "Spawned; waiting.", "Got the result."],
            }
        )
    )
    assert run("agent", "create", "boss", "--model", f"scripted:{p}").returncode == 0
    res = run("run", "--agent", "boss", "delegate")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "Got the result."
    tasks = json.loads(run("task", "list", "--all", "--agent", "boss", "--json").stdout)
    (t,) = tasks["data"]["tasks"]
    assert t["status"] == "completed" and t["result_summary"] == "child result: 42"


def test_repair_rebuilds_a_childs_identity_with_its_lineage_and_handle(tmp_path: Path) -> None:
    tid, cid = family(tmp_path)
    home = Path(json.loads(run("agent", "path", cid, "--json").stdout)["data"]["agent_home"])
    agent_file = home / ".holon" / "state" / "agent.json"
    agent_file.unlink()
    agent_file.with_name("agent.json.prev").unlink(missing_ok=True)
    res = run("home", "check", "--repair")
    assert res.returncode == 0, res.stderr
    ident = json.loads(agent_file.read_text())["identity"]
    assert ident["lineage_parent_agent_id"] == "main" and ident["supervision_task_id"] == tid
    assert run("enqueue", "--agent", cid, "still a child").returncode == 4
