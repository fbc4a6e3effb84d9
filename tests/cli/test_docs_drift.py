"""Generated docs (the reference pages in docs/reference/, the man pages,
completions, the tool manifest, mkdocs.yml's command nav) must match the code."""

from __future__ import annotations

import importlib.util
import io
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen_docs.py"


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


def test_check_lists_drifted_and_stale_files_and_regenerate_fixes_them(tmp_path: Path) -> None:
    (tmp_path / "mkdocs.yml").write_text(
        "nav:\n  - Pages:\n      # BEGIN COMMAND PAGES\n      # END COMMAND PAGES\n"
    )
    res = run_script("--check", "--root", str(tmp_path))
    assert res.returncode == 1
    for rel in (
        "man/man1/holon.1",
        "man/man1/holon-enqueue.1",
        "man/man1/holon-workitem.1",
        "docs/reference/commands/index.md",
        "docs/reference/commands/agent.md",
        "docs/reference/config.md",
        "docs/reference/events.md",
        "docs/reference/http.md",
        "docs/reference/exit-codes.md",
        "docs/reference/tools.md",
        "completions/holon.bash",
        "completions/_holon",
        "completions/holon.fish",
        "mkdocs.yml",
        "holon_cli/tools/manifest.json",
    ):
        assert f"  {rel}\n" in res.stderr, rel
    assert "python scripts/gen_docs.py" in res.stderr
    assert run_script("--root", str(tmp_path)).returncode == 0
    nav = (tmp_path / "mkdocs.yml").read_text()
    assert "      - holon enqueue: reference/commands/enqueue.md\n" in nav
    assert nav.rstrip().endswith("# END COMMAND PAGES")
    assert run_script("--check", "--root", str(tmp_path)).returncode == 0
    # a hand edit of a generated page is drift, and only that page is listed
    page = tmp_path / "docs" / "reference" / "config.md"
    page.write_text(page.read_text() + "edited\n")
    res = run_script("--check", "--root", str(tmp_path))
    assert res.returncode == 1 and "docs/reference/config.md" in res.stderr
    assert "man/man1/holon.1" not in res.stderr
    # a page for a command that no longer exists is stale: listed, then deleted
    gone = tmp_path / "man" / "man1" / "holon-frobnicate.1"
    gone.write_text("old\n")
    res = run_script("--check", "--root", str(tmp_path))
    assert "man/man1/holon-frobnicate.1 (stale" in res.stderr
    assert run_script("--root", str(tmp_path)).returncode == 0
    assert not gone.exists()
    assert run_script("--check", "--root", str(tmp_path)).returncode == 0


def test_output_is_deterministic(tmp_path: Path) -> None:
    mod = gen_docs()
    first = mod.generate(tmp_path)
    second = mod.generate(tmp_path)
    assert first == second
    from holon_cli import __version__

    for path, text in first.items():
        if path.suffix == ".1":
            assert re.search(r'^\.TH [A-Z-]+ 1 ""', text, re.M), path  # no date in the title
            assert __version__ not in text, path


def test_every_command_has_a_man_page_and_a_reference_section() -> None:
    mod = gen_docs()
    from docgen import clicktree

    docs = clicktree.command_docs()
    tops = clicktree.by_top(docs)
    assert {"enqueue", "agent", "workitem", "home", "completion"} <= set(tops)
    overview = (REPO / "man" / "man1" / "holon.1").read_text()
    for top, group in tops.items():
        page = (REPO / "man" / "man1" / f"holon-{top}.1").read_text()
        plain = page.replace("\\-", "-").replace("\\e", "\\")
        assert f"holon-{top}\\fR(1)" in overview.replace("\\-", "-"), top
        md = (REPO / "docs" / "reference" / "commands" / f"{top}.md").read_text()
        for d in group:
            assert d.usage in plain, d.name  # SYNOPSIS, and a subsection for a subcommand
            if d is not group[0]:
                assert f'.SS "{d.usage}"' in plain, d.name
            assert f"`{d.name}`" in md, d.name
            assert d.examples, f"{d.name} has no example in its --help"
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "ENVIRONMENT", "FILES"):
        assert f".SH {section}\n" in overview
    assert ".SH EXIT STATUS\n" in overview and ".SH SCRIPTED MODELS\n" in overview
    for var in ("HOLON_HOME", "HOLON_AGENT_ID", "HOLON_MODEL", "NO_COLOR"):
        assert var in overview
    for code in ("0", "1", "2", "3", "4", "5", "75", "130"):
        assert f"\\fB{code}\\fR" in overview
    assert mod.OWNED == ("man/man1", "docs/reference/commands")


def test_roff_escaping() -> None:
    gen_docs()
    from docgen import roff

    assert (
        roff.esc(".leading dot\n'quote\nback\\slash") == "\\&.leading dot\n\\&'quote\nback\\eslash"
    )
    assert roff.esc_opt("--json-body") == "\\-\\-json\\-body"


def test_markdown_prose_keeps_placeholders_visible() -> None:
    gen_docs()
    from docgen import md

    assert md.prose("send <agent_id> and LC_* `keep <this> *`") == (
        "send &lt;agent_id> and LC_\\* `keep <this> *`"
    )
    assert md.prose("``rst`` literal") == "`rst` literal"
    assert md.cell("a | b\nc") == "a \\| b c"


def test_splice_keeps_surrounding_text() -> None:
    mod = gen_docs()
    src = "head\n  # BEGIN X\n  old\n  # END X\ntail\n"
    assert mod.splice(src, "  new\n", "# BEGIN X", "# END X") == (
        "head\n  # BEGIN X\n  new\n  # END X\ntail\n"
    )
    assert mod.splice("no markers\n", "x\n", "# BEGIN X", "# END X") == "no markers\n"


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


def test_service_page_follows_the_service_guides(tmp_path: Path) -> None:
    """man/man7/holon-service.7 is the serve, daemon and DBOS guides as roff:
    an edit of a guide changes the page, and a tree without them makes none."""
    mod = gen_docs()
    page = mod.service_page(REPO)
    assert page is not None
    assert page == (REPO / "man" / "man7" / "holon-service.7").read_text(encoding="utf-8")
    assert ".TH HOLON-SERVICE 7" in page and "/callbacks/wake/" in page
    assert "ExecStart=%h/.local/share/holon/venv/bin/holon serve" in page  # the unit
    assert page.count(".nf") == page.count(".fi") >= 1  # code blocks closed
    for rel in mod.SERVICE_GUIDES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((REPO / rel).read_text())
    guide = tmp_path / mod.SERVICE_GUIDES[0]
    guide.write_text(guide.read_text() + "\nNEW LINE\n")
    assert "NEW LINE" in (mod.service_page(tmp_path) or "")
    guide.unlink()
    assert mod.service_page(tmp_path) is None
