"""Generated docs (README command reference, man page, completions) must match the code."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen_docs.py"
BIN = Path(sys.executable).parent


def gen_docs() -> ModuleType:
    if "holon_gen_docs" in sys.modules:
        return sys.modules["holon_gen_docs"]
    spec = importlib.util.spec_from_file_location("holon_gen_docs", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["holon_gen_docs"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """``python scripts/gen_docs.py ARGS``, run in this process (its ``main``)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = gen_docs().main(list(args))
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def test_generated_docs_are_up_to_date() -> None:
    res = run_script("--check")
    if res.returncode != 0:
        pytest.fail(
            "generated docs drifted from the code; "
            "run `python scripts/gen_docs.py` and commit the result\n" + res.stderr,
            pytrace=False,
        )
    assert "up to date" in res.stdout


def test_check_lists_drifted_files_and_regenerate_fixes_them(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# project\n\nintro\n")  # no markers yet
    res = run_script("--check", "--root", str(tmp_path))
    assert res.returncode == 1
    for rel in (
        "man/holon.1",
        "completions/holon.bash",
        "completions/_holon",
        "completions/holon.fish",
        "README.md",
    ):
        assert rel in res.stderr
    assert "python scripts/gen_docs.py" in res.stderr
    assert run_script("--root", str(tmp_path)).returncode == 0
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# project\n\nintro\n\n<!-- BEGIN COMMAND REFERENCE -->\n")
    assert readme.rstrip().endswith("<!-- END COMMAND REFERENCE -->")
    assert run_script("--check", "--root", str(tmp_path)).returncode == 0
    # hand edits inside the generated block are drift; outside it they are not
    (tmp_path / "README.md").write_text(readme.replace("intro", "a new intro"))
    assert run_script("--check", "--root", str(tmp_path)).returncode == 0
    (tmp_path / "completions" / "holon.fish").write_text("# edited\n")
    res = run_script("--check", "--root", str(tmp_path))
    assert (
        res.returncode == 1
        and "completions/holon.fish" in res.stderr
        and "man/holon.1" not in res.stderr
    )


def test_output_is_deterministic(tmp_path: Path) -> None:
    mod = gen_docs()
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    first = mod.generate(tmp_path)
    second = mod.generate(tmp_path)
    assert first == second
    man = first[tmp_path / "man" / "holon.1"]
    assert '.TH HOLON 1 ""' in man  # no date, no version in the title line
    from holon_cli import __version__

    assert __version__ not in man


def test_reference_covers_every_command() -> None:
    mod = gen_docs()
    docs = mod.command_docs()
    names = [d.name for d in docs]
    assert names[0] == "holon"
    for must in (
        "holon enqueue",
        "holon tail",
        "holon agent create",
        "holon agent stop",
        "holon home check",
        "holon completion",
    ):
        assert must in names
    man = (REPO / "man" / "holon.1").read_text()
    readme = (REPO / "README.md").read_text()
    for d in docs[1:]:
        assert f'.SS "{d.usage}"' in man.replace("\\-", "-").replace("\\e", "\\"), d.name
        assert f"`{d.name}`" in readme, d.name
        assert d.examples, f"{d.name} has no example in its --help"
    for section in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "ENVIRONMENT",
        "FILES",
        "EXIT STATUS",
    ):
        assert f".SH {section}\n" in man
    for var in ("HOLON_HOME", "HOLON_AGENT_ID", "HOLON_MODEL", "NO_COLOR"):
        assert var in man
    for code in ("0", "1", "2", "3", "4", "5", "75", "130"):
        assert f"\\fB{code}\\fR" in man


def test_roff_escaping() -> None:
    mod = gen_docs()
    assert (
        mod._roff(".leading dot\n'quote\nback\\slash") == "\\&.leading dot\n\\&'quote\nback\\eslash"
    )
    assert mod._roff_opt("--json-body") == "\\-\\-json\\-body"


def test_splice_keeps_surrounding_text() -> None:
    mod = gen_docs()
    src = "head\n<!-- BEGIN COMMAND REFERENCE -->\nold\n<!-- END COMMAND REFERENCE -->\ntail\n"
    out = mod.splice_readme(src, "new\n")
    assert (
        out == "head\n<!-- BEGIN COMMAND REFERENCE -->\nnew\n<!-- END COMMAND REFERENCE -->\ntail\n"
    )
    assert (
        mod.splice_readme("", "x\n")
        == "<!-- BEGIN COMMAND REFERENCE -->\nx\n<!-- END COMMAND REFERENCE -->\n"
    )


def test_completion_command_prints_the_committed_scripts(script_runner) -> None:  # type: ignore[no-untyped-def]
    for shell, rel in (
        ("bash", "completions/holon.bash"),
        ("zsh", "completions/_holon"),
        ("fish", "completions/holon.fish"),
    ):
        res = script_runner.run(["holon", "completion", shell])
        assert res.returncode == 0
        assert res.stdout == (REPO / rel).read_text()
        # ours (tests/cli/test_completion.py runs them in real shells): each TAB
        # asks holon through click's completion variable
        assert f"_HOLON_COMPLETE={shell}_complete" in res.stdout


def test_service_page_follows_the_readme_section(tmp_path: Path) -> None:
    """man/holon-service.7 is the README's service section as roff: an edit
    of that section changes the page, and a README without it makes none."""
    mod = gen_docs()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    page = mod.render_service_man(text)
    assert page is not None
    assert page == (REPO / "man" / "holon-service.7").read_text(encoding="utf-8")
    assert ".TH HOLON-SERVICE 7" in page and "/callbacks/wake/" in page
    assert page.count(".nf") == page.count(".fi") >= 1  # code blocks closed
    assert "## Work items" not in page and "plan.md" not in page  # stops at the next section
    edited = text.replace(mod.SERVICE_HEADING + "\n", mod.SERVICE_HEADING + "\n\nNEW LINE\n", 1)
    assert "NEW LINE" in (mod.render_service_man(edited) or "")
    assert mod.render_service_man("# project\n\nintro\n") is None
