"""Issue 36 items 1 and 3: the damage probe over the file kinds of the newer
planes (spend, the home's spend record, episodes, delegations, closed
segments, the workspace registry, a child's supervision record, the memory
index, and issue 44's work item archive).

``test_home_damage_table.py`` covers the earlier kinds. Here each case
takes a home where every file below exists (built once per module by the
runtime's own steps, copied per case), damages one file one way, and
expects:

- ``holon home check`` exits 1 with a problem naming that file (deletions
  included: a deletion is seen through the mark or the records that name
  the file, never by demanding that a file exist);
- the command that reads the file (``status``, ``memory search``,
  ``transcript``, ``workspace list``, ``task list``, ...) prints no
  traceback, and when it fails, its error names the file;
- ``holon home check --repair`` leaves a home that ``home check`` calls
  clean, or says what it could not rebuild (never "nothing to repair" over
  a finding).

Worktrees need a real repository at a fixed path, so their cases live in
``tests/e2e/test_worktree_heal.py`` (killed commands, real git).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inprocess_cli import bind_runner as bind_runner  # autouse: holon() runs in-process
from inprocess_cli import run as run_holon

REPO = Path(__file__).resolve().parents[2]
MODEL = f"scripted:{REPO / 'examples' / 'hello.yaml'}"
AGENT = Path("agents/main/.holon")

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def holon(*args: str) -> Any:
    return run_holon(*args, stdin=io.StringIO(""), env=dict(os.environ))


# ------------------------------------------------------------------ damages


def _wrong_types(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return {"v": 1}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k == "v":
            out[k] = v
        elif isinstance(v, str):
            out[k] = 12345
        elif isinstance(v, bool) or v is None:
            out[k] = [v]
        else:
            out[k] = "not the right type"
    return out


def _lines(data: bytes) -> list[bytes]:
    return [ln for ln in data.split(b"\n") if ln.strip()]


def deleted(path: Path) -> None:
    path.unlink()


def deleted_with_mark(path: Path) -> None:
    """The ledger and its mark: only the other records know it existed."""
    path.unlink()
    path.with_name(path.stem + ".mark").unlink(missing_ok=True)


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def torn_last_line(path: Path) -> None:
    body = path.read_bytes().rstrip(b"\n")
    path.write_bytes(body[: max(1, len(body) - 7)])


def torn_middle_line(path: Path) -> None:
    lines = _lines(path.read_bytes())
    lines[0] = lines[0][: len(lines[0]) // 2]
    path.write_bytes(b"\n".join(lines) + b"\n")


def garbage(path: Path) -> None:
    path.write_bytes(b"\x00\x13garbage {{{ not json ]]]\n" * 3)


def wrong_shape(path: Path) -> None:
    data = path.read_bytes()
    try:
        obj = json.loads(data)
    except ValueError:  # a ledger: every line
        path.write_bytes(
            b"".join(
                json.dumps(_wrong_types(json.loads(ln))).encode() + b"\n" for ln in _lines(data)
            )
        )
        return
    path.write_bytes(json.dumps(_wrong_types(obj)).encode())


def non_utf8(path: Path) -> None:
    data = path.read_bytes()
    i = data.find(b'":"')
    at = i + 3 if i >= 0 else data.index(b'"') + 1
    path.write_bytes(data[:at] + b"\xff\xfe\xfd" + data[at:])


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# closed segments (.jsonl.gz)


def gz_cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(20, len(data) * 2 // 3)])


def gz_garbage_inside(path: Path) -> None:
    path.write_bytes(gzip.compress(b"\x00\x13garbage {{{ not json ]]]\n" * 3))


def gz_wrong_shape(path: Path) -> None:
    lines = _lines(gzip.decompress(path.read_bytes()))
    out = b"".join(json.dumps(_wrong_types(json.loads(ln))).encode() + b"\n" for ln in lines)
    path.write_bytes(gzip.compress(out))


def gz_torn_middle(path: Path) -> None:
    lines = _lines(gzip.decompress(path.read_bytes()))
    lines[0] = lines[0][: len(lines[0]) // 2]
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))


# the memory index (SQLite)


def fts_dropped(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("DROP TABLE fts")
    con.commit()
    con.close()


def docs_dropped(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("DROP TABLE docs")
    con.commit()
    con.close()


def another_database(path: Path) -> None:
    """Another SQLite database in its place (its user_version even matches)."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT)")
    con.execute("INSERT INTO notes(text) VALUES ('mine')")
    con.execute("PRAGMA user_version=1")
    con.commit()
    con.close()


def sqlite_garbage(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.write_bytes(b"SQLite format 3\x00" + b"\x13garbage" * 200)


def sqlite_truncated(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    data = path.read_bytes()
    path.write_bytes(data[:100])


Damage = Callable[[Path], None]

LEDGER_DAMAGE: dict[str, Damage] = {
    "deleted": deleted,
    "deleted_with_mark": deleted_with_mark,
    "emptied": emptied,
    "torn_last_line": torn_last_line,
    "torn_middle_line": torn_middle_line,
    "garbage": garbage,
    "wrong_shape": wrong_shape,
    "non_utf8": non_utf8,
}
SEGMENT_DAMAGE: dict[str, Damage] = {
    "deleted": deleted,
    "emptied": emptied,
    "cut": gz_cut,
    "garbage": garbage,
    "garbage_inside": gz_garbage_inside,
    "wrong_shape": gz_wrong_shape,
    "torn_middle_line": gz_torn_middle,
}
SNAPSHOT_DAMAGE: dict[str, Damage] = {
    "deleted": deleted,
    "emptied": emptied,
    "truncated": truncated,
    "garbage": garbage,
    "wrong_shape": wrong_shape,
    "non_utf8": non_utf8,
}
# the work item index's archive (a derived log the head names by length and
# generation): every damage is flagged and --repair rebuilds it from the ledgers
ARCHIVE_DAMAGE: dict[str, Damage] = {
    "deleted": deleted,
    "emptied": emptied,
    "torn_last_line": torn_last_line,
    "torn_middle_line": torn_middle_line,
    "truncated": truncated,
    "garbage": garbage,
    "wrong_shape": wrong_shape,
    "non_utf8": non_utf8,
}
# a deleted index is no damage: it is a cache, rebuilt by the next search
INDEX_DAMAGE: dict[str, Damage] = {
    "emptied": emptied,
    "truncated": sqlite_truncated,
    "garbage": sqlite_garbage,
    "fts_dropped": fts_dropped,
    "docs_dropped": docs_dropped,
    "another_database": another_database,
}

# file kind -> (path glob under the home, damages, the command that reads it)
KINDS: dict[str, tuple[str, dict[str, Damage], tuple[str, ...]]] = {
    "spend": (f"{AGENT}/ledger/spend.jsonl", LEDGER_DAMAGE, ("status", "--json")),
    "home_spend": ("budgets/spend.jsonl", LEDGER_DAMAGE, ("usage", "--json")),
    "episodes": (
        f"{AGENT}/ledger/context_episodes.jsonl",
        LEDGER_DAMAGE,
        ("memory", "search", "hello"),
    ),
    "delegations": (
        f"{AGENT}/ledger/delegations.jsonl",
        LEDGER_DAMAGE,
        ("task", "list", "--all"),
    ),
    "transcript_segment": (
        f"{AGENT}/ledger/segments/transcript.*.jsonl.gz",
        SEGMENT_DAMAGE,
        ("transcript", "--limit", "1000"),
    ),
    "events_segment": (
        f"{AGENT}/ledger/segments/events.*.jsonl.gz",
        SEGMENT_DAMAGE,
        ("tail", "--limit", "1000"),
    ),
    "workspaces": ("workspaces.json", SNAPSHOT_DAMAGE, ("workspace", "list")),
    "child_task": ("{child_task}", SNAPSHOT_DAMAGE, ("task", "list", "--all")),
    "memory_index": (
        f"{AGENT}/indexes/memory.sqlite3",
        INDEX_DAMAGE,
        ("memory", "search", "hello"),
    ),
    "work_item_archive": (
        f"{AGENT}/state/work_items.archive.jsonl",
        ARCHIVE_DAMAGE,
        ("workitem", "list", "--json"),
    ),
}
CASES = [(kind, name) for kind, (_, damages, _) in KINDS.items() for name in damages]


@pytest.fixture(scope="module")
def template_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home where every file of KINDS exists (built by the runtime's steps)."""
    base = tmp_path_factory.mktemp("damage-new")
    home = base / "home"
    project = base / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("# the project\n")
    model = base / "loop.yaml"  # one charged round per turn, every turn
    model.write_text(
        "loop: true\nsteps:\n  - text: hello again\n"
        "    usage: {input_tokens: 400, output_tokens: 30}\n"
    )
    old = {k: os.environ.get(k) for k in ("HOLON_HOME", "HOLON_MODEL")}
    os.environ["HOLON_HOME"] = str(home)
    os.environ["HOLON_MODEL"] = f"scripted:{model}"
    try:
        from holon_cli.runtime.agents.lifecycle import open_agent
        from holon_cli.runtime.children.spawn import spawn_private_child
        from holon_cli.runtime.enqueue import admit
        from holon_cli.runtime.memory.search import sync
        from holon_cli.runtime.turn import run_turn
        from holon_cli.runtime.workspace.plane import use_workspace
        from holon_cli.tools.catalog import default_catalog

        store = open_agent(None)
        use_workspace(store, path=str(project), mode="direct")
        for i in range(8):  # the eighth turn closes an episode (its hard cap)
            admit(f"hello {i}")
            run_turn(None, catalog=default_catalog())
            if i == 3:  # closed, compressed segments of both segmented ledgers
                store.events.close_segment()
                store.ledger("transcript").close_segment()
        spawn_private_child(store, "Compute the answer.")
        from holon_cli.runtime.waiting.intents import cancel_for_work_item
        from holon_cli.runtime.workitems import complete_work_item, create_work_item
        from holon_cli.store import workitem_index as wix

        for i in range(wix.KEEP_RECENT + 3):  # completed items older than the head keeps
            wid = create_work_item(store, f"done {i}", source="operator")["work_item"]["id"]
            complete_work_item(
                store,
                wid,
                report=f"report {i}",
                source="operator",
                cancel_waits=cancel_for_work_item,
            )
        with store.lock():  # a checkpoint: they go to the archive
            wix.save(store, wix.load(store), force=True)
        sync(store)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    for kind in KINDS:
        (path,) = _paths(home, kind)
        assert path.stat().st_size > 0, kind
    return home


def _paths(home: Path, kind: str) -> list[Path]:
    pattern = KINDS[kind][0]
    if pattern == "{child_task}":
        tasks = home / AGENT / "tasks"
        return [
            d / "task.json"
            for d in sorted(tasks.iterdir())
            if '"child_agent_task"' in (d / "task.json").read_text()
        ]
    return sorted(home.glob(pattern))


_CLEAN: set[Path] = set()


def damaged_copy(template_home: Path, holon_home: Path, kind: str, name: str) -> Path:
    shutil.copytree(template_home, holon_home, symlinks=True)
    if template_home not in _CLEAN:  # every copy is the same bytes: check the first
        res = holon("home", "check")
        assert res.returncode == 0, res.stdout + res.stderr
        _CLEAN.add(template_home)
    (path,) = _paths(holon_home, kind)
    KINDS[kind][1][name](path)
    return path


def flagged(path: Path) -> tuple[bool, str]:
    res = holon("home", "check", "--json")
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    if res.returncode != 1:
        return False, out
    problems = json.loads(res.stdout)["error"]["details"]["problems"]
    return any(p["path"] == str(path) for p in problems), out


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_home_check_flags_every_damage(
    template_home: Path, holon_home: Path, kind: str, name: str
) -> None:
    path = damaged_copy(template_home, holon_home, kind, name)
    ok, out = flagged(path)
    assert ok, f"{kind} {name}: home check did not name {path}\n{out}"


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_the_reader_names_the_file_and_prints_no_traceback(
    template_home: Path, holon_home: Path, kind: str, name: str
) -> None:
    path = damaged_copy(template_home, holon_home, kind, name)
    res = holon(*KINDS[kind][2])
    out = res.stdout + res.stderr
    assert "Traceback" not in out and "Aborted" not in out, out
    assert res.returncode in (0, 1, 3), out  # ok, corrupt_state (named), not found
    if res.returncode != 0:
        assert path.name in out, out


# damaged lines inside a ledger that nothing else holds are the operator's
# call (which line to drop): the repair names them and leaves them
LEFT_TO_THE_OPERATOR = {
    ("episodes", k) for k in ("torn_middle_line", "garbage", "wrong_shape", "non_utf8")
} | {
    (kind, k)
    for kind in ("spend", "delegations")
    for k in ("torn_middle_line", "garbage", "wrong_shape", "non_utf8")
}


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_repair_repairs_or_says_what_it_cannot(
    template_home: Path, holon_home: Path, kind: str, name: str
) -> None:
    path = damaged_copy(template_home, holon_home, kind, name)
    res = holon("home", "check", "--repair", "--json")
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    doc = json.loads(res.stdout)
    if (kind, name) not in LEFT_TO_THE_OPERATOR:
        assert res.returncode == 0, out
        assert doc["data"]["repairs"], f"{kind} {name}: nothing was repaired"
        assert holon("home", "check").returncode == 0
        assert holon(*KINDS[kind][2]).returncode == 0
        return
    # what is left is named, with what to do: never "nothing to repair"
    assert res.returncode == 1, out
    details = doc["error"]["details"]
    skipped = {r["path"] for r in details["repairs"] if r["action"] == "skipped"}
    assert str(path) in skipped, details["repairs"]
    assert {p["path"] for p in details["problems"]} <= skipped
    text = holon("home", "check", "--repair")
    assert "nothing to repair" not in text.stderr and f"not repaired {path}" in text.stderr


@pytest.mark.parametrize("name", list(SEGMENT_DAMAGE))
def test_the_events_page_serves_the_rest_over_a_damaged_segment(
    template_home: Path, holon_home: Path, name: str
) -> None:
    """The probe: ``GET /agents/{id}/events?since=0`` answered 500 over a cut segment."""
    from tests.serve.http_app import make_client

    path = damaged_copy(template_home, holon_home, "events_segment", name)
    res = make_client().get("/agents/main/events?since=0&limit=1000")
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["events"], body  # the open file's events at least
    seqs = [e["event_seq"] for e in body["events"]]
    assert seqs == sorted(seqs)
    if name not in ("deleted", "wrong_shape"):  # wrong fields: served, home check names them
        assert any(d["path"] == str(path) for d in body["damaged"]), body["damaged"]
