"""The contract of runtime/mcp/sdk_import.py, the seam that imports the MCP
SDK's client modules without its packages' ``__init__``: each case runs in
a fresh interpreter (the test process may have imported ``mcp`` already)."""

from __future__ import annotations

import pytest
from fresh_interpreter import output_of as _run

pytest.importorskip("mcp", reason="the MCP SDK (pip install 'holon-cli[mcp]') is not installed")


def test_the_client_loads_without_the_server_side_of_the_sdk() -> None:
    got = _run(
        """
        import sys
        from holon_cli.runtime.mcp import sdk
        print(sorted(m for m in ("mcp.server", "starlette", "uvicorn", "sse_starlette")
                     if m in sys.modules))
        print(sdk.ClientSession.__module__, sdk.MCPError.__module__)
        """
    )
    assert got.splitlines() == ["[]", "mcp.client.session mcp.shared.exceptions"]


@pytest.mark.slow
def test_the_packages_are_whole_for_whoever_asks_them_later() -> None:
    got = _run(
        """
        from holon_cli.runtime.mcp import sdk
        import mcp, mcp.client
        from mcp import ClientSession, types
        from mcp.client import Client
        from mcp.client.client import Client as Real
        print(ClientSession is sdk.ClientSession, Client is Real, mcp.client.Client is Real)
        print("ClientSession" in mcp.__all__, hasattr(types, "CallToolRequest"))
        try:
            mcp.no_such_name
        except AttributeError as exc:
            print("AttributeError", exc)
        """
    )
    assert got.splitlines() == [
        "True True True",
        "True True",
        "AttributeError module 'mcp' has no attribute 'no_such_name'",
    ]


@pytest.mark.slow
def test_a_process_that_imported_the_sdk_first_is_left_as_it_is() -> None:
    got = _run(
        """
        import mcp
        full = mcp
        from holon_cli.runtime.mcp import sdk
        import sys
        print(sys.modules["mcp"] is full, "__getattr__" in vars(full), "mcp.server" in sys.modules)
        """
    )
    assert got.split() == ["True", "False", "True"]
