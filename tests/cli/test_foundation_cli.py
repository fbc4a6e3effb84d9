"""The foundation commands through real subprocesses: the --json envelope,
exit codes, stdin, tail, NO_COLOR and --help examples."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import pytest

BIN = Path(sys.executable).parent


def run(
    script_runner: Any, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> Any:
    import io

    full_env = {**os.environ, **(env or {})}
    return script_runner.run(
        ["holon", *args],
        stdin=io.StringIO(stdin) if stdin is not None else io.StringIO(""),
        env=full_env,
        print_result=False,
    )


def one_json(stdout: str) -> dict[str, Any]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected exactly one JSON line, got: {stdout!r}"
    return json.loads(lines[0])


def assert_ok_envelope(obj: dict[str, Any], command: str) -> dict[str, Any]:
    assert set(obj) == {"schema_version", "ok", "command", "data"}
    assert obj["schema_version"] == 1 and obj["ok"] is True and obj["command"] == command
    assert isinstance(obj["data"], dict)
    return obj["data"]


def assert_error_envelope(obj: dict[str, Any], command: str, kind: str) -> dict[str, Any]:
    assert set(obj) == {"schema_version", "ok", "command", "error"}
    assert obj["schema_version"] == 1 and obj["ok"] is False and obj["command"] == command
    err = obj["error"]
    assert {"kind", "message", "hint"} <= set(err)
    assert err["kind"] == kind and err["message"]
    assert isinstance(err["hint"], str)
    return err


def no_traceback(res: Any) -> None:
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout


def inbox_new(holon_home: Path, agent: str = "main") -> list[Path]:
    """Delivered messages: still in new/, or already ingested (enqueue ingests
    at once when the agent is free) with their body kept in cur/."""
    inbox = holon_home / "agents" / agent / ".holon" / "inbox"
    return sorted(p for d in ("new", "cur") for p in (inbox / d).glob("*.json"))


# -- basics --------------------------------------------------------------------


def test_version(script_runner: Any) -> None:
    from holon_cli import __version__

    res = run(script_runner, "--version")
    assert res.returncode == 0 and res.stdout.strip() == f"holon {__version__}"


def test_enqueue_prints_only_the_id(script_runner: Any, holon_home: Path) -> None:
    res = run(script_runner, "enqueue", "hello world")
    assert res.returncode == 0, res.stderr
    mid = res.stdout.strip()
    assert mid.startswith("msg_") and res.stdout == mid + "\n"
    [path] = inbox_new(holon_home)
    assert path.name == f"{mid}.json"
    assert json.loads(path.read_text())["body"] == {"type": "text", "text": "hello world"}


def test_enqueue_json_envelope(script_runner: Any, holon_home: Path) -> None:
    res = run(
        script_runner, "enqueue", "hi", "--json", "--priority", "next", "--origin", "channel:slack"
    )
    assert res.returncode == 0
    data = assert_ok_envelope(one_json(res.stdout), "enqueue")
    assert data["priority"] == "next" and data["trust"] == "untrusted_external"
    assert data["authority_class"] == "external_evidence" and data["kind"] == "channel_event"
    assert data["source_refs"] == {"channel_id": "slack"}
    [path] = inbox_new(holon_home)
    assert json.loads(path.read_text()) == data


def test_enqueue_reads_stdin_with_dash(script_runner: Any, holon_home: Path) -> None:
    res = run(script_runner, "enqueue", "-", stdin="line one\nline two\n")
    assert res.returncode == 0, res.stderr
    [path] = inbox_new(holon_home)
    assert json.loads(path.read_text())["body"]["text"] == "line one\nline two\n"
    # piped input with no TEXT at all reads stdin as well
    res = run(script_runner, "enqueue", "--priority", "background", stdin="piped")
    assert res.returncode == 0
    texts = sorted(json.loads(p.read_text())["body"]["text"] for p in inbox_new(holon_home))
    assert texts == ["line one\nline two\n", "piped"]


def test_enqueue_json_body_from_stdin(script_runner: Any, holon_home: Path) -> None:
    res = run(
        script_runner,
        "enqueue",
        "-",
        "--json-body",
        "--origin",
        "webhook:github",
        "--json",
        stdin='{"ref": "main"}',
    )
    assert res.returncode == 0
    data = assert_ok_envelope(one_json(res.stdout), "enqueue")
    assert data["body"] == {"type": "json", "value": {"ref": "main"}}
    assert data["trust"] == "trusted_integration"


@pytest.mark.parametrize("garbage", ["{bad", "", "{'single': 'quotes'}", "[1, 2"])
def test_enqueue_garbage_json_body(script_runner: Any, holon_home: Path, garbage: str) -> None:
    res = run(script_runner, "enqueue", "-", "--json-body", stdin=garbage)
    assert res.returncode == 2
    assert "not valid JSON" in res.stderr and "Hint:" in res.stderr
    no_traceback(res)
    assert inbox_new(holon_home) == []
    res = run(script_runner, "enqueue", "-", "--json-body", "--json", stdin=garbage)
    assert res.returncode == 2
    err = assert_error_envelope(one_json(res.stdout), "enqueue", "usage_error")
    assert "not valid JSON" in err["message"] and err["hint"]


def test_empty_message_is_a_usage_error(script_runner: Any, holon_home: Path) -> None:
    res = run(script_runner, "enqueue", "-", stdin="  \n")
    assert res.returncode == 2 and "empty" in res.stderr
    assert inbox_new(holon_home) == []


# -- usage errors (exit 2) -------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["enqueue", "--bogus", "x"], "No such option"),
        (["--frobnicate"], "No such option"),
        (["nosuchcommand"], "No such command"),
        (["agent", "explode"], "No such command"),
        (["tail", "--limit", "-1"], "-1"),
        (["tail", "--since", "abc"], "abc"),
        (["tail", "--limit"], "requires an argument"),
        (["enqueue", "x", "--priority", "urgent"], "interject, next, normal, background"),
        (["enqueue", "x", "--kind", "shout"], "operator_prompt"),
        (["enqueue", "x", "--origin", "martian"], "webhook:SOURCE"),
        (["enqueue", "x", "--origin", "timer"], "timer:"),
        (["enqueue", "x", "--agent", "../etc"], "invalid agent id"),
        (["completion", "powershell"], "powershell"),
        (["agent", "create"], "Missing argument"),
    ],
)
def test_usage_errors_exit_2(
    script_runner: Any, holon_home: Path, args: list[str], needle: str
) -> None:
    res = run(script_runner, *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert needle in res.stderr
    no_traceback(res)
    assert inbox_new(holon_home) == []


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "x", "--bogus", "--json"],
        ["enqueue", "x", "--priority", "urgent", "--json"],
        ["status", "--agent", "a/b", "--json"],
    ],
)
def test_usage_errors_as_json(script_runner: Any, args: list[str]) -> None:
    res = run(script_runner, *args)
    assert res.returncode == 2
    assert_error_envelope(one_json(res.stdout), args[0], "usage_error")
    no_traceback(res)


def test_unusable_home_is_a_clear_runtime_error(script_runner: Any, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    res = run(script_runner, "enqueue", "hi", env={"HOLON_HOME": str(not_a_dir)})
    assert res.returncode == 1 and "Error:" in res.stderr and str(not_a_dir) in res.stderr
    no_traceback(res)
    res = run(script_runner, "enqueue", "hi", "--json", env={"HOLON_HOME": str(not_a_dir)})
    assert res.returncode == 1
    assert_error_envelope(one_json(res.stdout), "enqueue", "io_error")


# -- not found (3), rejected (4), corrupt (1) ------------------------------------


def test_unknown_agent_exits_3_and_is_not_created(script_runner: Any, holon_home: Path) -> None:
    res = run(script_runner, "enqueue", "hi", "--agent", "ghost")
    assert res.returncode == 3
    assert "unknown agent 'ghost'" in res.stderr and "holon agent create ghost" in res.stderr
    assert not (holon_home / "agents" / "ghost").exists()
    res = run(script_runner, "status", "--agent", "ghost", "--json")
    assert res.returncode == 3
    assert_error_envelope(one_json(res.stdout), "status", "not_found")
    for args in (
        ["agent", "stop", "ghost"],
        ["tail", "--agent", "ghost"],
        ["agent", "path", "ghost"],
    ):
        assert run(script_runner, *args).returncode == 3


def test_default_agent_auto_created_but_holon_agent_id_respected(
    script_runner: Any, holon_home: Path
) -> None:
    res = run(script_runner, "enqueue", "hi", env={"HOLON_AGENT_ID": "ops"})
    assert res.returncode == 0
    assert inbox_new(holon_home, "ops") and not (holon_home / "agents" / "main").exists()
    res = run(script_runner, "agent", "list", "--json")
    data = assert_ok_envelope(one_json(res.stdout), "agent list")
    assert [a["agent_id"] for a in data["agents"]] == ["ops"]
    assert data["agents"][0]["kind"] == "default"


def test_stopped_agent_rejects_enqueue_with_exit_4(script_runner: Any, holon_home: Path) -> None:
    assert run(script_runner, "agent", "create", "w").returncode == 0
    assert run(script_runner, "enqueue", "before", "--agent", "w").returncode == 0
    res = run(script_runner, "agent", "stop", "w", "--json")
    data = assert_ok_envelope(one_json(res.stdout), "agent stop")
    assert data["status"] == "stopped" and data["changed"] is True
    res = run(script_runner, "enqueue", "during", "--agent", "w")
    assert res.returncode == 4 and "stopped" in res.stderr and "holon agent start" in res.stderr
    res = run(script_runner, "enqueue", "during", "--agent", "w", "--json")
    assert res.returncode == 4
    assert_error_envelope(one_json(res.stdout), "enqueue", "agent_stopped")
    assert len(inbox_new(holon_home, "w")) == 1  # nothing queued while stopped
    st = one_json(run(script_runner, "status", "--agent", "w", "--json").stdout)["data"]
    assert st["status"] == "stopped" and st["pending"] == 1 and st["lifecycle_hint"]
    assert run(script_runner, "agent", "start", "w").returncode == 0
    assert run(script_runner, "enqueue", "after", "--agent", "w").returncode == 0
    assert len(inbox_new(holon_home, "w")) == 2


def test_duplicate_agent_exits_4(script_runner: Any) -> None:
    assert run(script_runner, "agent", "create", "dup").returncode == 0
    res = run(script_runner, "agent", "create", "dup", "--json")
    assert res.returncode == 4
    err = assert_error_envelope(one_json(res.stdout), "agent create", "rejected")
    assert "already exists" in err["message"]


def test_bad_template_fails_closed(script_runner: Any, holon_home: Path, tmp_path: Path) -> None:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "AGENTS.md").write_text("# T\n")
    (tpl / "skills.json").write_text('{"skill_refs": ["missing"]}')
    res = run(script_runner, "agent", "create", "bad", "--template", str(tpl))
    assert res.returncode == 4 and "SKILL.md" in res.stderr
    no_traceback(res)
    assert os.listdir(holon_home / "agents") == []


def _corrupt_line(path: Path, line_no: int) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = b'{"v":1,"event_seq":'
    path.write_bytes(b"\n".join(lines))


def test_corrupt_ledger_exits_1_with_file_and_line(script_runner: Any, holon_home: Path) -> None:
    run(script_runner, "agent", "stop", "main")
    run(script_runner, "agent", "start", "main")
    events = holon_home / "agents" / "main" / ".holon" / "ledger" / "events.jsonl"
    _corrupt_line(events, 2)
    # tail is a view: it skips the damaged line and says where it is
    res = run(script_runner, "tail")
    assert res.returncode == 0
    assert f"{events}:2" in res.stderr and "holon home check" in res.stderr
    no_traceback(res)
    res = run(script_runner, "home", "check")
    assert res.returncode == 1
    assert f"PROBLEM {events}:2: not valid JSON" in res.stdout
    no_traceback(res)
    res = run(script_runner, "home", "check", "--json")
    assert res.returncode == 1
    err = assert_error_envelope(one_json(res.stdout), "home check", "corrupt_state")
    assert err["details"]["problems"] == [
        {"path": str(events), "line": 2, "message": err["details"]["problems"][0]["message"]}
    ]


def test_corrupt_queue_ledger_fails_status_as_json(script_runner: Any, holon_home: Path) -> None:
    run(script_runner, "enqueue", "x")
    qpath = holon_home / "agents" / "main" / ".holon" / "ledger" / "queue.jsonl"
    qpath.write_bytes(
        b'{"v":1,"op":"admitted"\n{"v":1,"op":"status","message_id":"m","status":"processed"}\n'
    )
    res = run(script_runner, "status", "--json")
    assert res.returncode == 1
    err = assert_error_envelope(one_json(res.stdout), "status", "corrupt_state")
    assert f"{qpath}:1" in err["message"]
    no_traceback(res)


def test_newer_record_version_is_a_clear_error(script_runner: Any, holon_home: Path) -> None:
    run(script_runner, "home", "init")
    events = holon_home / "agents" / "main" / ".holon" / "ledger" / "events.jsonl"
    with open(events, "a") as f:
        f.write('{"v":99,"event_seq":2,"kind":"future"}\n')
    res = run(script_runner, "tail")
    assert res.returncode == 1 and "newer" in res.stderr and "upgrade" in res.stderr
    no_traceback(res)


def test_home_check_torn_tail_is_a_note(script_runner: Any, holon_home: Path) -> None:
    run(script_runner, "enqueue", "x")
    events = holon_home / "agents" / "main" / ".holon" / "ledger" / "events.jsonl"
    with open(events, "ab") as f:
        f.write(b'{"v":1,"event_seq":2,"ki')
    res = run(script_runner, "home", "check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("ok:")
    assert "torn last line" in res.stderr and str(events) in res.stderr
    data = assert_ok_envelope(
        one_json(run(script_runner, "home", "check", "--json").stdout), "home check"
    )
    assert data["ok"] is True and data["problems"] == [] and len(data["notes"]) == 1
    # the next append repairs the tail and the ledger is whole again
    run(script_runner, "agent", "stop", "main")
    res = run(script_runner, "home", "check", "--json")
    data = one_json(res.stdout)["data"]
    assert data["notes"] == [] and data["ok"] is True
    seqs = [json.loads(x)["event_seq"] for x in events.read_text().splitlines()]
    assert seqs == list(range(1, len(seqs) + 1)) and b'"ki\n' not in events.read_bytes()


def test_home_init_path_and_check(script_runner: Any, holon_home: Path) -> None:
    res = run(script_runner, "home", "check", "--json")
    assert one_json(res.stdout)["data"]["exists"] is False
    data = assert_ok_envelope(
        one_json(run(script_runner, "home", "init", "--json").stdout), "home init"
    )
    seeded = data.pop("templates")
    assert data == {
        "home": str(holon_home),
        "default_agent": "main",
        "agent_home": str(holon_home / "agents" / "main"),
    }
    assert [t["status"] for t in seeded] == ["created", "created"]
    assert run(script_runner, "home", "init").returncode == 0  # idempotent
    assert run(script_runner, "home", "path").stdout.strip() == str(holon_home)
    assert run(script_runner, "agent", "path").stdout.strip() == str(holon_home / "agents" / "main")
    data = one_json(run(script_runner, "home", "check", "--json").stdout)["data"]
    assert data["ok"] is True and data["checked"]["agents"] == 1


def test_agent_create_list_status_json(script_runner: Any, holon_home: Path) -> None:
    data = assert_ok_envelope(
        one_json(run(script_runner, "agent", "create", "rev", "--json").stdout), "agent create"
    )
    assert data["agent_id"] == "rev" and data["agent_home"] == str(holon_home / "agents" / "rev")
    assert data["identity"]["kind"] == "named" and data["identity"]["visibility"] == "public"
    res = run(script_runner, "agent", "list")
    assert res.returncode == 0 and "rev" in res.stdout
    data = assert_ok_envelope(
        one_json(run(script_runner, "agent", "status", "rev", "--json").stdout), "agent status"
    )
    assert data["agent_id"] == "rev" and data["pending"] == 0
    assert data["identity"]["profile_preset"] == "public_named"


# -- tail ----------------------------------------------------------------------


def _make_events(script_runner: Any, n_pairs: int) -> None:
    for _ in range(n_pairs):
        run(script_runner, "agent", "stop", "main")
        run(script_runner, "agent", "start", "main")


def test_tail_jsonl_since_and_limit(script_runner: Any) -> None:
    _make_events(script_runner, 3)  # events 1..7
    res = run(script_runner, "tail", "--jsonl")
    assert res.returncode == 0
    objs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["event_seq"] for o in objs] == list(range(1, 8))
    assert all(o["v"] == 1 and o["agent_id"] == "main" for o in objs)

    def seqs(*a: str) -> list[int]:
        out = run(script_runner, "tail", "--jsonl", *a).stdout
        return [json.loads(x)["event_seq"] for x in out.splitlines()]

    assert seqs("--limit", "3") == [5, 6, 7]
    assert seqs("--limit", "0") == []
    assert seqs("--since", "4") == [5, 6, 7]
    assert seqs("--since", "2", "--limit", "2") == [3, 4]
    assert seqs("--since", "7") == []
    assert seqs("--since", "100") == []
    human = run(script_runner, "tail", "-n", "2").stdout.splitlines()
    assert len(human) == 2 and "agent_state_changed" in human[0] and human[1].split()[0] == "7"


# -- rendering -------------------------------------------------------------------


def _run_on_tty(args: list[str], env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    proc = None
    try:
        proc = subprocess.Popen(
            [str(BIN / "holon"), *args],
            stdout=slave,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(slave)
        chunks = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=20)
    finally:
        os.close(master)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    return b"".join(chunks).decode("utf-8", "replace")


def test_no_color_gives_plain_output_on_a_terminal(script_runner: Any) -> None:
    run(script_runner, "home", "init")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", COLUMNS="120")
    env.pop("FORCE_COLOR", None)
    colored = _run_on_tty(["status"], env)
    assert "\x1b[" in colored  # rich styles on a terminal
    plain = _run_on_tty(["status"], {**env, "NO_COLOR": "1"})
    assert "\x1b[" not in plain
    assert "agent" in plain and "main" in plain and "awake_idle" in plain


def test_piped_output_is_plain(script_runner: Any) -> None:
    res = run(script_runner, "status")
    assert res.returncode == 0 and "\x1b[" not in res.stdout
    assert res.stdout.splitlines()[0].split() == ["agent", "main"]


# -- help --------------------------------------------------------------------------


def _walk(cmd: click.Command, path: tuple[str, ...], ctx: click.Context) -> list[tuple[str, ...]]:
    out = [path]
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            out += _walk(sub, (*path, name), click.Context(sub, info_name=name, parent=ctx))
    return out


def all_command_paths() -> list[tuple[str, ...]]:
    from holon_cli.cli import COMMANDS, cli

    ctx = click.Context(cli, info_name="holon")
    paths = _walk(cli, (), ctx)
    # every registered command loads: a missing module is a bug, never hidden
    tops = {p[0] for p in paths if p}
    assert tops == set(COMMANDS)
    assert {"enqueue", "status", "tail", "agent", "home", "completion"} <= tops
    return paths


def test_every_command_has_help_with_an_example(script_runner: Any) -> None:
    paths = all_command_paths()
    assert len(paths) > 10

    def check(path: tuple[str, ...]) -> tuple[tuple[str, ...], int, str]:
        res = run(script_runner, *path, "--help")
        return path, res.returncode, res.stdout

    # in-process runs swap sys.stdout and os.environ: one at a time
    results = [check(p) for p in paths]
    missing = [
        " ".join(("holon", *p)) for p, code, out in results if code != 0 or "Example" not in out
    ]
    assert not missing, f"commands without an Example in --help: {missing}"
    for path, _, out in results:
        assert out.startswith("Usage: holon"), path
