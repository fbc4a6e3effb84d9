"""Helpers of the MCP tests: a config.yaml naming servers, the fake server's
command, the real peers (skipped, naming the package, when not installed)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

FAKE = str(Path(__file__).with_name("mcp_fake_server.py"))
# npm peers: .ci/run installs them (pinned by tests/mcp_peers/package-lock.json)
NPM_PEERS = Path(
    os.environ.get("HOLON_MCP_PEERS")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "holon-mcp-peers"
)


def fake(*args: str, **extra: Any) -> dict[str, Any]:
    """A ``mcp_servers.<name>`` entry running the fake server."""
    return {"command": sys.executable, "args": [FAKE, *args], **extra}


def write_config(home: Path, servers: dict[str, Any], **more: Any) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    p = home / "config.yaml"
    p.write_text(yaml.safe_dump({"mcp_servers": servers, **more}))
    return p


def python_peer(module: str, package: str) -> dict[str, Any]:
    """A PyPI server of the test extra, run by this interpreter."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs the PyPI package {package} (pip install -e '.[test]')")
    # a loaded test machine starts a Python server (it imports the SDK) slowly
    return {"command": sys.executable, "args": ["-m", module], "startup_timeout": "60s"}


def npm_peer(package: str, *args: str) -> dict[str, Any]:
    """An npm server installed by .ci/run under ``HOLON_MCP_PEERS``."""
    if shutil.which("node") is None:
        pytest.skip(f"needs node (Debian package nodejs) for {package}")
    pkg = NPM_PEERS / "node_modules" / package / "package.json"
    if not pkg.is_file():
        pytest.skip(f"needs the npm package {package} (.ci/run installs it into {NPM_PEERS})")
    import json

    meta = json.loads(pkg.read_text())
    bin_ = meta.get("bin")
    entry = bin_ if isinstance(bin_, str) else next(iter((bin_ or {}).values()))
    return {"command": "node", "args": [str(pkg.parent / entry), *args], "startup_timeout": "60s"}


def close_servers() -> None:
    mod = sys.modules.get("holon_cli.runtime.mcp.host")
    if mod is not None and mod.existing() is not None:
        mod.existing().close_all()
