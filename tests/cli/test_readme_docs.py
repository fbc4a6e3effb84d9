"""What a new user reads first (issue 8 item 23): install needs, where state
goes, the scripted format in the reference and man page, and a hello demo
that shows the listing it talks about."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def test_readme_states_python_venv_and_state_location() -> None:
    text = (REPO / "README.md").read_text()
    start = text.index("## Quick start")
    quick = text[start : text.index("\n## ", start + 1)]
    assert "Python 3.11" in quick and "venv" in quick and "PEP 668" in quick
    assert "~/.holon" in quick and "HOLON_HOME" in quick


def test_scripted_format_is_documented_in_the_reference_and_man_page() -> None:
    from holon_cli.providers import scripted

    page = (REPO / "docs" / "reference" / "scripted.md").read_text()
    man = (REPO / "man" / "man1" / "holon.1").read_text()
    for key in sorted(scripted.STEP_KEYS - {"note"}) + ["loop", "steps", "{{<call_id>.<path>}}"]:
        assert key in page, key
        assert key.replace("-", "\\-") in man or key in man, key
    assert ".SH SCRIPTED MODELS" in man
    guide = (REPO / "docs" / "guides" / "models.md").read_text()
    assert "../reference/scripted.md" in guide  # the guide points at the format


def test_readme_keeps_the_two_set_up_commands_and_stays_short() -> None:
    """What the lead and CI run from the README: install and run the main job
    offline; install the test dependencies and run the tests (the command
    .ci/run runs)."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 400
    assert "pip install . && holon run --model scripted:examples/hello.yaml" in text
    assert "pip install -e '.[test]' && python -m pytest -q -n 2\n" in text
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.rstrip().endswith("python -m pytest -q -n 2")
    for package in ("git", "bubblewrap", "tmux", "chromium-driver", "postgresql", "man-db"):
        assert f"`{package}`" in text, package


def test_hello_demo_shows_the_listing(script_runner: Any) -> None:
    res = script_runner.run(
        [
            "holon",
            "run",
            "--json",
            "--model",
            f"scripted:{REPO / 'examples' / 'hello.yaml'}",
            "What is in this directory?",
        ],
        cwd=REPO,
        print_result=False,
    )
    assert res.returncode == 0, res.stderr
    final = json.loads(res.stdout)["data"]["final_text"]
    assert "I listed the workspace" in final
    for name in ("README.md", "holon_cli", "pyproject.toml"):  # the listing itself
        assert name in final, final
    # the listing as text, one name a line, not the tool's JSON result envelope
    # (the git log lines in the listing may mention anything, so no substring bans)
    assert "\nREADME.md\n" in final and "\nholon_cli\n" in final, final
