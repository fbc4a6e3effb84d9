"""Issue 35 item 3 (after issue 31 item 26): the environment of a model-run
command is built from an allowlist, ``execution.env`` {inherit: core|all|none,
pass, set}, not by guessing secret names.

The reliability probe set 28 secret-like variables and saw 11 of them from a
command under the old deny-list (``GH_PAT``, ``NPM_AUTH``,
``SLACK_WEBHOOK_URL``, ``SENTRY_DSN``, ``DOCKER_AUTH_CONFIG``, ``NETRC``,
``COOKIE``, ``*_SESSION``, ...). The same 28 run here through a real
``ExecCommand`` (forked supervisor, default sandbox) and a real ``holon task
run`` (detached ``python -S`` supervisor) under each inherit mode: none
arrives unless ``pass`` names it, and a provider's key never does.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime.tasks import environment, procs
from holon_cli.store.config import load_config
from holon_cli.store.layout import HomeLayout
from holon_cli.tools.base import ToolContext, ToolResult

Call = Callable[..., ToolResult]

# one variable per word of the contract's rule, the names the issue lists,
# and the usual suspects; four secret by value (URL userinfo); the provider's
# own credential under a harmless name (config below)
SECRETS = {
    "OPENAI_API_KEY": "sk-example",  # KEY
    "STRIPE_SECRET": "sk_live_example",  # SECRET
    "GITHUB_TOKEN": "ghp_example",  # TOKEN
    "PGPASSWORD": "pgpass",  # PASSWORD (inside a word)
    "MYSQL_PASSWD": "mysqlpass",  # PASSWD
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/sa.json",  # CREDENTIAL(S)
    "NPM_AUTH": "npm_auth_example",  # AUTH
    "GH_PAT": "github_pat_example",  # PAT
    "X_SESSION": "sess-example",  # SESSION
    "COOKIE": "sid=abc",  # COOKIE
    "SENTRY_DSN": "https://abc@o1.ingest.sentry.io/1",  # DSN (and userinfo)
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/x",  # WEBHOOK
    "DEPLOY_PRIVATE_PEM": "-----BEGIN",  # PRIVATE
    "NETRC": "machine h login u password p",  # NETRC
    "DOCKER_AUTH_CONFIG": '{"auths": {}}',
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
    "AWS_SESSION_TOKEN": "FQoGZXIvYXdzE",
    "HOLON_CONTROL_TOKEN": "ctl",
    "JIRA_PAT": "jira_pat_example",
    "DISCORD_WEBHOOK": "https://discord.com/api/webhooks/1/x",
    "CI_COOKIES": "a=b",
    "rails_session": "lower-case too",
    "HTTP_AUTH_HEADER": "Basic dTpw",
    # secrets by value: URLs carrying userinfo
    "DATABASE_URL": "postgres://u:p@h/db",
    "REDIS_URL": "redis://:hunter2@cache:6379/0",
    "GIT_REMOTE": "https://ghp_tokenasuser@github.com/o/r.git",
    "HTTPS_PROXY": "http://proxyuser:proxypass@proxy.corp:3128",
    # the provider's own credential, whatever its name (config below)
    "LAB_LLM_ACCESS": "the-model-credential",
}
PLAIN = {
    "PLAIN_VALUE": "visible",
    "CONTACT": "ops@example.com",  # an address, not a URL
    "PATCH_LEVEL": "3",  # PAT only as a word
    "AUTHOR_NAME": "Ada",  # AUTH only as a word
}
CORE = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "TERM": "dumb"}
PROVIDER = """\
model: lab/small
providers:
  lab:
    transport: openai_chat_completions
    base_url: http://127.0.0.1:9/v1
    api_key_env: LAB_LLM_ACCESS
"""
MODES = ("core", "all", "none")


def _config(inherit: str, passed: tuple[str, ...] = ()) -> str:
    text = PROVIDER + f"execution:\n  env:\n    inherit: {inherit}\n    set: {{CI: '1'}}\n"
    if passed:
        text += f"    pass: [{', '.join(passed)}]\n"
    return text


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(SECRETS) == 28
    for k, v in {**SECRETS, **PLAIN, **CORE}.items():
        monkeypatch.setenv(k, v)


def _write(text: str) -> None:
    home = HomeLayout.current().root
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text)


def _parse_env(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.split("\0"):
        if "=" in line:
            k, _, v = line.partition("=")
            out[k] = v
    return out


def _check(seen: dict[str, str], inherit: str, passed: tuple[str, ...] = ()) -> None:
    leaked = sorted(k for k in SECRETS if k in seen and k not in passed)
    assert leaked == [], f"{len(leaked)}/28 secrets reached the command: {leaked}"
    for k in passed:
        if k != "LAB_LLM_ACCESS":
            assert seen.get(k) == SECRETS[k], k
    assert "LAB_LLM_ACCESS" not in seen  # a provider key is never passed, not even by pass
    assert seen.get("CI") == "1"  # set
    assert seen.get(procs.MARKER_VAR)
    plain_seen = {k for k in PLAIN if seen.get(k) == PLAIN[k]}
    core_seen = {k for k in CORE if seen.get(k) == CORE[k]}
    if inherit == "none":
        assert not plain_seen and not core_seen and "PATH" not in seen
    elif inherit == "core":
        assert not plain_seen and core_seen == set(CORE) and "HOME" in seen and "PATH" in seen
    else:
        assert plain_seen == set(PLAIN) and core_seen == set(CORE)


# ------------------------------------------------------------------ the rule


def test_the_rule_by_mode_name_value_and_key_env() -> None:
    base = {**SECRETS, **PLAIN, **CORE, "PATH": "/bin"}
    cfg = {"providers": {"lab": {"api_key_env": "LAB_LLM_ACCESS"}}}
    for mode in MODES:
        env = environment.command_env({**cfg, "execution": {"env": {"inherit": mode}}}, base=base)
        assert not set(SECRETS) & set(env), mode
    assert environment.command_env(cfg, base=base) == {**CORE, "PATH": "/bin"}  # core
    # pass wins over every rule but the provider key's
    cfg2 = {
        **cfg,
        "execution": {"env": {"inherit": "none", "pass": ["REDIS_URL", "LAB_LLM_ACCESS"]}},
    }
    assert environment.command_env(cfg2, base=base) == {"REDIS_URL": SECRETS["REDIS_URL"]}
    # the older key is read as more pass names
    old = {"runtime": {"exec_env_passthrough": ["GH_PAT"]}}
    assert environment.command_env(old, base=base)["GH_PAT"] == SECRETS["GH_PAT"]
    # set, then the caller's extra (an MCP server's env), then the marker
    cfg3 = {"execution": {"env": {"inherit": "none", "set": {"A": "1", "B": "2"}}}}
    got = environment.command_env(cfg3, base=base, extra={"B": "3"}, marker="m1")
    assert got == {"A": "1", "B": "3", procs.MARKER_VAR: "m1"}
    # per agent, key by key over the default
    per = {
        "execution": {"env": {"inherit": "all", "set": {"A": "1"}}},
        "agents": {"ops": {"execution": {"env": {"inherit": "none"}}}},
    }
    assert environment.command_env(per, "ops", base=base) == {"A": "1"}
    assert "PLAIN_VALUE" in environment.command_env(per, "main", base=base)
    # the config as load_settings types it works the same way
    from holon_cli.store.config_schema import HolonConfig, build

    typed = build(
        HolonConfig,
        {
            "providers": {
                "lab": {
                    "transport": "openai_chat_completions",
                    "base_url": "http://x",
                    "api_key_env": "LAB_LLM_ACCESS",
                }
            },
            "execution": {"env": {"inherit": "all", "pass": ["GH_PAT"]}},
        },
    )
    env = environment.command_env(typed, base=base)
    assert "LAB_LLM_ACCESS" not in env and env["GH_PAT"] == SECRETS["GH_PAT"]
    assert env["PLAIN_VALUE"] == "visible"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        *[
            (n, True)
            for n in SECRETS
            if "URL" not in n and n not in ("GIT_REMOTE", "HTTPS_PROXY", "LAB_LLM_ACCESS")
        ],
        ("PATH", False),
        ("PATCH_LEVEL", False),
        ("AUTHOR", False),
        ("SESSIONS_DIR", True),  # a plural word counts too
        ("HOME", False),
        ("KEYBOARD", True),  # the older fragment rule: KEY anywhere
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert environment.is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("postgres://u:p@h/db", True),
        ("mysql://root:@localhost/x", True),  # an empty password is still the password slot
        ("https://ghp_token@github.com/o/r", True),  # userinfo without a password
        ("user:pass@host", False),  # not a URL
        ("see https://host/a@b", False),  # @ in the path
        ("ftp://a:b@c", True),
        ("ops@example.com", False),
    ],
)
def test_url_values_with_userinfo(value: str, secret: bool) -> None:
    assert environment.is_secret_value(value) is secret


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("execution:\n  env:\n    inherit: some\n", "execution.env.inherit"),
        ("execution:\n  env:\n    pass: GITHUB_TOKEN\n", "execution.env.pass"),
        ("execution:\n  env:\n    set: {A: 1}\n", "execution.env.set.A"),
        ("execution:\n  env:\n    passthrough: [A]\n", "execution.env.passthrough"),
        ("agents:\n  ops:\n    execution:\n      env: all\n", "agents.ops.execution.env"),
    ],
)
def test_a_bad_env_setting_names_its_key(script_runner: Any, text: str, key: str) -> None:
    _write(text)
    res = script_runner.run(["holon", "debug", "prompt", "--json"])
    assert res.returncode == 2
    err = json.loads(res.stdout)["error"]
    assert err["kind"] == "config_error" and key in err["message"]


# ------------------------------------------------------- real commands


@pytest.mark.parametrize("inherit", MODES)
def test_exec_command_sees_no_secret(
    secret_env: None, call: Call, ctx: ToolContext, inherit: str
) -> None:
    """The default sandbox (auto) included: what bwrap starts is this environment."""
    _write(_config(inherit, ("GH_PAT", "LAB_LLM_ACCESS")))
    ctx.config = load_config()
    r = call("ExecCommand", cmd="cat /proc/self/environ", max_output_tokens=20000)
    assert r.ok and r.data["exit_status"] == 0, r.content
    _check(_parse_env(r.data["stdout_preview"]), inherit, ("GH_PAT", "LAB_LLM_ACCESS"))


@pytest.mark.parametrize("inherit", MODES)
def test_task_run_sees_no_secret(
    secret_env: None, script_runner: Any, tmp_path: Path, inherit: str
) -> None:
    _write(_config(inherit))
    wd = tmp_path / "wd"
    wd.mkdir()
    r = script_runner.run(
        [
            "holon",
            "task",
            "run",
            "--workdir",
            str(wd),
            "--json",
            "--",
            "cat /proc/self/environ > env.dump",
        ],
        env=dict(os.environ),
        print_result=False,
    )
    assert r.returncode == 0, r.stderr
    tid = json.loads(r.stdout)["data"]["task_id"]
    end = time.monotonic() + 20
    while True:
        st = json.loads(
            script_runner.run(["holon", "task", "status", tid, "--json"], print_result=False).stdout
        )["data"]["task"]
        if st["status"] not in ("running", "starting") or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert st["status"] == "completed", st
    _check(_parse_env((wd / "env.dump").read_text()), inherit)
    # the supervisor reported to this home although the command's environment
    # (inherit none or core) does not name HOLON_HOME
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.tasks import plane

    store = open_agent(None)
    while not plane.read_task(store, tid).get("result_message_id") and time.monotonic() < end:
        time.sleep(0.05)
    assert plane.read_task(store, tid).get("result_message_id")
