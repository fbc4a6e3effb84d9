"""`holon home check` validates structure (record schemas, config.yaml, the
home itself) and every other command fails cleanly on the same damage: exit
1, a message naming file (and line), no traceback. Also: permissions of the
home and its content files, and the space used by `.holon/outputs/`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() below runs in-process
from inprocess_cli import run as run_holon

REPO = Path(__file__).resolve().parents[2]
MODEL = f"scripted:{REPO / 'examples' / 'hello.yaml'}"


def holon(*args: str, env: dict[str, str] | None = None) -> Any:
    """Run `holon` (in-process unless the suite says otherwise)."""
    import io

    return run_holon(*args, stdin=io.StringIO(""), env={**os.environ, **(env or {})})


def clean_failure(res: Any, code: int, *needles: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode == code, out
    assert "Traceback" not in out, out
    for n in needles:
        assert n in out, (n, out)


def one_json(stdout: str) -> dict[str, Any]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, stdout
    obj: dict[str, Any] = json.loads(lines[0])
    return obj


@pytest.fixture
def agent(holon_home: Path) -> Path:
    res = holon("enqueue", "hello")
    assert res.returncode == 0, res.stderr
    return holon_home / "agents" / "main"


def _check_problem(needle_path: Path, line: int | None, *words: str) -> dict[str, Any]:
    res = holon("home", "check", "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    err = one_json(res.stdout)["error"]
    probs = [p for p in err["details"]["problems"] if p["path"] == str(needle_path)]
    assert probs, err["details"]["problems"]
    assert probs[0]["line"] == line
    for w in words:
        assert w in probs[0]["message"], probs[0]
    human = holon("home", "check")
    where = f"{needle_path}:{line}" if line else str(needle_path)
    clean_failure(human, 1, f"PROBLEM {where}")
    return probs[0]


# ------------------------------------------------- record schemas (issue 14.7)


def test_admitted_record_without_message(agent: Path) -> None:
    qpath = agent / ".holon" / "ledger" / "queue.jsonl"
    with open(qpath, "a") as f:
        f.write('{"v":1,"op":"admitted","seq":9}\n')
    n = len(qpath.read_text().splitlines())
    _check_problem(qpath, n, "message")
    for args in (("status",), ("turn", "--model", MODEL), ("enqueue", "more"), ("tick",)):
        res = holon(*args)
        if args[0] == "enqueue" and res.returncode == 0:
            continue  # enqueue only writes the inbox: nothing to read back
        clean_failure(res, 1, str(qpath))


def test_agent_record_without_state(agent: Path) -> None:
    path = agent / ".holon" / "state" / "agent.json"
    rec = json.loads(path.read_text())
    del rec["state"]
    path.write_text(json.dumps(rec))
    _check_problem(path, None, "state")
    for args in (
        ("status",),
        ("turn", "--model", MODEL),
        ("agent", "stop", "main"),
    ):
        clean_failure(holon(*args), 1, str(path), "state")
    # agent list lists the home, the damaged agent marked (issue 31 item 18)
    clean_failure(holon("agent", "list"), 0, str(path), "state", "damaged")
    res = holon("status", "--json")
    err = one_json(res.stdout)["error"]
    assert err["kind"] == "corrupt_state" and str(path) in err["message"]


def test_string_offset_in_queue_snapshot(agent: Path) -> None:
    holon("enqueue", "second")
    assert holon("turn", "--model", MODEL).returncode == 0  # the snapshot exists after a turn
    path = agent / ".holon" / "state" / "queue.json"
    snap = json.loads(path.read_text())
    snap["offset"] = "twelve"
    path.write_text(json.dumps(snap))
    _check_problem(path, None, "offset")
    clean_failure(holon("status"), 1, str(path), "offset")


def test_deleted_agent_record_says_so(holon_home: Path) -> None:
    assert holon("agent", "create", "bob").returncode == 0
    record = holon_home / "agents" / "bob" / ".holon" / "state" / "agent.json"
    record.unlink()
    res = holon("agent", "create", "bob")
    clean_failure(res, 1, str(record), "missing")
    assert "already exists" not in res.stderr
    clean_failure(holon("status", "--agent", "bob"), 1, str(record), "missing")
    _check_problem(record, None, "missing")


def test_bad_inbox_envelope_is_a_problem(agent: Path) -> None:
    bad = agent / ".holon" / "inbox" / "new" / "msg_zz.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text(json.dumps({"id": "msg_zz", "priority": ["next"], "body": {}}))
    _check_problem(bad, None, "priority")


# --------------------------------------------- config and home (issue 8.11)


def test_home_check_validates_config(holon_home: Path) -> None:
    holon("home", "init")
    (holon_home / "config.yaml").write_text('runtime:\n  provider_timeout_s: "30"\n')
    _check_problem(holon_home / "config.yaml", None, "runtime.provider_timeout_s", "number")
    (holon_home / "config.yaml").write_text("model: [unclosed\n")
    _check_problem(holon_home / "config.yaml", None, "invalid YAML")


def test_bad_config_value_is_a_usage_error_naming_the_key(holon_home: Path) -> None:
    holon("enqueue", "x")
    (holon_home / "config.yaml").write_text('runtime:\n  provider_timeout_s: "30"\n')
    res = holon("turn", "--model", "scripted:/nonexistent.yaml")
    clean_failure(res, 2, "runtime.provider_timeout_s", "without quotes")


def test_holon_home_pointing_at_a_file(tmp_path: Path) -> None:
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    env = {"HOLON_HOME": str(f)}
    res = holon("home", "check", env=env)
    clean_failure(res, 1, "is a file, not a folder")
    for args in (("home", "init"), ("enqueue", "x"), ("status",)):
        res = holon(*args, env=env)
        clean_failure(res, 1, "is a file, not a folder")
        assert "File exists" not in res.stderr and "disk has space" not in res.stderr


# ------------------------------------------- permissions (issue 14.9)


def test_home_is_private_and_content_files_are_0600(holon_home: Path) -> None:
    old = os.umask(0o022)
    try:
        assert holon("enqueue", "secret text").returncode == 0
        assert holon("turn", "--model", MODEL).returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(holon_home.stat().st_mode) == 0o700
    runtime = holon_home / "agents" / "main" / ".holon"
    content = [
        *runtime.glob("ledger/*.jsonl"),
        *runtime.glob("state/*.json"),
        *runtime.glob("inbox/*/*.json"),
    ]
    assert any(p.parent.name == "ledger" for p in content)
    for p in content:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    # a home someone made readable for others is a note, not a problem
    holon_home.chmod(0o755)
    data = one_json(holon("home", "check", "--json").stdout)["data"]
    assert any("chmod 700" in n["message"] for n in data["notes"])


# ---------------------------------------------- outputs space (issue 13.6)


def test_home_check_reports_outputs_space(agent: Path) -> None:
    out = agent / ".holon" / "outputs"
    out.mkdir(parents=True, exist_ok=True)
    (out / "exec-1.log").write_bytes(b"x" * 3000)
    (out / "exec-2.log").write_bytes(b"y" * 1000)
    data = one_json(holon("home", "check", "--json").stdout)["data"]
    assert data["outputs"]["bytes"] == 4000 and data["outputs"]["files"] == 2
    assert data["outputs"]["agents"]["main"]["path"] == str(out)
    res = holon("home", "check")
    assert res.returncode == 0 and "command outputs and task logs use 3.9 KiB" in res.stdout
