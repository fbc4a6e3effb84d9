"""The systemd user unit in the daemon guide (and so in `man 7 holon-service`)
starts as written (issue 31 item 19): `systemd-analyze verify` accepts it
with its `ExecStart` where the guide's venv install puts `holon`, and no
value carries a trailing comment (systemd would read it as part of the value:
`EnvironmentFile=` would name a file that does not exist)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def service_section() -> str:
    text = (REPO / "docs" / "guides" / "daemon.md").read_text(encoding="utf-8")
    start = text.index("A systemd user unit")
    end = text.find("\n## ", start)
    return text[start : end if end != -1 else len(text)]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", service_section(), re.S)


def unit_text() -> str:
    (unit,) = blocks("ini")
    return unit


def settings(unit: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in unit.splitlines():
        if line.strip() and not line.lstrip().startswith(("#", ";", "[")):
            key, sep, value = line.partition("=")
            assert sep, line
            out[key.strip()] = value
    return out


def test_no_value_carries_a_trailing_comment() -> None:
    for key, value in settings(unit_text()).items():
        assert "#" not in value and " ;" not in value, f"{key}={value}"
    env_file = settings(unit_text())["EnvironmentFile"]
    assert not re.search(r"\s", env_file), env_file


def test_exec_start_is_where_the_guide_install_puts_holon() -> None:
    exec_start = settings(unit_text())["ExecStart"]
    program, _, args = exec_start.partition(" ")
    assert args == "serve"
    assert program.startswith("%h/") and program.endswith("/bin/holon")
    venv = program[len("%h/") : -len("/bin/holon")]
    install = blocks("sh")[0]
    assert f"python3 -m venv ~/{venv}\n" in install
    assert f"~/{venv}/bin/pip install ." in install


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd not installed")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    program = settings(unit_text())["ExecStart"].split(" ")[0].replace("%h", str(home))
    exe = Path(program)
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    unit = tmp_path / "holon.service"
    unit.write_text(unit_text())
    env = {**os.environ, "HOME": str(home), "SYSTEMD_LOG_LEVEL": "warning"}
    res = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "holon.service" not in res.stderr, res.stderr  # no warning about the unit
    # and the check has teeth: without the venv's holon it is refused
    exe.unlink()
    res = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode != 0 and "is not executable" in res.stderr
