"""The default catalog offers the built-in tools from ``manifest.json`` and
imports a tool's module only when the tool is called (issue 12 item 2:
"define tool schemas lazily")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from holon_cli.tools import catalog

REPO = Path(__file__).resolve().parents[2]


def test_the_manifest_matches_the_tool_modules() -> None:
    # the generated-docs drift test covers this too; this names the fix
    assert catalog.MANIFEST.read_text(encoding="utf-8") == catalog.render_manifest(), (
        "holon_cli/tools/manifest.json drifted from the tool modules: "
        "run `python scripts/gen_docs.py` and commit the result"
    )


def test_the_default_catalog_offers_exactly_what_the_modules_define() -> None:
    lazy, eager = catalog.default_catalog(), catalog.eager_catalog()
    assert lazy.specs == eager.specs
    assert lazy.guidance == eager.guidance
    names = [s.name for s in lazy.specs]
    assert names == list(eager._defs)
    for name in names:
        assert lazy.get(name) is eager.get(name)  # the very definition the module registered


def test_an_unknown_tool_is_none_in_both_catalogs() -> None:
    assert catalog.default_catalog().get("NoSuchTool") is None
    assert catalog.eager_catalog().get("NoSuchTool") is None


def test_a_tool_module_is_imported_on_the_tools_first_call_only() -> None:
    probe = """
import json, sys
from holon_cli.tools.catalog import MODULES, default_catalog
loaded = lambda: sorted(m for m in sys.modules if m.startswith(MODULES))
cat = default_catalog()
before = loaded()
tool = cat.get("Sleep")
print(json.dumps([before, loaded(), tool.name, tool.args.__name__, len(cat.specs)]))
"""
    res = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert res.returncode == 0, res.stderr
    before, after, name, args, count = json.loads(res.stdout)
    assert before == []
    assert after == ["holon_cli.tools.agent_tools"]
    assert (name, args) == ("Sleep", "SleepArgs")
    assert count == len(catalog.default_catalog().specs)


def test_every_manifest_row_names_the_module_that_registers_it() -> None:
    rows = json.loads(catalog.MANIFEST.read_bytes())["tools"]
    assert rows and all(r["module"].startswith(catalog.MODULES) for r in rows)
    assert len({r["name"] for r in rows}) == len(rows)
