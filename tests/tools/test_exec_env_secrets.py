"""Issue 31 item 26: secret-like variables never reach a model-run command.

The reliability probe set 24 secret-like variables and saw 14 of them from a
command. The same list runs here through a real ``ExecCommand`` (forked
supervisor) and a real ``holon task run`` (detached ``python -S`` supervisor):
only the plain variables and those ``runtime.exec_env_passthrough`` names
arrive.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime.tasks import procs
from holon_cli.store.config import load_config
from holon_cli.store.layout import HomeLayout
from holon_cli.tools.base import ToolContext, ToolResult

Call = Callable[..., ToolResult]

# the probe's 24 secret-like variables, as a developer's shell would have them
SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
    "AWS_SESSION_TOKEN": "FQoGZXIvYXdzE",
    "GITHUB_TOKEN": "ghp_example",
    "GH_TOKEN": "gho_example",
    "NPM_TOKEN": "npm_example",
    "OPENAI_API_KEY": "sk-example",
    "ANTHROPIC_API_KEY": "sk-ant-example",
    "STRIPE_SECRET": "sk_live_example",
    "SECRET_KEY_BASE": "abc123",
    "DJANGO_SECRET": "django-insecure",
    "PGPASSWORD": "pgpass",
    "MYSQL_PWD_PASSWD": "mysqlpass",
    "SMTP_Password": "mailpass",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/sa.json",
    "AZURE_CLIENT_CREDENTIAL": "azcred",
    "HOLON_CONTROL_TOKEN": "ctl",
    "SSH_KEY_PATH": "/home/u/.ssh/id_ed25519",
    "private_key": "-----BEGIN",
    # secrets by value: URLs carrying a password
    "DATABASE_URL": "postgres://u:p@h/db",
    "REDIS_URL": "redis://:hunter2@cache:6379/0",
    "HTTPS_PROXY": "http://proxyuser:proxypass@proxy.corp:3128",
    "MIRRORS": "https://a.example/x,https://me:pw@b.example/y",
    # the provider's own credential, whatever its name (config below)
    "LAB_LLM_ACCESS": "the-model-credential",
}
PLAIN = {
    "PLAIN_VALUE": "visible",
    "PUBLIC_URL": "https://user@example.com/path",  # a user but no password
    "CONTACT": "ops@example.com",
}
CONFIG = """\
model: lab/small
providers:
  lab:
    transport: openai_chat_completions
    base_url: http://127.0.0.1:9/v1
    api_key_env: LAB_LLM_ACCESS
runtime:
  exec_env_passthrough: [NPM_TOKEN, DATABASE_URL]
"""
PASSED = {"NPM_TOKEN", "DATABASE_URL"}


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(SECRETS) == 24
    for k, v in {**SECRETS, **PLAIN}.items():
        monkeypatch.setenv(k, v)
    home = HomeLayout.current().root
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG)


def _parse_env(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.split("\0"):
        if "=" in line:
            k, _, v = line.partition("=")
            out[k] = v
    return out


def _assert_filtered(seen: dict[str, str]) -> None:
    leaked = sorted(k for k in SECRETS if k in seen and k not in PASSED)
    assert leaked == [], f"secrets reached the command: {leaked}"
    for k in PASSED:
        assert seen.get(k) == SECRETS[k], k
    for k, v in PLAIN.items():
        assert seen.get(k) == v, k
    assert seen.get(procs.MARKER_VAR)


def test_the_rule_by_name_value_and_key_env() -> None:
    cfg = {"providers": {"lab": {"api_key_env": "LAB_LLM_ACCESS"}}}
    env = procs.command_env(cfg, base={**SECRETS, **PLAIN})
    assert not set(SECRETS) & set(env)
    assert {k: env[k] for k in PLAIN} == PLAIN
    # without the config the provider's variable looks harmless
    assert "LAB_LLM_ACCESS" in procs.command_env({}, base=SECRETS)
    # passthrough wins over every rule
    cfg2 = {**cfg, "runtime": {"exec_env_passthrough": ["LAB_LLM_ACCESS", "REDIS_URL"]}}
    env = procs.command_env(cfg2, base=SECRETS)
    assert set(env) == {"LAB_LLM_ACCESS", "REDIS_URL"}
    # the typed config (dataclasses) works the same way
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
            }
        },
    )
    assert "LAB_LLM_ACCESS" not in procs.command_env(typed, base=SECRETS)


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("postgres://u:p@h/db", True),
        ("mysql://root:@localhost/x", True),  # an empty password is still the password slot
        ("https://user@host/x", False),
        ("user:pass@host", False),  # not a URL
        ("see https://host/a@b", False),  # @ in the path
        ("ftp://a:b@c", True),
    ],
)
def test_url_values_with_a_password(value: str, secret: bool) -> None:
    assert procs.is_secret_value(value) is secret


def test_exec_command_sees_no_secret(secret_env: None, call: Call, ctx: ToolContext) -> None:
    ctx.config = load_config()
    r = call("ExecCommand", cmd="env", max_output_tokens=20000)
    assert r.ok and r.data["exit_status"] == 0, r.content
    _assert_filtered(_parse_env(r.data["stdout_preview"].replace("\n", "\0")))


def test_task_run_sees_no_secret(secret_env: None, script_runner: Any, tmp_path: Path) -> None:
    dump = tmp_path / "env.dump"
    r = script_runner.run(
        ["holon", "task", "run", "--json", "--", f"cat /proc/self/environ > {dump}"],
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
        if st["status"] != "running" and st["status"] != "starting" or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert st["status"] == "completed", st
    _assert_filtered(_parse_env(dump.read_text()))
