"""``config.yaml`` ``ingress``: a bad value or a webhook secret the
environment lacks is a clear error naming the key, at `holon home check`
and when `holon serve` starts (which then binds nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from inprocess_cli import bind_runner, run  # noqa: F401 - bind_runner is an autouse fixture

from holon_cli.runtime.agents.lifecycle import open_agent


@pytest.fixture(autouse=True)
def _home() -> None:
    open_agent("main")


BAD = [
    ({"rate_per_minute": "fast"}, "ingress.rate_per_minute"),
    ({"rate_per_minute": 0}, "ingress.rate_per_minute"),
    (
        {"webhooks": {"gh": {"secret_env": "GH_SECRET", "scheme": "gitlab"}}},
        "ingress.webhooks.gh.scheme",
    ),
    (
        {"webhooks": {"gh": {"scheme": "github"}}},
        "ingress.webhooks.gh.scheme is set but no secret_env",
    ),
    ({"webhooks": {"s": {"secret_env": "NOT_WHSEC", "scheme": "standard"}}}, "whsec_"),
    ({"webhooks": {"gh": {"secret": "inline"}}}, "ingress.webhooks.gh.secret"),
]


@pytest.mark.parametrize(("ingress", "key"), BAD, ids=[k for _i, k in BAD])
def test_bad_ingress_config_names_the_key(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch, ingress: dict[str, Any], key: str
) -> None:
    monkeypatch.setenv("GH_SECRET", "s")
    monkeypatch.setenv("NOT_WHSEC", "whsec_not*base64")
    monkeypatch.delenv("HOLON_TEST_UNSET_SECRET", raising=False)
    (holon_home / "config.yaml").write_text(yaml.safe_dump({"ingress": ingress}))
    res = run("home", "check")
    assert res.returncode != 0
    assert key in res.stdout + res.stderr, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_a_secret_unset_in_this_shell_is_a_note_not_corruption(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 §6: `home check` from a login shell, the secret only in
    serve's environment: a note naming the key and variable, exit 0."""
    import json

    monkeypatch.delenv("HOLON_TEST_UNSET_SECRET", raising=False)
    cfg = {"ingress": {"webhooks": {"gh": {"secret_env": "HOLON_TEST_UNSET_SECRET"}}}}
    (holon_home / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = run("home", "check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ingress.webhooks.gh.secret_env: $HOLON_TEST_UNSET_SECRET is not set" in res.stderr
    assert "PROBLEM" not in res.stdout
    doc = json.loads(run("home", "check", "--json").stdout)
    assert doc["ok"] is True
    (note,) = [n for n in doc["data"]["notes"] if n.get("kind") == "secret_env_unset"]
    assert "HOLON_TEST_UNSET_SECRET" in note["message"]


@pytest.mark.slow
def test_serve_refuses_to_start_with_an_unset_secret(holon_home: Path, tmp_path: Path) -> None:
    cfg = {"ingress": {"webhooks": {"gh": {"secret_env": "HOLON_TEST_UNSET_SECRET"}}}}
    (holon_home / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = subprocess.run(
        [sys.executable, "-m", "holon_cli", "serve", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert (
        "ingress.webhooks.gh.secret_env" in out.stderr and "HOLON_TEST_UNSET_SECRET" in out.stderr
    )
    assert not (holon_home / "run" / "serve.json").exists()
    (holon_home / "config.yaml").write_text(yaml.safe_dump({"ingress": {"rate_per_minute": "x"}}))
    out = subprocess.run(
        [sys.executable, "-m", "holon_cli", "serve", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "ingress.rate_per_minute" in out.stderr


def test_good_ingress_config_checks_ok(holon_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_SECRET", "s")
    monkeypatch.setenv("STD", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    cfg = {
        "ingress": {
            "rate_per_minute": 120,
            "webhooks": {
                "github": {"secret_env": "GH_SECRET", "scheme": "github"},
                "stripe": {"secret_env": "STD", "scheme": "standard"},
                "ci": {},
            },
        }
    }
    (holon_home / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = run("home", "check")
    assert res.returncode == 0, res.stdout + res.stderr
