"""ExecCommand and ExecCommandBatch: real subprocesses in a temp execution root."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

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


def test_success_returns_exit_code_and_combined_output(call: Call, root: Path) -> None:
    r = call("ExecCommand", cmd="echo out; echo err >&2")
    assert r.ok, r.content
    d = r.data
    assert d["exit_code"] == 0 and d["exit_status"] == 0 and d["disposition"] == "completed"
    assert d["timed_out"] is False and d["truncated"] is False and d["full_output_path"] is None
    assert d["output"] == "out\nerr\n"
    assert d["output_chars"] == len("out\nerr\n")
    assert d["cwd"] == str(root.resolve())
    assert isinstance(d["duration_ms"], int)
    assert "Exit code 0" in r.content and "out\nerr" in r.content


def test_nonzero_exit_is_an_ok_result(call: Call) -> None:
    r = call("ExecCommand", cmd="echo failing; exit 7")
    assert r.ok and r.error is None
    assert r.data["exit_code"] == 7
    assert "Exit code 7" in r.content


def test_runs_in_execution_root_and_workdir_inside_it(call: Call, root: Path) -> None:
    (root / "sub").mkdir()
    r = call("ExecCommand", cmd="pwd; cat /dev/stdin | wc -c", workdir="sub")
    assert r.ok
    lines = r.data["output"].split()
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
    assert r.ok and r.data["output"].strip() == "/bin/sh"
    r = call("ExecCommand", cmd="shopt -q login_shell && echo login || echo plain", login=True)
    assert r.data["output"].strip() == "login"
    r = call("ExecCommand", cmd="shopt -q login_shell && echo login || echo plain")
    assert r.data["output"].strip() == "plain"


def test_timeout_kills_the_whole_process_group(call: Call) -> None:
    start = time.monotonic()
    r = call("ExecCommand", cmd="sleep 30 & echo bg=$!; echo sh=$$; sleep 30", yield_time_ms=400)
    elapsed = time.monotonic() - start
    assert r.ok, r.content
    assert r.data["timed_out"] is True
    assert r.data["signal"] in ("SIGTERM", "SIGKILL")
    assert elapsed < 5
    pids = {k: int(v) for k, v in re.findall(r"(bg|sh)=(\d+)", r.data["output"])}
    assert set(pids) == {"bg", "sh"}, r.data["output"]
    # the background sleep outlived nothing: the whole group was killed
    deadline = time.monotonic() + 2
    while not all(_gone(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_gone(p) for p in pids.values())
    assert "Timed out after 400 ms" in r.content and "bg=" in r.content


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(call: Call) -> None:
    r = call("ExecCommand", cmd="trap '' TERM; echo sh=$$; sleep 30; sleep 30", yield_time_ms=300)
    assert r.data["timed_out"] is True
    pid = int(re.search(r"sh=(\d+)", r.data["output"]).group(1))  # type: ignore[union-attr]
    assert _gone(pid)


def test_background_children_do_not_outlive_a_finished_command(call: Call) -> None:
    r = call("ExecCommand", cmd="sleep 30 & echo bg=$!")
    assert r.ok and r.data["exit_code"] == 0 and not r.data["timed_out"]
    pid = int(r.data["output"].split("=")[1])
    deadline = time.monotonic() + 2
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(pid)
    assert any(w["kind"] == "background_processes_killed" for w in r.warnings)


def test_default_timeout_comes_from_config(call: Call, ctx: ToolContext) -> None:
    ctx.config = {"runtime": {"exec_timeout_ms": 300}}
    r = call("ExecCommand", cmd="sleep 10")
    assert r.data["timed_out"] is True and r.data["timeout_ms"] == 300


def test_large_output_keeps_head_and_tail_and_saves_everything(
    call: Call, ctx: ToolContext
) -> None:
    r = call("ExecCommand", cmd="seq 1 200000", max_output_tokens=500)
    assert r.ok
    real = "".join(f"{i}\n" for i in range(1, 200001))
    d = r.data
    assert d["truncated"] is True
    assert d["output_chars"] == len(real)
    budget = 500 * 4
    head, tail = budget // 2, budget - budget // 2
    out = d["output"]
    assert out.startswith(real[:head])
    assert out.endswith(real[-tail:])
    omitted = len(real) - head - tail
    assert d["omitted_chars"] == omitted
    path = Path(d["full_output_path"])
    assert f"{omitted} chars omitted" in out and str(path) in out
    assert path.read_text() == real
    assert path.parent == ctx.store.layout.runtime / "outputs"
    assert path.name.startswith("turn_test-")
    assert len(r.content) < budget + 1000


def test_output_that_fits_leaves_no_file(call: Call, ctx: ToolContext) -> None:
    r = call("ExecCommand", cmd="seq 1 10")
    assert not r.data["truncated"] and r.data["full_output_path"] is None
    outputs = ctx.store.layout.runtime / "outputs"
    assert not outputs.exists() or not any(outputs.iterdir())


def test_invalid_utf8_output_does_not_break_the_call(call: Call) -> None:
    r = call("ExecCommand", cmd=r"printf 'a\377b\n'")
    assert r.ok and r.data["output"] == "a\ufffdb\n"


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
    assert r.data["output"].startswith("1\n2\n")
    monkeypatch.setenv("HOLON_MAX_TOOL_OUTPUT_TOKENS", "60")
    r = call("ExecCommand", cmd="seq 1 1000", max_output_tokens=10_000)
    assert r.data["output_budget_tokens"] == 60


def test_tty_and_accepts_input_are_unsupported(call: Call, root: Path) -> None:
    for arg in ("tty", "accepts_input"):
        r = call("ExecCommand", cmd="touch ran", **{arg: True})
        assert r.error and r.error["kind"] == "unsupported"
        assert r.error["details"]["field"] == arg
        assert "background" in r.error["message"]
    assert not (root / "ran").exists()
    assert call("ExecCommand", cmd="true", tty=False, accepts_input=False).ok


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"cmd": "  "}, "cmd"),
        ({"cmd": "true", "yield_time_ms": 0}, "yield_time_ms"),
        ({"cmd": "true", "max_output_tokens": -1}, "max_output_tokens"),
        ({}, "cmd"),
        ({"cmd": "true", "bogus": 1}, "bogus"),
    ],
)
def test_bad_arguments(call: Call, args: dict[str, object], field: str) -> None:
    r = call("ExecCommand", **args)
    assert r.error and r.error["kind"] == "invalid_arguments"
    assert r.error["details"]["field"] == field


def test_batch_runs_items_in_order_and_isolates_failures(call: Call, root: Path) -> None:
    r = call(
        "ExecCommandBatch",
        commands=[
            {"cmd": "echo one > f.txt"},
            {"cmd": "cat f.txt; exit 2"},
            {"cmd": "true", "workdir": "/"},
            {"cmd": "sleep 5", "yield_time_ms": 200},
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
    assert items[1]["output"] == "one\n" and items[1]["exit_code"] == 2
    assert items[2]["error"]["kind"] == "execution_root_violation"
    assert r.data["summary"] == {"succeeded": 2, "exited_nonzero": 1, "timed_out": 1, "failed": 1}
    for n in range(1, 6):
        assert f"[{n}/5] $ " in r.content
    assert r.content.index("[1/5]") < r.content.index("[5/5]")


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
