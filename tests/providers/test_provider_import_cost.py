"""What the HTTP transports cost a process before the first byte is sent:
no httpx at all (the standard-library client in ``http_client`` instead),
and TLS set up only for ``https``, once per process."""

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
from provider_helpers import build_request

from holon_cli.providers import http_client, http_common
from holon_cli.providers.http_common import HttpTarget, post_json

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
heavy = ("httpx", "httpcore", "h11", "http.client", "email.parser", "rich", "click")
loaded = [m for m in heavy if m in sys.modules]
print(json.dumps({"text": r.text, "loaded": loaded, "ca_loads": len(loads)}))
"""


def test_a_request_loads_no_http_library_and_no_tls(loopback: LoopbackServer) -> None:
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
    the test a fresh process-wide context and connection pool."""
    calls: list[Any] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *a: Any, **kw: Any) -> None:
        calls.append(a or kw)
        real(self, *a, **kw)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    monkeypatch.setattr(http_common, "_SSL_CONTEXT", None)
    monkeypatch.setattr(http_client, "POOL", http_client.Pool())
    for k in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(k, raising=False)
    return calls


def _target(url: str, timeout_s: float = 30.0) -> HttpTarget:
    return HttpTarget(provider="p", model_ref="p/m", url=url, timeout_s=timeout_s)


def test_plain_http_builds_no_tls_context(ca_loads: list[Any], loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body({"ok": 1}), Reply.json_body({"ok": 2}))
    for want in (1, 2):
        assert post_json(_target(f"{loopback.url}/v1/x"), {}, lambda obj: obj) == {"ok": want}
    assert ca_loads == []
    assert http_client.POOL.idle_count() == 1  # both requests went over one connection


def test_the_tls_context_is_built_once_per_process_and_verifies(ca_loads: list[Any]) -> None:
    first = http_common.ssl_context()
    assert http_common.ssl_context() is first
    assert len(ca_loads) == 1
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname


@pytest.mark.parametrize("var", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_ssl_cert_file_or_dir_replaces_the_bundled_cas(
    var: str, ca_loads: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import certifi

    (tmp_path / "corp-ca.pem").write_bytes(Path(certifi.where()).read_bytes())
    where = str(tmp_path / "corp-ca.pem") if var == "SSL_CERT_FILE" else str(tmp_path)
    monkeypatch.setenv(var, where)
    http_common.ssl_context()
    # create_default_context(cafile, capath) -> load_verify_locations(cafile, capath, None)
    ((cafile, capath, _),) = ca_loads
    assert (cafile if var == "SSL_CERT_FILE" else capath) == where
    assert certifi.where() not in (cafile, capath)


def test_an_unreadable_ca_bundle_is_a_configuration_error(
    ca_loads: list[Any], loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.providers.base import ProviderFailure
    from holon_cli.providers.openai_responses import OpenAIResponsesTransport

    missing = tmp_path / "no-such-ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    # https to the loopback port: the TCP connect succeeds, then TLS needs the context
    https_url = f"https://127.0.0.1:{loopback.port}/v1"
    t = OpenAIResponsesTransport(model="m", base_url=https_url, api_key="k")
    with pytest.raises(ProviderFailure) as ei:
        t.complete(build_request())
    f = ei.value
    assert f.kind == "client_error" and not f.retryable
    assert f"cannot load the CA certificates from SSL_CERT_FILE={missing}" in f.message
    assert http_common._SSL_CONTEXT is None  # nothing half-built is kept: fixing the file works
