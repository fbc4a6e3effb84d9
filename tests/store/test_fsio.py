"""Atomic snapshot writes and versioned snapshot reads."""

from __future__ import annotations

import os
import stat
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
    synced: list[os.stat_result] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd)), real_fsync(fd)))
    target = tmp_path / "snap.json"
    fsio.atomic_write_bytes(target, b"data")
    files = [s for s in synced if stat.S_ISREG(s.st_mode)]
    dirs = [s for s in synced if stat.S_ISDIR(s.st_mode)]
    assert files, "the temp file must be fsync'd before the rename"
    assert any(os.path.samestat(d, os.stat(tmp_path)) for d in dirs), "and the folder after"


def test_crash_before_rename_keeps_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "snap.json"
    fsio.write_snapshot(target, {"v": 1, "n": 1})

    def boom(src: object, dst: object, **kw: object) -> None:
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


def _listing(d: Path) -> list[str]:
    """What is in ``d``, minus the autouse fixture's homes."""
    return sorted(n for n in os.listdir(d) if n not in ("user-home", "holon-home"))


def test_crash_leaves_no_temp_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "snap.json"
    fsio.write_snapshot(target, {"v": 1, "n": 1})

    def boom(src: object, dst: object, **kw: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        fsio.write_snapshot(target, {"v": 1, "n": 2})
    monkeypatch.undo()
    assert _listing(tmp_path) == ["snap.json"], "the temp file is removed on failure"

    def bad_write(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", bad_write)
    with pytest.raises(OSError):
        fsio.atomic_write_bytes(target, b"x" * 10)
    monkeypatch.undo()
    assert _listing(tmp_path) == ["snap.json"]
    assert fsio.read_snapshot(target) == {"v": 1, "n": 1}


def test_new_files_are_private_and_existing_modes_are_kept(tmp_path: Path) -> None:
    new = tmp_path / "new.json"
    fsio.atomic_write_bytes(new, b"{}")
    assert stat.S_IMODE(new.stat().st_mode) == 0o600, "files under the home hold content"
    kept = tmp_path / "kept.sh"
    kept.write_text("old")
    kept.chmod(0o751)
    fsio.atomic_write_bytes(kept, b"new")
    assert kept.read_bytes() == b"new" and stat.S_IMODE(kept.stat().st_mode) == 0o751
    forced = tmp_path / "forced"
    fsio.atomic_write_bytes(forced, b"", mode=0o640)
    assert stat.S_IMODE(forced.stat().st_mode) == 0o640


def test_new_mode_none_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        f = tmp_path / "ws.txt"
        fsio.atomic_write_bytes(f, b"x", new_mode=None)
    finally:
        os.umask(old)
    assert stat.S_IMODE(f.stat().st_mode) == 0o640


def test_temp_names_are_random_and_planted_symlinks_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    victim = outside / "victim"
    # every name the old helpers would have used
    for name in (f".snap.json.tmp.{os.getpid()}", f".snap.json.holon-patch.{os.getpid()}"):
        (work / name).symlink_to(victim)
    fsio.atomic_write_bytes(work / "snap.json", b"secret")
    assert not victim.exists(), "nothing is written through a planted symlink"
    assert (work / "snap.json").read_bytes() == b"secret"
    assert not (work / "snap.json").is_symlink()


def test_a_symlink_target_is_replaced_not_written_through_or_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    link = tmp_path / "link.txt"
    link.symlink_to(outside)
    with pytest.raises(fsio.UnsafePathError):
        fsio.atomic_write_bytes(link, b"new", refuse_symlink=True)
    assert link.is_symlink() and outside.read_text() == "keep"
    assert _listing(tmp_path) == ["link.txt", "outside.txt"]
    fsio.atomic_write_bytes(link, b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert outside.read_text() == "keep"


def test_check_sees_the_real_path_and_can_refuse(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    seen: list[Path] = []
    fsio.atomic_write_bytes(tmp_path / "via" / "f", b"1", check=seen.append)
    assert seen == [real.resolve() / "f"]

    def refuse(p: Path) -> None:
        raise fsio.UnsafePathError(f"no: {p}")

    with pytest.raises(fsio.UnsafePathError):
        fsio.atomic_write_bytes(tmp_path / "via" / "g", b"2", check=refuse)
    assert _listing(real) == ["f"]


def test_folder_swapped_for_a_symlink_mid_write_cannot_redirect_it(tmp_path: Path) -> None:
    """Creation and rename happen relative to the folder that was checked: a
    swap after the check (here: inside ``check`` itself) cannot send the
    temp file or the data elsewhere."""
    ws = tmp_path / "ws"
    inside = ws / "sub"
    inside.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    seen: list[Path] = []

    def swap(real: Path) -> None:
        seen.append(real)
        inside.rename(ws / "moved")
        inside.symlink_to(outside)

    fsio.atomic_write_bytes(inside / "f.txt", b"data", check=swap)
    assert seen == [inside.parent.resolve() / "sub" / "f.txt"]
    assert _listing(outside) == [], "no temp file and no data outside"
    assert (ws / "moved" / "f.txt").read_bytes() == b"data"
    assert _listing(ws / "moved") == ["f.txt"]


def test_fsio_does_not_import_tempfile() -> None:
    """tempfile pulls in shutil, which `holon enqueue` must not load."""
    import subprocess
    import sys

    code = "import sys, holon_cli.store.fsio; print('tempfile' in sys.modules)"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
