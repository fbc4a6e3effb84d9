"""``run/config.cache.json``: a checked config.yaml is not parsed again by the
next process while its bytes stay the same; the cache never decides what the
config says (stale, damaged, foreign or unwritable caches change nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from holon_cli.errors import ConfigError
from holon_cli.store import config as cfg
from holon_cli.store.layout import HomeLayout

GOOD = "model: openai/gpt-5\nruntime:\n  context_budget_tokens: 90000\n"


@pytest.fixture
def home(holon_home: Path) -> Path:
    cfg._cache.clear()  # what a new process starts with
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(GOOD)
    return holon_home


def _fresh_load() -> dict[str, object]:
    cfg._cache.clear()
    return cfg.load_config()


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path, raw: bytes) -> dict[str, object]:
        raise AssertionError("parsed again")

    monkeypatch.setattr(cfg, "_parse", refuse)


def test_second_process_reads_the_cache_not_yaml(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _fresh_load()
    assert first["runtime"] == {"context_budget_tokens": 90000}
    assert (home / "run" / cfg.CACHE_NAME).is_file()
    _no_parse(monkeypatch)
    assert _fresh_load() == first


def test_changed_bytes_are_parsed_and_checked_again(home: Path) -> None:
    _fresh_load()
    (home / "config.yaml").write_text(GOOD.replace("90000", "91000"))
    assert _fresh_load()["runtime"] == {"context_budget_tokens": 91000}
    (home / "config.yaml").write_text("modle: openai/gpt-5\n")  # the cache must not hide it
    with pytest.raises(ConfigError, match="modle"):
        _fresh_load()
    with pytest.raises(ConfigError, match="modle"):  # and an error is never cached
        _fresh_load()


@pytest.mark.parametrize(
    "damage",
    [b"", b"{not json", b"[]", b'{"digest": 1}', b'{"digest": "x", "config": {}}'],
)
def test_damaged_cache_is_ignored_and_rewritten(home: Path, damage: bytes) -> None:
    want = _fresh_load()
    cache = home / "run" / cfg.CACHE_NAME
    cache.write_bytes(damage)
    assert _fresh_load() == want
    assert json.loads(cache.read_bytes())["config"] == want


def test_forged_cache_for_other_bytes_is_not_used(home: Path) -> None:
    _fresh_load()
    cache = home / "run" / cfg.CACHE_NAME
    rec = json.loads(cache.read_bytes())
    rec["config"] = {"model": "evil/model"}
    rec["digest"] = rec["digest"][:-1] + ("0" if rec["digest"][-1] != "0" else "1")
    cache.write_text(json.dumps(rec))
    assert _fresh_load()["model"] == "openai/gpt-5"


def test_another_release_does_not_trust_the_cache(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fresh_load()
    import holon_cli

    monkeypatch.setattr(holon_cli, "__version__", "99.0.0")
    calls: list[bytes] = []
    parse = cfg._parse

    def counting(path: Path, raw: bytes) -> dict[str, object]:
        calls.append(raw)
        return parse(path, raw)

    monkeypatch.setattr(cfg, "_parse", counting)
    _fresh_load()
    assert len(calls) == 1


@pytest.mark.parametrize(
    "data",
    [
        {"prices": {"m": {"input": float("nan")}}},  # NaN: not JSON
        {"note": __import__("datetime").date(2001, 1, 1)},  # a YAML date
        {"agents": {1: {}}},  # a non-string key: JSON would make it "1"
        {"agents": {True: {}}},
    ],
)
def test_values_json_cannot_carry_are_not_cached(home: Path, data: dict[str, object]) -> None:
    """Whatever the schema lets through, only a mapping that JSON carries
    unchanged is remembered (the schema refuses these today; the cache must
    not depend on that)."""
    raw = (home / "config.yaml").read_bytes()
    cfg._remember(HomeLayout(home), raw, data)
    assert not (home / "run" / cfg.CACHE_NAME).exists()
    assert cfg._cached(HomeLayout(home), raw) is None


def test_unwritable_run_folder_still_loads(home: Path) -> None:
    (home / "run").write_text("not a folder")  # mkdir fails: the cache is skipped
    assert _fresh_load()["model"] == "openai/gpt-5"
    assert not list(home.glob(f"run*/{cfg.CACHE_NAME}"))
    assert not [p for p in home.iterdir() if p.name.endswith(".tmp")]


def test_cache_write_leaves_no_temp_file(home: Path) -> None:
    _fresh_load()
    names = sorted(p.name for p in (home / "run").iterdir())
    assert names == [cfg.CACHE_NAME]


def test_status_with_a_config_skips_yaml_the_second_time(home: Path) -> None:
    """In a fresh interpreter, as a user's second command: no PyYAML, no schema."""
    probe = (
        "import json, sys\n"
        "from holon_cli.store.config import load_config\n"
        "load_config()\n"
        "print(json.dumps(sorted(m for m in sys.modules if 'yaml' in m or 'config_schema' in m)))"
    )
    env = {**os.environ, "HOLON_HOME": str(home)}
    run = [sys.executable, "-c", probe]
    first = json.loads(subprocess.run(run, env=env, capture_output=True, check=True).stdout)
    second = json.loads(subprocess.run(run, env=env, capture_output=True, check=True).stdout)
    assert "yaml" in first and "holon_cli.store.config_schema" in first
    assert second == []
    assert HomeLayout(home).run_dir.joinpath(cfg.CACHE_NAME).is_file()


def test_cache_is_private_whatever_the_umask(home: Path) -> None:
    """config.yaml may hold ``control_token``: its cache is 0600 even when
    the umask would let others read it."""
    (home / "config.yaml").write_text(GOOD + "control_token: s3cret-token-value\n")
    (home / "config.yaml").chmod(0o600)
    old = os.umask(0o022)
    try:
        _fresh_load()
    finally:
        os.umask(old)
    cache = home / "run" / cfg.CACHE_NAME
    assert "s3cret-token-value" in cache.read_text()
    assert cache.stat().st_mode & 0o777 == 0o600


def test_threads_loading_at_once_leave_one_valid_cache(home: Path) -> None:
    import threading

    want = dict(_fresh_load())
    (home / "run" / cfg.CACHE_NAME).unlink()
    errors: list[BaseException] = []

    def load() -> None:
        try:
            for _ in range(20):
                assert cfg._parse(home / "config.yaml", (home / "config.yaml").read_bytes())
                cfg._remember(HomeLayout(home), (home / "config.yaml").read_bytes(), want)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in (home / "run").iterdir()) == [cfg.CACHE_NAME]
    assert _fresh_load() == want
