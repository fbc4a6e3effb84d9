"""``holon workitem`` through the real console script: output shapes, exit
codes, bad input that changes nothing, and ``edit`` with a real editor
process."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holon_cli.cli import cli

SUBCOMMANDS = ("list", "show", "path", "create", "update", "pick", "complete", "edit")


def holon(
    script_runner: Any, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> Any:
    full_env = {**os.environ, **env} if env is not None else None
    kwargs: dict[str, Any] = {"print_result": False}
    if stdin is not None:
        import io

        kwargs["stdin"] = io.StringIO(stdin)
    return script_runner.run(["holon", *args], env=full_env, **kwargs)


def jrun(script_runner: Any, *args: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    r = holon(script_runner, *args, "--json", **kw)
    return r.returncode, json.loads(r.stdout)


def create(
    script_runner: Any, objective: str = "Split fixtures", *extra: str, **kw: Any
) -> dict[str, Any]:
    code, out = jrun(script_runner, "workitem", "create", objective, *extra, **kw)
    assert code == 0, out
    w: dict[str, Any] = out["data"]["work_item"]
    return w


def state_files(home: Path) -> dict[str, bytes]:
    """Everything a bad command must leave untouched."""
    agent = home / "agents" / "main"
    out = {}
    for p in [
        agent / ".holon" / "ledger" / f"{n}.jsonl"
        for n in ("work_items", "delivery_summaries", "briefs")
    ] + [agent / ".holon" / "state" / "agent.json"]:
        out[p.name] = p.read_bytes() if p.exists() else b""
    for plan in sorted((agent / "work-items").glob("*/plan.md")):
        out[str(plan)] = plan.read_bytes()
    return out


def editor_script(tmp_path: Path, body: str, name: str = "editor.sh") -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


# ------------------------------------------------------------------- help


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help_with_an_example(sub: str) -> None:
    res = CliRunner().invoke(cli, ["workitem", sub, "--help"])
    assert res.exit_code == 0 and "Example" in res.output and "--agent" in res.output


def test_group_help() -> None:
    res = CliRunner().invoke(cli, ["workitem", "--help"])
    assert res.exit_code == 0 and "Example" in res.output
    for sub in SUBCOMMANDS:
        assert sub in res.output


# ------------------------------------------------------------ happy path


def test_create_list_show_path(script_runner: Any, holon_home: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan-seed.md"
    plan.write_text("Only the test support module.\n")
    w = create(
        script_runner,
        "Split fixtures",
        "--plan-file",
        str(plan),
        "--plan-status",
        "ready",
        "--todo",
        "inspect",
        "--todo",
        "[>] move",
        "--todo",
        "[x] read issue",
    )
    assert w["plan_status"] == "ready"
    assert w["todo_list"] == [
        {"text": "inspect", "state": "pending"},
        {"text": "move", "state": "in_progress"},
        {"text": "read issue", "state": "completed"},
    ]
    assert Path(w["plan_artifact"]["path"]).read_text() == "Only the test support module.\n"

    r = holon(script_runner, "workitem", "list")
    assert (
        r.returncode == 0
        and w["id"] in r.stdout
        and "runnable" in r.stdout
        and "Split fixtures" in r.stdout
    )
    code, out = jrun(script_runner, "workitem", "list", "--filter", "queued")
    assert code == 0 and out["command"] == "workitem list" and out["schema_version"] == 1
    assert [x["id"] for x in out["data"]["work_items"]] == [w["id"]]

    r = holon(script_runner, "workitem", "show", w["id"])
    assert r.returncode == 0
    assert (
        w["plan_artifact"]["path"] in r.stdout
        and "[>] move" in r.stdout
        and "Only the test support module." in r.stdout
    )

    r = holon(script_runner, "workitem", "path", w["id"])
    assert r.returncode == 0 and r.stdout.strip() == w["plan_artifact"]["path"]
    code, out = jrun(script_runner, "workitem", "path", w["id"])
    assert out["data"] == {
        "work_item_id": w["id"],
        "path": w["plan_artifact"]["path"],
        "exists": True,
    }


def test_create_plan_from_stdin(script_runner: Any) -> None:
    w = create(script_runner, "From stdin", "--plan-file", "-", stdin="piped plan\n")
    assert Path(w["plan_artifact"]["path"]).read_text() == "piped plan\n"


def test_pick_update_complete_flow(script_runner: Any) -> None:
    a = create(script_runner, "a")["id"]
    b = create(script_runner, "b")["id"]
    r = holon(script_runner, "workitem", "pick", a)
    assert r.returncode == 0 and f"current work item: {a}" in r.stdout
    r = holon(script_runner, "workitem", "pick", b)  # away from runnable a, no reason
    assert r.returncode == 0 and "warning:" in r.stderr and "reason" in r.stderr
    code, out = jrun(
        script_runner,
        "workitem",
        "update",
        b,
        "--blocked-by",
        "waiting for CI",
        "--recheck-after",
        "2h",
        "--todo",
        "[x] push",
        "--todo",
        "wait",
    )
    assert code == 0 and out["data"]["focus_released"] is True
    wb = out["data"]["work_item"]
    assert wb["blocked_by"] == "waiting for CI" and wb["recheck_at"] and len(wb["todo_list"]) == 2
    code, out = jrun(script_runner, "workitem", "update", b, "--clear-blocker")
    assert (
        out["data"]["work_item"]["blocked_by"] is None
        and out["data"]["current_work_item_id"] is None
    )
    code, out = jrun(script_runner, "workitem", "update", b, "--clear-todos")
    assert out["data"]["work_item"]["todo_list"] == []
    holon(script_runner, "workitem", "pick", b)
    code, out = jrun(script_runner, "workitem", "complete", b, "--report", "CI green; merged.")
    assert code == 0
    d = out["data"]
    assert d["work_item"]["state"] == "completed" and d["focus_released"] is True
    assert (
        d["work_item"]["result_summary"] == "CI green; merged."
        and d["completion_report"]["text"] == "CI green; merged."
    )
    r = holon(script_runner, "tail", "--limit", "30")
    for kind in (
        "work_item_created",
        "work_item_picked",
        "work_item_updated",
        "work_item_focus_released",
        "work_item_completed",
    ):
        assert kind in r.stdout
    code, out = jrun(script_runner, "status")
    assert out["data"]["work_items"] == {
        "runnable": 1,
        "waiting_for_operator": 0,
        "triggered_blocked": 0,
        "blocked": 0,
        "completed": 1,
    }


# ------------------------------------------------------------ bad inputs


BAD: list[tuple[list[str], int, str]] = [
    (["show", "wi_nope"], 3, "work_item_not_found"),
    (["path", "wi_nope"], 3, "work_item_not_found"),
    (["pick", "wi_nope"], 3, "work_item_not_found"),
    (["pick", "{done}"], 4, "work_item_completed"),
    (["complete", "{done}"], 4, "work_item_completed"),
    (["complete", "wi_nope", "--report", "x"], 3, "work_item_not_found"),
    (["update", "{done}", "--plan-status", "ready"], 4, "work_item_completed"),
    (["update", "{open}", "--blocked-by", ""], 2, "invalid_arguments"),
    (["update", "{open}", "--blocked-by", "   "], 2, "invalid_arguments"),
    (["update", "{open}", "--blocked-by", "x", "--clear-blocker"], 2, "usage_error"),
    (["update", "{open}", "--recheck-after", "30m"], 2, "invalid_arguments"),
    (["update", "{open}", "--blocked-by", "x", "--recheck-after", "soon"], 2, "usage_error"),
    (["update", "{open}", "--plan-status", "done"], 2, "usage_error"),
    (["update", "{open}", "--todo", "x", "--clear-todos"], 2, "usage_error"),
    (["update", "{open}"], 2, "invalid_arguments"),
    (["update", "{open}", "--objective", ""], 2, "invalid_arguments"),
    (["create", ""], 2, "invalid_arguments"),
    (["create", "x", "--plan-file", "/nonexistent/plan.md"], 2, "usage_error"),
    (["create", "x", "--plan-status", "maybe"], 2, "usage_error"),
    (["list", "--filter", "bogus"], 2, "usage_error"),
    (["list", "--limit", "0"], 2, "usage_error"),
    (["list", "--agent", "ghost"], 3, "not_found"),
]


@pytest.mark.parametrize("argv, code, kind", BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_bad_input_exit_codes_and_nothing_changes(
    script_runner: Any, holon_home: Path, argv: list[str], code: int, kind: str
) -> None:
    open_id = create(script_runner, "open one", "--todo", "keep")["id"]
    done_id = create(script_runner, "done one")["id"]
    assert holon(script_runner, "workitem", "complete", done_id).returncode == 0
    assert holon(script_runner, "workitem", "pick", open_id).returncode == 0
    argv = [a.format(open=open_id, done=done_id) for a in argv]
    before = state_files(holon_home)
    r = holon(script_runner, "workitem", *argv)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert r.stderr.strip() and r.stdout == ""  # a clear message, on stderr
    assert "Traceback" not in r.stderr
    rj = holon(script_runner, "workitem", *argv, "--json")
    assert rj.returncode == code
    env = json.loads(rj.stdout)
    assert env["ok"] is False and env["error"]["kind"] == kind and env["error"]["message"]
    assert env["command"] == f"workitem {argv[0]}"
    assert state_files(holon_home) == before


# -------------------------------------------------------------------- edit


def test_edit_with_visual_appends_and_refreshes(script_runner: Any, tmp_path: Path) -> None:
    w = create(script_runner)
    ed = editor_script(tmp_path, 'echo "Non-goal: no runtime changes." >> "$1"\n')
    code, out = jrun(script_runner, "workitem", "edit", w["id"], env={"VISUAL": str(ed)})
    assert code == 0
    d = out["data"]
    assert (
        d["changed"] is True
        and d["editor_exit_code"] == 0
        and d["path"] == w["plan_artifact"]["path"]
    )
    text = Path(d["path"]).read_text()
    assert text.endswith("Non-goal: no runtime changes.\n")
    assert d["plan_artifact"]["hash"] != w["plan_artifact"]["hash"] and d["plan_artifact"][
        "bytes"
    ] == len(text.encode())
    code, out = jrun(script_runner, "workitem", "show", w["id"])
    assert "Non-goal: no runtime changes." in out["data"]["work_item"]["plan_artifact"]["preview"]
    r = holon(script_runner, "tail", "--jsonl")
    assert any(json.loads(ln)["kind"] == "plan_artifact_changed" for ln in r.stdout.splitlines())


def test_edit_human_output_and_unchanged(script_runner: Any, tmp_path: Path) -> None:
    w = create(script_runner)
    r = holon(script_runner, "workitem", "edit", w["id"], env={"VISUAL": "true"})
    assert r.returncode == 0 and r.stdout.startswith("plan unchanged: ")
    ed = editor_script(tmp_path, 'echo more >> "$1"\n')
    r = holon(
        script_runner, "workitem", "edit", w["id"], env={"EDITOR": str(ed)}
    )  # $EDITOR fallback
    assert (
        r.returncode == 0
        and r.stdout.startswith("plan changed: ")
        and w["plan_artifact"]["path"] in r.stdout
    )


def test_visual_wins_over_editor_and_editor_args_are_split(
    script_runner: Any, tmp_path: Path
) -> None:
    w = create(script_runner)
    ed = editor_script(tmp_path, 'echo "$1" >> "$2"\n')
    code, out = jrun(
        script_runner,
        "workitem",
        "edit",
        w["id"],
        env={"VISUAL": f"{ed} from-visual", "EDITOR": f"{ed} from-editor"},
    )
    assert code == 0 and Path(w["plan_artifact"]["path"]).read_text().endswith("from-visual\n")


def test_edit_without_an_editor_is_a_usage_error(script_runner: Any, holon_home: Path) -> None:
    w = create(script_runner)
    before = state_files(holon_home)
    r = holon(script_runner, "workitem", "edit", w["id"], env={"VISUAL": "", "EDITOR": ""})
    assert r.returncode == 2 and "VISUAL" in r.stderr and "EDITOR" in r.stderr
    assert w["plan_artifact"]["path"] in r.stderr  # tells where the file is
    assert state_files(holon_home) == before


def test_edit_failing_editor(script_runner: Any, tmp_path: Path) -> None:
    w = create(script_runner)
    ed = editor_script(tmp_path, "exit 3\n")
    code, out = jrun(script_runner, "workitem", "edit", w["id"], env={"VISUAL": str(ed)})
    assert code == 1 and out["error"]["kind"] == "editor_failed" and "3" in out["error"]["message"]
    r = holon(
        script_runner, "workitem", "edit", w["id"], env={"VISUAL": str(tmp_path / "no-such-editor")}
    )
    assert r.returncode == 2 and "cannot run editor" in r.stderr


def test_edit_unknown_item(script_runner: Any) -> None:
    r = holon(script_runner, "workitem", "edit", "wi_nope", env={"VISUAL": "true"})
    assert r.returncode == 3


# --------------------------------------------- errors speak flags, not tools

TOOL_WORDS = ("UpdateWorkItem", "PickWorkItem", "ListWorkItems", "todo_list", "blocked_by")

FLAG_ERRORS: list[tuple[list[str], list[str]]] = [
    (["create", "x", "--todo", "  "], ["--todo #1 must be non-empty text"]),
    (["create", ""], ["OBJECTIVE must be non-empty text"]),
    (["update", "{open}", "--todo", "a", "--todo", " "], ["--todo #2 must be non-empty"]),
    (["update", "{open}", "--objective", " "], ["--objective must be non-empty text"]),
    (["update", "{open}", "--blocked-by", " "], ["--blocked-by must be", "pass --clear-blocker"]),
    (["update", "{open}"], ["nothing to update", "--plan-status", "--clear-blocker"]),
    (
        ["update", "{open}", "--recheck-after", "2h"],
        ["--recheck-after applies only together with --blocked-by"],
    ),
    (["show", "wi_nope"], ["`holon workitem list --agent main`"]),
    (["pick", "{done}"], ["`holon workitem list --filter open --agent main`"]),
]


@pytest.mark.parametrize("argv, want", FLAG_ERRORS, ids=[" ".join(a) for a, _ in FLAG_ERRORS])
def test_cli_errors_use_flag_names_and_repeat_the_agent(
    script_runner: Any, argv: list[str], want: list[str]
) -> None:
    open_id = create(script_runner, "open one")["id"]
    done_id = create(script_runner, "done one")["id"]
    assert holon(script_runner, "workitem", "complete", done_id).returncode == 0
    argv = [a.format(open=open_id, done=done_id) for a in argv]
    r = holon(script_runner, "workitem", *argv, "--agent", "main")
    assert r.returncode != 0 and r.stdout == ""
    for text in want:
        assert text in r.stderr, r.stderr
    for word in TOOL_WORDS:
        assert word not in r.stderr, r.stderr
    code, env = jrun(script_runner, "workitem", *argv, "--agent", "main")
    assert code == r.returncode and env["error"]["kind"]  # the machine kind is unchanged


def test_cli_hints_without_agent_name_no_agent(script_runner: Any) -> None:
    r = holon(script_runner, "workitem", "show", "wi_nope")
    assert r.returncode == 3
    assert "`holon workitem list`" in r.stderr and "--agent" not in r.stderr


def test_cli_pick_warnings_use_flags(script_runner: Any) -> None:
    a = create(script_runner, "first")["id"]
    b = create(script_runner, "second")["id"]
    assert holon(script_runner, "workitem", "pick", a).returncode == 0
    r = holon(script_runner, "workitem", "pick", b, "-a", "main")
    assert r.returncode == 0 and "pass `--reason`" in r.stderr, r.stderr
    r = holon(script_runner, "workitem", "update", a, "--blocked-by", "waiting for CI")
    assert r.returncode == 0
    r = holon(script_runner, "workitem", "pick", a, "-a", "main", "--reason", "review")
    assert r.returncode == 0
    assert f"`holon workitem update {a} --clear-blocker --agent main`" in r.stderr, r.stderr
    for word in TOOL_WORDS:
        assert word not in r.stderr, r.stderr
    assert holon(script_runner, "workitem", "pick", b, "--reason", "back").returncode == 0
    r = holon(script_runner, "workitem", "update", a, "--clear-blocker", "-a", "main")
    assert r.returncode == 0 and f"`holon workitem pick {a} --agent main`" in r.stderr


def test_create_hint_repeats_the_agent(script_runner: Any) -> None:
    r = holon(script_runner, "workitem", "create", "x", "-a", "main")
    assert r.returncode == 0
    assert "`holon workitem pick wi_" in r.stderr and "--agent main`" in r.stderr
    r = holon(script_runner, "workitem", "list", "--filter", "completed", "-a", "main")
    assert "`holon workitem create OBJECTIVE --agent main`" in r.stderr
