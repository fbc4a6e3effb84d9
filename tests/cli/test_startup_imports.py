"""Start-up stays light: read-only commands do not load what they do not use
(issue 8 item 24, issue 12 item 2). Measured in a fresh interpreter, since
this test process has long imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopback import LoopbackServer, Reply

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
        "holon_cli.providers.http_session",
        "httpx",
        "httpx2",
        "httpcore2",
        "rich",
        "textual",  # the tui extra: only `holon tui` (interactive) imports it
        "yaml",
        # the scale-out engine's extra (holon-cli[dbos]) is for `serve --engine dbos` only
        "dbos",
        "psycopg",
        "sqlalchemy",
        "holon_cli.serve.dbos.engine",
        # the web console's (holon serve's first page only)
        "jinja2",
        "markupsafe",
        "markdown_it",
    }
    assert not (mods & heavy), sorted(mods & heavy)


def test_tui_without_a_serve_stops_before_anything_heavy() -> None:
    """``holon tui`` checks for a serve on ``run/holon.sock`` with the standard
    library: no HTTP library, no Textual, no rich, no serve code loaded."""
    mods = loaded_modules("tui")
    assert "holon_cli.serve.client" in mods  # the probe really ran the check
    heavy = {"httpx", "textual", "rich", "starlette", "uvicorn", "holon_cli.cli.tui.app"}
    assert not (mods & heavy), sorted(mods & heavy)


def test_enqueue_loads_no_yaml_rich_httpx_or_providers() -> None:
    from holon_cli.runtime.agents.lifecycle import open_agent

    open_agent(None)  # the everyday case: the agent exists (creating it copies a tree)
    mods = loaded_modules("enqueue", "hello")
    assert "holon_cli.runtime.enqueue" in mods
    unwanted = ("holon_cli.providers", "httpx", "httpx2", "httpcore", "rich", "yaml", "textual")
    unwanted += ("dbos", "psycopg", "sqlalchemy", "holon_cli.serve.dbos.engine")
    unwanted += ("jinja2", "markupsafe", "markdown_it", "holon_cli.serve")
    assert not {m for m in mods if m.startswith(unwanted)}
    # agent creation's tree copy (shutil pulls bz2 and lzma) is not an enqueue cost
    assert not (mods & {"shutil", "bz2", "lzma"}), sorted(mods & {"shutil", "bz2", "lzma"})


# what the fast path (holon_cli/cli/fast.py) must never load: click alone
# costs about three bare interpreter start-ups; dataclasses brings inspect and
# ast; hashlib loads OpenSSL; subprocess and shutil belong to commands that
# start or remove something
NEVER_ON_THE_FAST_PATH = {
    "click",
    "textual",
    "dataclasses",
    "inspect",
    "hashlib",
    "subprocess",
    "shutil",
    "threading",
    "datetime",
}


def test_hot_commands_take_the_click_free_path_and_stay_light() -> None:
    from holon_cli.runtime.agents.lifecycle import open_agent

    open_agent(None)
    for args, probe in (
        (("enqueue", "hello"), "holon_cli.runtime.enqueue"),
        (("status",), "holon_cli.runtime.inspect"),
        (("workitem", "list"), "holon_cli.runtime.workitems.views"),
    ):
        mods = loaded_modules(*args)
        assert probe in mods, args  # the probe really ran the command
        assert "holon_cli.cli.fast_bodies" in mods, args
        assert not (mods & NEVER_ON_THE_FAST_PATH), (args, sorted(mods & NEVER_ON_THE_FAST_PATH))
        http = {m for m in mods if m.startswith(("httpx", "httpcore", "holon_cli.providers.http"))}
        assert not http, (args, sorted(http))


def test_version_loads_nothing_but_the_entry_point() -> None:
    mods = loaded_modules("--version")
    assert not (mods & NEVER_ON_THE_FAST_PATH), sorted(mods & NEVER_ON_THE_FAST_PATH)
    assert not any(m.startswith(("holon_cli.runtime", "holon_cli.store")) for m in mods)


def test_anything_else_still_goes_through_click() -> None:
    mods = loaded_modules("enqueue", "--help")
    assert "click" in mods and "holon_cli.cli.group" in mods


def test_a_one_round_run_loads_no_click_filelock_tool_module_or_task_control(
    tmp_path: Path,
) -> None:
    """``holon run`` with an answer and no tool call (issue 12 item 2): the
    tools are offered from the manifest (the catalog alone: not even the tool
    framework loads before a call), the task plane's launch and control code
    stay unloaded (the run started no task), and so do click and filelock.
    Its value classes are plain classes and NamedTuples (``model/value.py``):
    no ``dataclasses`` (nor the ``inspect`` and ``ast`` it brings); the tool
    values and the work-item mutations load with a call that needs them."""
    script = tmp_path / "one.yaml"
    script.write_text('steps:\n  - text: "done"\n')
    mods = loaded_modules("run", "--model", f"scripted:{script}", "hi")
    assert "holon_cli.runtime.run" in mods and "holon_cli.cli.fast_bodies" in mods
    tool_modules = {m for m in mods if m.startswith("holon_cli.tools.")}
    assert tool_modules == {"holon_cli.tools.catalog"}, sorted(tool_modules)
    unwanted = {
        "click",
        "filelock",
        "hashlib",  # OpenSSL: holon_cli.digest hashes with CPython's own sha256
        "subprocess",
        "holon_cli.runtime.tasks.control",
        "holon_cli.runtime.tasks.launch",
        "holon_cli.runtime.tasks.plane",
        "holon_cli.providers.http_common",
        "holon_cli.providers.http_session",
        "httpx",
        "httpx2",
        "dataclasses",
        "inspect",
        "holon_cli.model.tool",
        "holon_cli.runtime.workitems.mutations",
        "holon_cli.runtime.workitems.completion",
    }
    assert not (mods & unwanted), sorted(mods & unwanted)


def test_a_one_round_run_over_http_sends_through_httpx2_and_loads_no_click(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same run against an OpenAI-compatible ``http://`` endpoint: the
    request goes through ``providers.http_session``'s httpx2 client (not the
    retired httpx), and the run still skips click."""
    with LoopbackServer() as srv:
        srv.queue(
            Reply.json_body(
                {
                    "id": "r",
                    "status": "completed",
                    "output": [
                        {"type": "message", "content": [{"type": "output_text", "text": "ok"}]}
                    ],
                }
            )
        )
        monkeypatch.setenv("OPENAI_BASE_URL", f"{srv.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        mods = loaded_modules("run", "--model", "openai/m", "hi")
        assert len(srv.requests) == 1  # the probe really sent the request
    assert {"holon_cli.providers.http_session", "httpx2", "httpcore2"} <= mods
    # (httpx2 and h11 import dataclasses themselves; ours define none: see above)
    unwanted = {"httpx", "httpcore", "click", "holon_cli.model.tool"}
    unwanted |= {"holon_cli.runtime.workitems.mutations", "holon_cli.runtime.workitems.completion"}
    assert not (mods & unwanted), sorted(mods & unwanted)


def test_a_turn_showing_its_trigger_loads_no_openssl(tmp_path: Path) -> None:
    """The prompt's trigger descriptor (issue 31 item 9) is read, not checked
    in constant time: a turn of an agent whose capability exists loads no
    hashlib (OpenSSL) for it."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.waiting import triggers

    triggers.show(open_agent(None))  # provisioned before
    admit("hi")
    script = tmp_path / "one.yaml"
    script.write_text('steps:\n  - text: "done"\n')
    mods = loaded_modules("turn", "--model", f"scripted:{script}")
    assert "holon_cli.runtime.waiting.triggers" in mods  # the prompt read it
    assert "hashlib" not in mods and "secrets" not in mods


MCP_SDK = ("mcp", "mcp_types", "pydantic", "anyio", "holon_cli.runtime.mcp.sdk")


def test_a_home_without_mcp_servers_imports_no_mcp_code(tmp_path: Path) -> None:
    """Issue 38: without `mcp_servers` a turn (and status, enqueue) imports no
    module of the MCP plane, nor the SDK."""
    from holon_cli.runtime.enqueue import admit

    admit("hi")
    script = tmp_path / "one.yaml"
    script.write_text('steps:\n  - text: "done"\n')
    for args in (("turn", "--model", f"scripted:{script}"), ("status",), ("enqueue", "x")):
        mods = loaded_modules(*args)
        mcp = {m for m in mods if m.startswith(("holon_cli.runtime.mcp", "holon_cli.tools.mcp"))}
        mcp |= {m for m in mods if m.split(".")[0] in MCP_SDK}
        assert not mcp, (args, sorted(mcp))


def test_mcp_servers_configured_keep_enqueue_and_status_off_the_sdk(
    holon_home: Path, tmp_path: Path
) -> None:
    """With servers configured (and a cached tool list), `enqueue` imports
    nothing of MCP, `status` only the plane's light records (no SDK, no
    subprocess), and a turn that calls no MCP tool starts no server and loads no SDK."""
    import json
    import sys

    import yaml

    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit
    from holon_cli.runtime.mcp import records
    from holon_cli.runtime.mcp.config import spec_of

    server = {"command": sys.executable, "args": [str(tmp_path / "never-started.py")]}
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"s": server}}))
    records.note_listed(
        spec_of("s", server), "2026-07-28", [{"name": "t", "inputSchema": {"type": "object"}}]
    )
    open_agent(None)
    mods = loaded_modules("enqueue", "hello")
    assert not {m for m in mods if "mcp" in m}, sorted(m for m in mods if "mcp" in m)
    mods = loaded_modules("status")
    assert "holon_cli.runtime.mcp.records" in mods  # the probe really showed the servers
    # no OpenSSL either: the config cache's digest is CPython's own sha256
    heavy = {m for m in mods if m.split(".")[0] in MCP_SDK} | (mods & {"subprocess", "hashlib"})
    heavy |= mods & {"holon_cli.runtime.mcp.host", "holon_cli.runtime.mcp.sdk"}
    assert not heavy, sorted(heavy)
    admit("hi")
    script = tmp_path / "one.yaml"
    script.write_text('steps:\n  - text: "done"\n')
    mods = loaded_modules("turn", "--model", f"scripted:{script}")
    assert "holon_cli.tools.mcp" in mods  # the cached tools were offered
    sdk = {m for m in mods if m.split(".")[0] in MCP_SDK} | (mods & {"holon_cli.runtime.mcp.host"})
    assert not sdk, sorted(sdk)
    rec = json.loads(next((holon_home / "mcp" / "servers").glob("s.*.json")).read_text())
    assert rec["state"] == "ok"  # nothing was started (the command does not exist)


def test_tracing_off_imports_no_opentelemetry(tmp_path: Path) -> None:
    """Tracing is off by default (issue 39): ``status``, ``enqueue``, a
    ``tick`` and a whole ``turn`` with a tool call load nothing from
    OpenTelemetry (the telemetry plane's light module only)."""
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.enqueue import admit

    open_agent(None)
    admit("hi")
    script = tmp_path / "tool.yaml"
    script.write_text(
        "steps:\n"
        "  - tool_calls: [{name: ExecCommand, arguments: {cmd: 'true'}}]\n"
        '  - text: "done"\n'
    )
    runs = (
        (("status",), "holon_cli.runtime.inspect"),
        (("enqueue", "again"), "holon_cli.runtime.enqueue"),
        (("tick",), "holon_cli.runtime.tick"),
        (("turn", "--model", f"scripted:{script}"), "holon_cli.runtime.tasks.launch"),
    )
    for args, probe in runs:
        mods = loaded_modules(*args)
        assert probe in mods, args  # the probe really ran it (the turn ran its tool)
        otel = sorted(m for m in mods if m.startswith(("opentelemetry", "google.protobuf")))
        assert not otel, (args, otel)
        assert "holon_cli.runtime.telemetry.sdk" not in mods, args
