"""Issue 36 item 3: the readers of the newer planes' files never raise
anything but a named ``CorruptStateError`` (or report a finding) over
damaged bytes: spend and episode ledgers, closed segments, the workspace
registry, the memory index. A new reader joins this list, so the next
unnamed failure is found by a test, not a user."""

from __future__ import annotations

import gzip
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon_cli.errors import CorruptStateError
from holon_cli.store.layout import HomeLayout
from holon_cli.store.ledger import Ledger, iter_segment
from holon_cli.store.memory_index import index_problem
from holon_cli.store.records import ledger_validator

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SPEND = (
    b'{"v":1,"at":"2026-01-01T00:00:00.000Z","ts":1.0,"agent_id":"main","turn_id":"t",'
    b'"message_id":null,"work_item_id":null,"model_ref":null,"input_tokens":1,'
    b'"output_tokens":2,"cost_usd":0.0,"estimated":false}\n'
)


def damaged(base: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, and the record with bytes cut, flipped or inserted."""
    cut = st.integers(0, len(base)).map(lambda n: base[:n])
    flip = st.tuples(st.integers(0, len(base) - 1), st.integers(0, 255)).map(
        lambda p: base[: p[0]] + bytes([p[1]]) + base[p[0] + 1 :]
    )
    insert = st.tuples(st.integers(0, len(base)), st.binary(min_size=1, max_size=8)).map(
        lambda p: base[: p[0]] + p[1] + base[p[0] :]
    )
    return st.one_of(st.binary(max_size=300), cut, flip, insert)


@FUZZ
@given(data=damaged(SPEND * 3))
def test_a_damaged_ledger_is_read_or_named(tmp_path: Path, data: bytes) -> None:
    for name in ("spend", "context_episodes", "delegations"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        led = Ledger(path, tmp_path / f"{name}.lock", validate=ledger_validator(name))
        led.check()  # problems, never an exception
        led.records_skipping_damaged()
        try:
            led.records()
        except CorruptStateError as exc:
            assert str(path) in exc.message


@FUZZ
@given(data=damaged(gzip.compress(SPEND * 3, mtime=0)))
def test_a_damaged_closed_segment_is_read_or_named(tmp_path: Path, data: bytes) -> None:
    seg_dir = tmp_path / "segments"
    seg_dir.mkdir(exist_ok=True)
    seg = seg_dir / "spend.00000001.jsonl.gz"
    seg.write_bytes(data)
    try:
        list(iter_segment(seg, 1, ledger_validator("spend")))
    except CorruptStateError as exc:
        assert str(seg) in exc.message
    led = Ledger(tmp_path / "spend.jsonl", tmp_path / "spend.lock")
    led.records_skipping_damaged()


@FUZZ
@given(data=damaged(b'{"v":1,"workspaces":[{"workspace_id":"ws_1","workspace_anchor":"/x"}]}'))
def test_a_damaged_workspace_registry_is_named(tmp_path: Path, data: bytes) -> None:
    from holon_cli.store.workspace_registry import read_registry

    home = HomeLayout(tmp_path)
    home.workspace_registry.write_bytes(data)
    try:
        read_registry(home)
    except CorruptStateError as exc:
        assert "workspaces.json" in exc.message


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_damaged_memory_index_is_named_or_rebuilt(tmp_path_factory: object, data: object) -> None:
    import tempfile

    from holon_cli.store.memory_index import MemoryIndex

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "memory.sqlite3"
        with MemoryIndex(path):
            pass
        raw = path.read_bytes()
        got = data.draw(damaged(raw[:8192]))  # type: ignore[attr-defined]
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        path.write_bytes(got)
        why = index_problem(path)  # a reason or None, never an exception
        assert why is None or isinstance(why, str)
        with MemoryIndex(path) as idx:  # opens whatever is there, or rebuilds it
            assert idx.count() == 0 or why is None
