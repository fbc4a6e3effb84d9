"""Issue 36 item 2: every command a hint names exists, with the options it
names, and the repair hints fix the state they describe.

The walk reads every backquoted ``holon ...`` in the source (hints, error
messages, docstrings shown in ``--help``) and resolves it against the click
group: each command word must be a command, each ``--option`` one of its
options. Placeholders (``{agent_id}``, ``ID``, ``<id>``, ``...``) end the walk
of that hint. The damage probes (``test_home_damage_table.py``,
``test_home_damage_new_kinds.py``) run the repair hints (``holon home check
--repair``) over every damage and check the damage is gone; the other
repair hints get a case of their own below.
"""

from __future__ import annotations

import io
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import click
import pytest
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

SRC = Path(__file__).resolve().parents[2] / "holon_cli"
HINT = re.compile(r"`(holon(?: [^`\n]+)?)`")
# shown in help text as what a user types, not commands to run
NOT_COMMANDS = {"holon ARGS", "holon agent nosuch <TAB>", "holon tail -f | head -1"}


def holon(*args: str) -> Any:
    return run_holon(*args, stdin=io.StringIO(""), env=dict(os.environ))


def hints() -> list[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        for m in HINT.finditer(text):
            out.add((m.group(1), f"{path.relative_to(SRC.parent)}"))
    return sorted(out)


def _group() -> click.Group:
    from holon_cli.cli.group import cli

    return cli


def resolve(hint: str) -> str | None:
    """Why ``hint`` names no real command (None: it does)."""
    words = hint.split()[1:]
    cmd: click.Command = _group()
    ctx = click.Context(cmd, info_name="holon")
    path = ["holon"]
    for w in words:
        if w.startswith("-") and w != "-":  # `-`: standard input, an argument
            name = w.split("=", 1)[0]
            opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
            opts |= {"--help", "-h"}
            if name not in opts:
                return f"`{' '.join(path)}` has no option {name}"
            continue
        if isinstance(cmd, click.Group):
            if "|" in w:  # `holon daemon start|stop|status`
                bad = [v for v in w.split("|") if cmd.get_command(ctx, v) is None]
                return f"`{' '.join(path)}` has no command {bad}" if bad else None
            sub = cmd.get_command(ctx, w)
            if sub is None:
                if not re.fullmatch(r"[a-z][a-z-]*", w):
                    return None  # a placeholder: the rest is arguments
                return f"`{' '.join(path)}` has no command {w!r}"
            cmd = sub
            ctx = click.Context(cmd, info_name=w, parent=ctx)
            path.append(w)
            continue
        # an argument (or a placeholder): options may still follow
    return None


@pytest.mark.parametrize(("hint", "where"), hints())
def test_every_hinted_command_exists(hint: str, where: str) -> None:
    if hint in NOT_COMMANDS:
        return
    why = resolve(hint)
    assert why is None, f"{where}: {hint!r}: {why}"


def test_the_walk_sees_the_repair_hints() -> None:
    found = {h for h, _ in hints()}
    assert {"holon home check --repair", "holon memory rebuild"} <= found


# ------------------------------------------------- repair hints that repair


@pytest.mark.parametrize("damage", ["fts_dropped", "another_database", "garbage"])
def test_memory_rebuild_rebuilds_an_index_of_the_wrong_schema(
    holon_home: Path, damage: str
) -> None:
    """The probe: a memory index whose `fts` table is gone (or another
    SQLite database in its place) crashed `memory search|get|rebuild`; the
    hint names `holon memory rebuild`, which must rebuild it."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.memory.search import index_path
    from holon_cli.store.memory_index import index_problem

    assert holon("agent", "create", "main").returncode == 0
    store = open_agent("main")
    (store.layout.home / "memory").mkdir(exist_ok=True)
    (store.layout.home / "memory" / "self.md").write_text("the deploy uses blue green releases\n")
    found = holon("memory", "search", "blue green", "--json")
    assert found.returncode == 0 and "self.md" in found.stdout, found.stdout + found.stderr
    path = index_path(store)
    if damage == "garbage":
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        path.write_bytes(b"SQLite format 3\x00" + b"\x13garbage" * 200)
    else:
        con = sqlite3.connect(path)
        if damage == "fts_dropped":
            con.execute("DROP TABLE fts")
        else:
            for t in ("fts", "docs", "meta"):
                con.execute(f"DROP TABLE {t}")
            con.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
        con.commit()
        con.close()
    check = holon("home", "check")
    assert check.returncode == 1 and str(path) in check.stdout
    assert "holon memory rebuild" in check.stdout
    res = holon("memory", "rebuild")
    assert res.returncode == 0 and "Traceback" not in res.stdout + res.stderr, res.stderr
    assert index_problem(path) is None
    assert holon("home", "check").returncode == 0
    found = holon("memory", "search", "blue green", "--json")
    assert found.returncode == 0 and "self.md" in found.stdout
    ref = re.search(r'"source_ref": "(mem_[0-9a-f]+)"', found.stdout)
    assert ref is not None
    got = holon("memory", "get", ref.group(1))
    assert got.returncode == 0 and "blue green" in got.stdout


@pytest.mark.parametrize("command", ["search", "get"])
def test_memory_search_and_get_heal_a_wrong_schema_themselves(
    holon_home: Path, command: str
) -> None:
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.memory.search import index_path

    assert holon("agent", "create", "main").returncode == 0
    store = open_agent("main")
    (store.layout.home / "memory").mkdir(exist_ok=True)
    (store.layout.home / "memory" / "self.md").write_text("the deploy uses blue green releases\n")
    assert holon("memory", "search", "deploy").returncode == 0
    con = sqlite3.connect(index_path(store))
    con.execute("DROP TABLE fts")
    con.commit()
    con.close()
    args = ("search", "blue green") if command == "search" else ("get", "mem_000000000000")
    res = holon("memory", *args)
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    assert res.returncode == (0 if command == "search" else 3), res.stderr
    if command == "search":
        assert "self.md" in res.stdout
    # the damaged database is kept aside, not deleted
    assert list(index_path(store).parent.glob("memory.sqlite3.damaged-*"))


@pytest.mark.parametrize("command", [("agent", "create", "x", "--template"), ("skills", "install")])
def test_a_tilde_of_an_unknown_user_is_a_usage_error(command: tuple[str, ...]) -> None:
    """The probe: `holon agent create X --template '~nosuchuser/x'` raised RuntimeError."""
    res = holon(*command, "~nosuchuser4711/x")
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "Traceback" not in out and "no user 'nosuchuser4711'" in out
