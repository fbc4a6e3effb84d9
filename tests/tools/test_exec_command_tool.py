"""ExecCommand and ExecCommandBatch: real subprocesses in a temp execution root."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from holon_cli.runtime.tasks import plane as tasks
from holon_cli.tools.base import ToolContext, ToolResult
from holon_cli.tools.exec_command import output_budget_tokens

Call = Callable[..., ToolResult]


def _gone(pid: int) -> bool:
    """Dead or a zombie (an orphan waiting for init to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def _wait_gone(*pids: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return all(_gone(p) for p in pids)


def test_completed_envelope_is_json_with_separate_streams(call: Call, root: Path) -> None:
    r = call("ExecCommand", cmd="echo out; echo err >&2")
    assert r.ok, r.content
    d = r.data
    assert d["disposition"] == "completed" and d["exit_status"] == 0 and d["signal"] is None
    assert d["stdout_preview"] == "out\n" and d["stderr_preview"] == "err\n"
    assert d["truncated"] is False and d["artifacts"] == []
    assert d["stdout_artifact"] is None and d["stderr_artifact"] is None
    assert d["cwd"] == str(root.resolve())
    assert isinstance(d["duration_ms"], int)
    # the model sees exactly this envelope, as JSON; no promotion fields are mixed in
    seen = json.loads(r.content)
    assert seen["disposition"] == "completed" and seen["stdout_preview"] == "out\n"
    assert "task_handle" not in seen and "initial_output_preview" not in seen


def test_nonzero_exit_is_an_ok_result(call: Call) -> None:
    r = call("ExecCommand", cmd="echo failing; exit 7")
    assert r.ok and r.error is None
    assert r.data["exit_status"] == 7


def test_runs_in_execution_root_and_workdir_inside_it(call: Call, root: Path) -> None:
    (root / "sub").mkdir()
    r = call("ExecCommand", cmd="pwd; cat /dev/stdin | wc -c", workdir="sub")
    assert r.ok
    lines = r.data["stdout_preview"].split()
    assert lines[0] == str((root / "sub").resolve())
    assert lines[1] == "0", "stdin must be /dev/null"


@pytest.mark.parametrize("workdir", ["..", "../..", "/", "sub/../../x"])
def test_workdir_escape_is_rejected(call: Call, root: Path, workdir: str) -> None:
    (root / "sub").mkdir()
    r = call("ExecCommand", cmd="touch escaped", workdir=workdir)
    assert not r.ok
    assert r.error and r.error["kind"] == "execution_root_violation"
    assert r.error["details"]["execution_root"] == str(root.resolve())
    assert r.error["recovery_hint"]
    assert '"kind": "execution_root_violation"' in r.content
    assert not (root.parent / "escaped").exists()


def test_symlink_escape_is_rejected(call: Call, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    r = call("ExecCommand", cmd="pwd", workdir="link")
    assert r.error and r.error["kind"] == "execution_root_violation"


def test_missing_workdir_and_shell_are_spawn_failures(call: Call) -> None:
    r = call("ExecCommand", cmd="pwd", workdir="nope")
    assert r.error and r.error["kind"] == "spawn_failed"
    assert r.error["recovery_hint"]
    r = call("ExecCommand", cmd="pwd", shell="/no/such/shell")
    assert r.error and r.error["kind"] == "spawn_failed"
    r = call("ExecCommand", cmd="pwd", shell="no-such-shell-xyz")
    assert r.error and r.error["kind"] == "spawn_failed"


def test_shell_and_login(call: Call) -> None:
    r = call("ExecCommand", cmd="echo $0", shell="/bin/sh")
    assert r.ok and r.data["stdout_preview"].strip() == "/bin/sh"
    r = call("ExecCommand", cmd="shopt -q login_shell && echo login || echo plain", login=True)
    assert r.data["stdout_preview"].strip() == "login"
    r = call("ExecCommand", cmd="shopt -q login_shell && echo login || echo plain")
    assert r.data["stdout_preview"].strip() == "plain"


def test_secrets_are_withheld_unless_passed_through(
    call: Call, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = {
        "OPENAI_API_KEY": "k1",
        "GITHUB_TOKEN": "k2",
        "AWS_SECRET": "k3",
        "DB_PASSWORD_FILE": "k4",
        "HOLON_CONTROL_TOKEN": "k5",
    }
    for k, v in secret.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLAIN_VALUE", "visible")
    r = call("ExecCommand", cmd="env")
    out = r.data["stdout_preview"]
    assert "PLAIN_VALUE=" not in out and "PATH=" in out  # core: the core names only
    for k in secret:
        assert f"{k}=" not in out, k
    ctx.config = {"execution": {"env": {"inherit": "all"}}}
    out = call("ExecCommand", cmd="env").data["stdout_preview"]
    assert "PLAIN_VALUE=visible" in out
    for k in secret:
        assert f"{k}=" not in out, k
    for cfg in (
        {"execution": {"env": {"pass": ["GITHUB_TOKEN"]}}},
        {"runtime": {"exec_env_passthrough": ["GITHUB_TOKEN"]}},  # the older key, still read
    ):
        ctx.config = cfg
        out = call("ExecCommand", cmd="env").data["stdout_preview"]
        assert "GITHUB_TOKEN=k2" in out and "OPENAI_API_KEY=" not in out
        b = call("ExecCommandBatch", commands=[{"cmd": "env"}])
        item = b.data["items"][0]["stdout_preview"]
        assert "GITHUB_TOKEN=k2" in item and "OPENAI_API_KEY=" not in item


def test_background_children_do_not_outlive_a_finished_command(
    call: Call, on_host: ToolContext
) -> None:
    r = call("ExecCommand", cmd="sleep 30 & echo bg=$!")
    assert r.ok and r.data["exit_status"] == 0
    pid = int(r.data["stdout_preview"].split("=")[1])
    assert _wait_gone(pid)
    assert any(w["kind"] == "background_processes_killed" for w in r.warnings)


def test_setsid_descendants_are_stopped_too(
    call: Call, tmp_path: Path, on_host: ToolContext
) -> None:
    pidfile = tmp_path / "escaped.pid"
    r = call("ExecCommand", cmd=f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & sleep 0.3")
    assert r.ok, r.content
    deadline = time.monotonic() + 3
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int(pidfile.read_text())
    assert _wait_gone(pid), "a setsid'd descendant outlived the call"


def test_large_output_keeps_head_and_tail_and_saves_everything(
    call: Call, ctx: ToolContext
) -> None:
    r = call("ExecCommand", cmd="seq 1 200000", max_output_tokens=500)
    assert r.ok
    real = "".join(f"{i}\n" for i in range(1, 200001))
    d = r.data
    assert d["truncated"] is True
    budget = 500 * 4
    out = d["stdout_preview"]
    assert out.startswith(real[: budget // 2 - 10])
    assert out.endswith(real[-(budget // 2 - 10) :])
    art = d["artifacts"][d["stdout_artifact"]]
    path = Path(art["path"])
    assert art["kind"] == "stdout" and path.read_text() == real
    assert path.parent == ctx.store.layout.runtime / "outputs"
    assert len(out) < budget + 400 and d["stderr_artifact"] is None and len(d["artifacts"]) == 1
    assert len(r.content) < 2 * budget + 1500
    assert not any((ctx.store.layout.runtime / "tasks").iterdir())


def test_output_that_fits_leaves_no_file(call: Call, ctx: ToolContext) -> None:
    r = call("ExecCommand", cmd="seq 1 10")
    assert not r.data["truncated"] and r.data["artifacts"] == []
    outputs = ctx.store.layout.runtime / "outputs"
    assert not outputs.exists() or not any(outputs.iterdir())
    assert not any((ctx.store.layout.runtime / "tasks").iterdir())


def test_output_cap_is_enforced_on_the_write_path(call: Call, ctx: ToolContext) -> None:
    cap = 1_000_000
    ctx.config = {"runtime": {"task_output_max_bytes": cap}}
    r = call(
        "ExecCommand", cmd="yes 0123456789012345678901234567890123456789", max_output_tokens=100
    )
    d = r.data
    assert any(w["kind"] == "output_limit" for w in r.warnings)
    assert d["output_bytes"] == cap
    saved = Path(d["artifacts"][d["stdout_artifact"]]["path"])
    assert saved.stat().st_size == cap  # not a byte over


def test_invalid_utf8_output_does_not_break_the_call(call: Call) -> None:
    r = call("ExecCommand", cmd=r"printf 'a\377b\n'")
    assert r.ok and r.data["stdout_preview"] == "a\ufffdb\n"


def test_budget_defaults_env_and_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLON_DEFAULT_TOOL_OUTPUT_TOKENS", raising=False)
    monkeypatch.delenv("HOLON_MAX_TOOL_OUTPUT_TOKENS", raising=False)
    assert output_budget_tokens({}) == 8000
    assert output_budget_tokens({}, 100_000) == 64_000
    cfg = {"runtime": {"default_tool_output_tokens": 1000, "max_tool_output_tokens": 2000}}
    assert output_budget_tokens(cfg) == 1000
    assert output_budget_tokens(cfg, 5000) == 2000
    monkeypatch.setenv("HOLON_DEFAULT_TOOL_OUTPUT_TOKENS", "300")
    assert output_budget_tokens(cfg) == 300
    monkeypatch.setenv("HOLON_MAX_TOOL_OUTPUT_TOKENS", "200")
    assert output_budget_tokens(cfg) == 200  # the default never exceeds the max
    assert output_budget_tokens(cfg, 999) == 200
    monkeypatch.setenv("HOLON_MAX_TOOL_OUTPUT_TOKENS", "1000000")
    assert output_budget_tokens({}, 10**7) == 64_000  # hard cap
    warnings: list[dict[str, object]] = []
    monkeypatch.setenv("HOLON_DEFAULT_TOOL_OUTPUT_TOKENS", "lots")
    assert output_budget_tokens({}, warnings=warnings) == 8000
    assert warnings and "HOLON_DEFAULT_TOOL_OUTPUT_TOKENS" in str(warnings[0]["message"])


def test_env_budget_applies_to_exec(call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLON_DEFAULT_TOOL_OUTPUT_TOKENS", "50")
    r = call("ExecCommand", cmd="seq 1 1000")
    assert r.data["truncated"] is True and r.data["output_budget_tokens"] == 50
    assert r.data["stdout_preview"].startswith("1\n2\n")
    monkeypatch.setenv("HOLON_MAX_TOOL_OUTPUT_TOKENS", "60")
    r = call("ExecCommand", cmd="seq 1 1000", max_output_tokens=10_000)
    assert r.data["output_budget_tokens"] == 60


# ---------------------------------------------------------------- promotion


@pytest.mark.slow
def test_a_long_command_is_promoted_at_the_yield(call: Call, ctx: ToolContext) -> None:
    start = time.monotonic()
    r = call("ExecCommand", cmd="echo started; sleep 30", yield_time_ms=400)
    elapsed = time.monotonic() - start
    assert r.ok, r.content
    d = json.loads(r.content)
    assert d["disposition"] == "promoted_to_task"
    assert elapsed < 10, "the call returns at the yield, not at the command's end"
    h = d["task_handle"]
    assert h["task_kind"] == "command_task" and h["status"] == "running"
    assert h["task_id"].startswith("task_")
    assert "exit_status" not in d and "stdout_preview" not in d
    assert "started" in d["initial_output_preview"]
    rec = tasks.read_task(ctx.store, h["task_id"])
    assert rec["promoted"] and rec["status"] == "running"
    # the same command again: the running task is reused
    again = call("ExecCommand", cmd="echo started; sleep 30", yield_time_ms=400)
    assert again.data["disposition"] == "already_running"
    assert again.data["task_handle"]["task_id"] == h["task_id"]
    assert again.data["command"]["cmd_digest"] == rec["command"]["cmd_digest"]
    other = call(
        "ExecCommand", cmd="echo started; sleep 30", yield_time_ms=300, duplicate_policy="start_new"
    )
    assert other.data["disposition"] == "promoted_to_task"
    assert other.data["task_handle"]["task_id"] != h["task_id"]
    for tid in (h["task_id"], other.data["task_handle"]["task_id"]):
        stop = tasks.task_stop(ctx.store, tid)
        assert stop["task"]["status"] == "cancelled"


def test_tty_commands_run_under_a_terminal(call: Call) -> None:
    r = call("ExecCommand", cmd="test -t 0 && test -t 1 && echo tty; echo err >&2", tty=True)
    assert r.ok, r.content
    assert "tty" in r.data["stdout_preview"] and "err" in r.data["stdout_preview"]
    assert r.data["stderr_preview"] == ""
    plain = call("ExecCommand", cmd="test -t 1 && echo tty || echo notty")
    assert plain.data["stdout_preview"].strip() == "notty"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"cmd": "  "}, "cmd"),
        ({"cmd": "true", "yield_time_ms": 0}, "yield_time_ms"),
        ({"cmd": "true", "max_output_tokens": -1}, "max_output_tokens"),
        ({}, "cmd"),
        ({"cmd": "true", "bogus": 1}, "bogus"),
        ({"cmd": "true", "duplicate_policy": "sometimes"}, "duplicate_policy"),
    ],
)
def test_bad_arguments(call: Call, args: dict[str, object], field: str) -> None:
    r = call("ExecCommand", **args)
    assert r.error and r.error["kind"] == "invalid_arguments"
    assert r.error["details"]["field"] == field


# -------------------------------------------------------------------- batch


def test_batch_runs_items_in_order_and_isolates_failures(
    call: Call, root: Path, on_host: ToolContext
) -> None:
    r = call(
        "ExecCommandBatch",
        commands=[
            {"cmd": "echo one > f.txt"},
            {"cmd": "cat f.txt; exit 2"},
            {"cmd": "true", "workdir": "/"},
            {"cmd": "echo sh=$$; sleep 30 & sleep 30", "yield_time_ms": 250},
            {"cmd": "echo last"},
        ],
    )
    assert r.ok, r.content
    items = r.data["items"]
    assert [it["status"] for it in items] == [
        "succeeded",
        "exited_nonzero",
        "failed",
        "timed_out",
        "succeeded",
    ]
    assert items[1]["stdout_preview"] == "one\n" and items[1]["exit_status"] == 2
    assert items[2]["error"]["kind"] == "execution_root_violation"
    assert r.data["summary"] == {"succeeded": 2, "exited_nonzero": 1, "timed_out": 1, "failed": 1}
    for n in range(1, 6):
        assert f"[{n}/5] $ " in r.content
    assert r.content.index("[1/5]") < r.content.index("[5/5]")
    pid = int(re.search(r"sh=(\d+)", items[3]["stdout_preview"]).group(1))  # type: ignore[union-attr]
    assert _wait_gone(pid)
    assert "Timed out after 250 ms" in r.content


@pytest.mark.slow
def test_batch_timeout_escalates_to_sigkill(call: Call, on_host: ToolContext) -> None:
    r = call(
        "ExecCommandBatch",
        commands=[{"cmd": "trap '' TERM; echo sh=$$; sleep 30; sleep 30", "yield_time_ms": 400}],
    )
    item = r.data["items"][0]
    assert item["status"] == "timed_out"
    pid = int(re.search(r"sh=(\d+)", item["stdout_preview"]).group(1))  # type: ignore[union-attr]
    assert _wait_gone(pid)


def test_batch_default_timeout_comes_from_config(call: Call, ctx: ToolContext) -> None:
    ctx.config = {"runtime": {"exec_timeout_ms": 300}}
    r = call("ExecCommandBatch", commands=[{"cmd": "sleep 10"}])
    item = r.data["items"][0]
    assert item["timed_out"] is True and item["timeout_ms"] == 300


def test_batch_rejects_tty_items_and_empty_lists(call: Call) -> None:
    r = call("ExecCommandBatch", commands=[{"cmd": "true", "tty": True}])
    assert r.error and r.error["kind"] == "invalid_arguments"
    assert r.error["details"]["field"] == "commands[0].tty"
    r = call("ExecCommandBatch", commands=[])
    assert r.error and r.error["details"]["field"] == "commands"


def test_batch_shares_the_output_budget(call: Call) -> None:
    r = call("ExecCommandBatch", commands=[{"cmd": "seq 1 100000"}, {"cmd": "seq 1 100000"}])
    assert all(it["truncated"] for it in r.data["items"])
    assert len(r.content) < 8000 * 4 + 2000


@pytest.mark.parametrize(
    ("sizes", "tty", "shares"),
    [
        ({"output": 10_000}, True, {"output": 1000}),  # a terminal's one stream
        ({"stdout": 600, "stderr": 400}, False, {"stdout": 1000, "stderr": 1000}),  # both fit
        ({"stdout": 5000, "stderr": 100}, False, {"stdout": 900, "stderr": 100}),
        ({"stdout": 100, "stderr": 5000}, False, {"stdout": 100, "stderr": 900}),
        ({"stdout": 5000, "stderr": 5000}, False, {"stdout": 500, "stderr": 500}),
    ],
)
def test_preview_shares_split_the_budget(
    sizes: dict[str, int], tty: bool, shares: dict[str, int]
) -> None:
    """Both streams fit: each may use the whole budget; otherwise stderr gets
    at least half (all of itself when smaller) and stdout the rest, so the
    two previews never exceed the budget together."""
    from holon_cli.tools.exec_command.finish import _preview_shares

    got = _preview_shares(1000, sizes, tty=tty)
    assert got == shares
    if not tty and sum(sizes.values()) > 1000:
        assert sum(got.values()) == 1000
