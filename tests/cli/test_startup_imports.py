"""Start-up stays light: read-only commands do not load what they do not use
(issue 8 item 24, issue 12 item 2). Measured in a fresh interpreter, since
this test process has long imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
from holon_cli.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


BARE = "import json, sys; print(json.dumps(sorted(sys.modules)), file=sys.stderr)"


def _modules(code: str, *args: str) -> set[str]:
    # -S: no site, so no .pth file imports anything on our behalf (as in a clean
    # venv); the installed packages are reached through PYTHONPATH instead
    import site

    repo = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join([repo, *site.getsitepackages()])
    env = {**os.environ, "PYTHONPATH": path}
    res = subprocess.run(
        [sys.executable, "-S", "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return set(json.loads(res.stderr.strip().splitlines()[-1]))


def loaded_modules(*args: str) -> set[str]:
    """What running ``holon ARGS`` adds to what a bare interpreter loads."""
    return _modules(PROBE, *args) - _modules(BARE)


def test_status_loads_no_provider_code_and_no_email() -> None:
    mods = loaded_modules("status")
    assert "holon_cli.runtime.inspect" in mods  # the probe really ran status
    heavy = {
        "email.utils",
        "holon_cli.providers.base",
        "holon_cli.providers.http_common",
        "holon_cli.providers.wire",
        "httpx",
        "rich",
        "yaml",
    }
    assert not (mods & heavy), sorted(mods & heavy)


def test_enqueue_loads_no_yaml_rich_httpx_or_providers() -> None:
    from holon_cli.runtime.agents import open_agent

    open_agent(None)  # the everyday case: the agent exists (creating it copies a tree)
    mods = loaded_modules("enqueue", "hello")
    assert "holon_cli.runtime.enqueue" in mods
    assert not {m for m in mods if m.startswith(("holon_cli.providers", "httpx", "rich", "yaml"))}
    # agent creation's tree copy (shutil pulls bz2 and lzma) is not an enqueue cost
    assert not (mods & {"shutil", "bz2", "lzma"}), sorted(mods & {"shutil", "bz2", "lzma"})
