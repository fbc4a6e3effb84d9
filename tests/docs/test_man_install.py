"""The wheel installs the man pages where man-db finds them: built from this
checkout (hatchling, no build isolation: no network) and installed with pip
into a fresh venv, `man -w holon-enqueue` finds the page with only the venv's
bin/ on PATH (what activating it does) and MANPATH unset, as it does for a
pipx install (~/.local/bin -> ~/.local/share/man)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _man_env(path: str, **extra: str) -> dict[str, str]:
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8", **extra}
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("man") is None:
        pytest.skip("man is not installed (Debian package man-db)")
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling is not installed (the test extra brings it)")
    tmp = tmp_path_factory.mktemp("maninstall")
    wheels = tmp / "wheels"
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(wheels), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    (wheel,) = wheels.glob("holon_cli-*.whl")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    res = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
         "-q", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return env_dir


def test_man_finds_every_page_from_an_activated_venv(installed: Path) -> None:
    path = f"{installed / 'bin'}:/usr/bin:/bin"
    assert (installed / "bin" / "holon").exists()
    pages = sorted(p.name for p in (REPO / "man" / "man1").glob("*.1"))
    assert "holon.1" in pages and "holon-enqueue.1" in pages and len(pages) > 20
    for name in ("holon", "holon-enqueue", "holon-workitem", "holon-completion"):
        res = subprocess.run(
            ["man", "-w", name], capture_output=True, text=True, env=_man_env(path), timeout=60
        )
        assert res.returncode == 0, (name, res.stderr)
        assert res.stdout.strip() == str(installed / "share" / "man" / "man1" / f"{name}.1")
    res = subprocess.run(
        ["man", "-w", "7", "holon-service"], capture_output=True, text=True,
        env=_man_env(path), timeout=60,
    )  # fmt: skip
    assert res.stdout.strip().endswith("share/man/man7/holon-service.7"), res.stderr
    # the installed page is the generated one, and renders
    shipped = (installed / "share" / "man" / "man1" / "holon-enqueue.1").read_text()
    assert shipped == (REPO / "man" / "man1" / "holon-enqueue.1").read_text()
    res = subprocess.run(
        ["man", "-P", "cat", "holon-enqueue"], capture_output=True, text=True,
        env=_man_env(path, MANWIDTH="80"), timeout=60,
    )  # fmt: skip
    assert res.returncode == 0 and "holon enqueue" in res.stdout and "SYNOPSIS" in res.stdout


def test_what_the_install_guide_says_about_manpath(installed: Path) -> None:
    """Without the venv on PATH, or with a MANPATH of one's own, man does not
    look there; a MANPATH ending in ':' adds the PATH-derived paths back."""
    bin_path = f"{installed / 'bin'}:/usr/bin:/bin"

    def man_w(path: str, **extra: str) -> int:
        return subprocess.run(
            ["man", "-w", "holon-enqueue"], capture_output=True, env=_man_env(path, **extra),
            timeout=60,
        ).returncode  # fmt: skip

    assert man_w("/usr/bin:/bin") != 0
    assert man_w(bin_path, MANPATH="/usr/share/man") != 0
    assert man_w(bin_path, MANPATH="/usr/share/man:") == 0
    guide = (REPO / "docs" / "guides" / "install.md").read_text()
    assert 'export MANPATH="$MANPATH:"' in guide and "../share/man" in guide
