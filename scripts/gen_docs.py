#!/usr/bin/env python3
"""Regenerate everything derived from the code.

    python scripts/gen_docs.py            # rewrite what drifted (and delete stale pages)
    python scripts/gen_docs.py --check    # exit 1 and list the drifted files

What it writes, and from where (the renderers are in ``scripts/docgen/``):

- ``docs/reference/commands/``: an index and one page per top-level command,
  from the click command tree (``holon_cli.cli.cli``), and the list of those
  pages in ``mkdocs.yml``'s nav (between ``# BEGIN COMMAND PAGES`` and
  ``# END COMMAND PAGES``);
- ``docs/reference/config.md`` (the config schema), ``events.md`` (the event
  model and the presentation table), ``http.md`` (the route table),
  ``exit-codes.md`` (the error tree), ``tools.md`` (the tool catalog),
  ``environment.md`` and ``scripted.md`` (the ``scripted:`` format, from the
  docstring of ``holon_cli/providers/scripted.py``);
- ``man/man1/holon.1`` and ``man/man1/holon-COMMAND.1`` (one per top-level
  command), installed by the wheel into ``share/man/man1``, and
  ``man/man7/holon-service.7`` from the service guides in ``docs/guides/``;
- ``completions/holon.bash``, ``completions/_holon`` (zsh),
  ``completions/holon.fish``: click's completion activation scripts, from
  ``holon_cli/cli/completion_shells.py`` (what ``holon completion`` prints);
- ``holon_cli/tools/manifest.json``: each built-in tool's name, module,
  description, schema and guidance (the turn offers tools from it).

The output is deterministic (no dates, no versions, a fixed order), so the
drift test in ``tests/cli/test_docs_drift.py`` only fails when the code
changed. A page in a folder this script owns (``man/man1/``,
``docs/reference/commands/``) that it no longer writes is stale: ``--check``
lists it, a rerun deletes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _p in (str(REPO), str(REPO / "scripts")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from docgen import (  # noqa: E402
    clicktree,
    ref_commands,
    ref_config,
    ref_errors,
    ref_events,
    ref_http,
    ref_misc,
    roff,
)

SHELL_FILES = {
    "bash": "completions/holon.bash",
    "zsh": "completions/_holon",
    "fish": "completions/holon.fish",
}
# folders whose every file is generated: one not written is stale
OWNED = ("man/man1", "docs/reference/commands")
NAV_BEGIN = "# BEGIN COMMAND PAGES"
NAV_END = "# END COMMAND PAGES"
# the guides `man 7 holon-service` is made of, in order
SERVICE_GUIDES = ("docs/guides/serve.md", "docs/guides/daemon.md", "docs/guides/dbos.md")


def splice(text: str, block: str, begin: str, end_marker: str) -> str:
    """``text`` with what lies between the two marker lines replaced by
    ``block`` (the markers and their indentation kept); unchanged when a
    marker is missing."""
    start, end = text.find(begin), text.find(end_marker)
    if start == -1 or end == -1 or end < start:
        return text
    line_start = text.rfind("\n", 0, end) + 1
    indent = text[line_start:end]
    head = text[: text.index("\n", start) + 1]
    return head + block + indent + text[end:]


def nav_block(tops: list[str], indent: str) -> str:
    return "".join(f"{indent}- holon {t}: reference/commands/{t}.md\n" for t in tops)


def service_page(root: Path) -> str | None:
    """``man/man7/holon-service.7``: the service guides as one roff page."""
    parts = [root / rel for rel in SERVICE_GUIDES]
    if not all(p.exists() for p in parts):
        return None
    body = "\n\n".join(p.read_text(encoding="utf-8") for p in parts)
    return roff.render_markdown_page(
        body,
        name="holon-service",
        section=7,
        title="Miscellaneous",
        summary="running holon agents as a service: serve, HTTP, daemon, systemd, DBOS",
        source=", ".join(SERVICE_GUIDES),
    )


def generate(root: Path) -> dict[Path, str]:
    from holon_cli.cli.completion_shells import source as completion_source
    from holon_cli.tools.catalog import render_manifest

    docs = clicktree.command_docs()
    tops = clicktree.by_top(docs)
    ref = root / "docs" / "reference"
    out: dict[Path, str] = {root / "man" / "man1" / "holon.1": roff.render_overview(docs, tops)}
    for top, group in tops.items():
        out[root / "man" / "man1" / f"{roff.page_name(top)}.1"] = roff.render_command(group)
        out[ref / "commands" / f"{ref_commands.slug(top)}.md"] = ref_commands.render_command(group)
    out[ref / "commands" / "index.md"] = ref_commands.render_index(docs[0], tops)
    out[ref / "config.md"] = ref_config.render()
    out[ref / "events.md"] = ref_events.render()
    out[ref / "http.md"] = ref_http.render()
    out[ref / "exit-codes.md"] = ref_errors.render()
    out[ref / "tools.md"] = ref_misc.render_tools()
    out[ref / "environment.md"] = ref_misc.render_environment()
    out[ref / "scripted.md"] = ref_misc.render_scripted()
    service = service_page(root)
    if service is not None:
        out[root / "man" / "man7" / "holon-service.7"] = service
    for shell, rel in SHELL_FILES.items():
        out[root / rel] = completion_source(shell)
    mkdocs = root / "mkdocs.yml"
    if mkdocs.exists():
        text = mkdocs.read_text(encoding="utf-8")
        if NAV_BEGIN in text:
            line_start = text.rfind("\n", 0, text.find(NAV_END)) + 1
            indent = text[line_start : text.find(NAV_END)]
            out[mkdocs] = splice(text, nav_block(list(tops), indent), NAV_BEGIN, NAV_END)
    out[root / "holon_cli" / "tools" / "manifest.json"] = render_manifest()
    return out


def stale(root: Path, written: dict[Path, str]) -> list[Path]:
    """Files in the folders this script owns that it did not write."""
    out = []
    for rel in OWNED:
        folder = root / rel
        if folder.is_dir():
            out += [p for p in sorted(folder.iterdir()) if p.is_file() and p not in written]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--check", action="store_true", help="do not write; exit 1 listing the files that drifted"
    )
    ap.add_argument(
        "--root",
        type=Path,
        default=REPO,
        help="where docs/, man/, completions/ and mkdocs.yml live (default: the repo)",
    )
    args = ap.parse_args(argv)
    root = args.root.resolve()
    written = generate(root)
    drifted: list[Path] = []
    for path, text in written.items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        drifted.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    extra = stale(root, written)
    if not args.check:
        for path in extra:
            path.unlink()

    def rel(p: Path) -> str:
        return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)

    if args.check:
        if drifted or extra:
            print("generated docs are out of date:", file=sys.stderr)
            for p in drifted:
                print(f"  {rel(p)}", file=sys.stderr)
            for p in extra:
                print(f"  {rel(p)} (stale: no longer generated)", file=sys.stderr)
            print("run `python scripts/gen_docs.py` and commit the result", file=sys.stderr)
            return 1
        print("generated docs are up to date")
        return 0
    for p in drifted:
        print(f"wrote {rel(p)}")
    for p in extra:
        print(f"deleted {rel(p)} (no longer generated)")
    if not drifted and not extra:
        print("generated docs were already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
