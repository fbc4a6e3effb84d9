"""The documentation site builds with `mkdocs build --strict` (every link
and anchor between pages resolves, every page is in the nav), the
troubleshooting guide says what to do for every error kind, the
environment page names every variable holon reads, and the README leads to
every guide in one click."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from docgen import facts, ref_errors  # noqa: E402

GUIDES = REPO / "docs" / "guides"


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]' (the docs extra)")
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    assert "WARNING" not in res.stderr, res.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("index.html", "guides/children.html", "reference/config.html"):
        assert (site / page).is_file(), page
    # a placeholder in help text stays visible (not swallowed as an HTML tag)
    assert "ingress.webhooks.&lt;source&gt;" in (site / "reference" / "http.html").read_text()


def _anchors(page: Path) -> set[str]:
    return set(re.findall(r"^\{: #([a-z0-9_]+) \}$", page.read_text(), re.M))


def test_troubleshooting_says_what_to_do_for_every_kind() -> None:
    ids = _anchors(GUIDES / "troubleshooting.md")
    kinds = {
        *ref_errors.error_kinds(),
        *ref_errors.provider_kinds(),
        *ref_errors.tool_kinds(),
        *(k for _, k in ref_errors.http_kinds()),
    }
    assert kinds - ids == set(), "kinds without an entry in docs/guides/troubleshooting.md"
    assert len(kinds) > 90


def test_the_environment_page_names_every_variable_holon_reads() -> None:
    documented = " ".join(name for name, _ in facts.ENVIRONMENT)
    read = set()
    for path in (REPO / "holon_cli").rglob("*.py"):
        read |= set(re.findall(r"environ(?:\.get)?\(?\[?\s*\"(HOLON_[A-Z_]+)\"", path.read_text()))
    internal = {"HOLON_EXEC_MARKER", "HOLON_WORKER_ID"}  # set by holon for its children
    missing = {v for v in read - internal if v not in documented}
    assert not missing, f"add these to scripts/docgen/facts.py ENVIRONMENT: {sorted(missing)}"
    assert "HOLON_HOME" in read


def test_the_readme_links_every_guide() -> None:
    readme = (REPO / "README.md").read_text()
    for guide in sorted(GUIDES.glob("*.md")):
        assert f"docs/guides/{guide.name}" in readme, guide.name
    nav = (REPO / "mkdocs.yml").read_text()
    for guide in sorted(GUIDES.glob("*.md")):
        assert f"guides/{guide.name}" in nav, guide.name
