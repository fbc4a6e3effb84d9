"""What the HTTP transports cost a process before the first byte is sent:
httpx without its command-line module (which drags in rich, click and
pygments), and TLS set up only for ``https``, once per process."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply

from holon_cli.providers import http_common
from holon_cli.providers.http_common import HttpTarget

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, ssl, sys
loads = []
_real = ssl.SSLContext.load_verify_locations
def _counting(self, *a, **kw):
    loads.append(1)
    return _real(self, *a, **kw)
ssl.SSLContext.load_verify_locations = _counting
from holon_cli.model.provider import ConversationItem, PromptFrame
from holon_cli.providers.base import ProviderRequest
from holon_cli.providers.openai_responses import OpenAIResponsesTransport
t = OpenAIResponsesTransport(model="m", base_url=sys.argv[1], api_key="k")
r = t.complete(ProviderRequest(PromptFrame("s"), [ConversationItem("user", "hi")], []))
heavy = ("httpx._main", "rich", "pygments", "click")
loaded = [m for m in heavy if m in sys.modules]
print(json.dumps({"text": r.text, "loaded": loaded, "ca_loads": len(loads)}))
"""


def test_a_request_loads_neither_httpx_cli_nor_tls(loopback: LoopbackServer) -> None:
    loopback.queue(
        Reply.json_body(
            {
                "id": "r",
                "status": "completed",
                "output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}],
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(k, None)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, f"{loopback.url}/v1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result == {"text": "ok", "loaded": [], "ca_loads": 0}


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Counts CA bundle loads (the expensive part of a TLS context) and gives
    the test a fresh process-wide client pool and context."""
    calls: list[Any] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *a: Any, **kw: Any) -> None:
        calls.append(a or kw)
        real(self, *a, **kw)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    monkeypatch.setattr(http_common, "_CLIENTS", {})
    monkeypatch.setattr(http_common, "_SSL_CONTEXT", None)
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    return calls


def _target(url: str, timeout_s: float = 30.0) -> HttpTarget:
    return HttpTarget(provider="p", model_ref="p/m", url=url, timeout_s=timeout_s)


def test_plain_http_builds_no_tls_context(ca_loads: list[Any], loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body({"ok": 1}))
    with http_common._client(_target(f"{loopback.url}/v1/x")) as client:
        assert client.get(f"{loopback.url}/v1/x").json() == {"ok": 1}
    assert ca_loads == []


def test_https_context_is_built_once_per_process(ca_loads: list[Any]) -> None:
    with http_common._client(_target("https://api.example.invalid/v1", 30.0)) as a:
        pass
    with http_common._client(_target("https://other.example.invalid/v1", 60.0)) as b:
        pass
    assert a is not b  # two timeouts, two pooled clients ...
    assert len(ca_loads) == 1  # ... one CA bundle load
    assert http_common.ssl_context().verify_mode == ssl.CERT_REQUIRED
    assert http_common.ssl_context().check_hostname


def test_http_with_a_proxy_configured_still_verifies(
    ca_loads: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example.invalid:3128")
    with http_common._client(_target("http://127.0.0.1:9/v1")):
        pass
    assert len(ca_loads) == 1


def test_plain_http_context_refuses_tls_by_mistake() -> None:
    ctx = http_common._no_tls_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.get_ca_certs() == []
