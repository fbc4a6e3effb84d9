"""Atomic snapshot writes and versioned snapshot reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holon_cli.errors import CorruptStateError
from holon_cli.store import fsio


def test_atomic_write_creates_parents_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state.json"
    fsio.atomic_write_text(target, "one")
    fsio.atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert sorted(os.listdir(target.parent)) == ["state.json"]


def test_atomic_write_fsyncs_file_and_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced_dirs: list[Path] = []
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(fsio, "fsync_dir", lambda p: synced_dirs.append(p))
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    target = tmp_path / "snap.json"
    fsio.atomic_write_bytes(target, b"data")
    assert fsyncs, "the temp file must be fsync'd before the rename"
    assert synced_dirs == [tmp_path]


def test_crash_before_rename_keeps_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "snap.json"
    fsio.write_snapshot(target, {"v": 1, "n": 1})

    def boom(src: object, dst: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        fsio.write_snapshot(target, {"v": 1, "n": 2, "pad": "x" * 100_000})
    monkeypatch.undo()
    assert fsio.read_snapshot(target) == {"v": 1, "n": 1}


def test_snapshot_round_trip_and_missing(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    assert fsio.read_snapshot(p) is None
    fsio.write_snapshot(p, {"v": 1, "text": "héllo", "n": [1, 2]})
    assert fsio.read_snapshot(p) == {"v": 1, "text": "héllo", "n": [1, 2]}
    assert p.read_text(encoding="utf-8").endswith("}\n")


def test_snapshot_without_v_reads_as_v1(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text('{"a": 1}')
    assert fsio.read_snapshot(p) == {"a": 1}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"v": 9}', "newer"),
        ('{"v": "1"}', "format version"),
    ],
)
def test_bad_snapshot_is_corrupt_state_naming_the_file(
    tmp_path: Path, content: str, why: str
) -> None:
    p = tmp_path / "s.json"
    p.write_text(content)
    with pytest.raises(CorruptStateError) as ei:
        fsio.read_snapshot(p, max_version=1)
    assert str(p) in ei.value.message and why in ei.value.message


def test_dumps_is_one_compact_line() -> None:
    out = fsio.dumps({"a": "x\ny", "b": "é"})
    assert "\n" not in out and out == '{"a":"x\\ny","b":"é"}'
