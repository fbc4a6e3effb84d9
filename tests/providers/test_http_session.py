"""The process's one httpx2 client (``providers/http_session.py``): built
lazily, once per process (again when the proxy or CA environment changes),
dropped by a forked child; env proxies and ``no_proxy``; ``SSL_CERT_FILE``;
configuration mistakes as clear ``client_error`` failures."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_servers import ForwardProxy, Peer, ScriptedServer, make_cert, response, server_context
from loopback import LoopbackServer, Reply, closed_port

from holon_cli.providers import http_session
from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.http_common import HttpTarget, post_json
from holon_cli.providers.openai_responses import OpenAIResponsesTransport

ROOT = Path(__file__).resolve().parents[2]
TEXT_OK = {
    "id": "resp_1",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    ],
}


@pytest.fixture(autouse=True)
def _fresh_client() -> Iterator[None]:
    http_session.reset()
    yield
    http_session.reset()


def answering(peer: Peer) -> None:
    while (req := peer.read_request()) is not None:
        peer.send(response(json.dumps({"path": req.target}).encode()))


@pytest.fixture
def origin() -> Iterator[ScriptedServer]:
    with ScriptedServer(answering) as srv:
        yield srv


def get(url: str, **kw: Any) -> Any:
    return post_json(HttpTarget("p", "p/m", url, timeout_s=5, **kw), {}, lambda obj: obj)


def fails(url: str, **kw: Any) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as ei:
        get(url, **kw)
    return ei.value


# ------------------------------------------------------------- the client

_PROBE = """
import json, sys
from holon_cli.providers import http_common
before = "httpx2" in sys.modules
from holon_cli.model.provider import ConversationItem, PromptFrame
from holon_cli.providers.base import ProviderRequest
from holon_cli.providers.openai_responses import OpenAIResponsesTransport
t = OpenAIResponsesTransport(model="m", base_url=sys.argv[1], api_key="k")
r = t.complete(ProviderRequest(PromptFrame("s"), [ConversationItem("user", "hi")], []))
print(json.dumps({"text": r.text, "before": before, "after": "httpx2" in sys.modules,
                  "httpx": "httpx" in sys.modules}))
"""


def test_httpx2_loads_only_when_a_request_is_sent(loopback: LoopbackServer) -> None:
    loopback.queue(Reply.json_body(TEXT_OK))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, f"{loopback.url}/v1"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert result == {"text": "hi", "before": False, "after": True, "httpx": False}


def test_one_client_per_process_rebuilt_when_the_proxy_environment_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = http_session.client()
    assert http_session.client() is first
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,example.invalid")
    second = http_session.client()
    assert second is not first and first.is_closed
    assert http_session.client() is second


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_drops_the_parents_client(origin: ScriptedServer) -> None:
    assert get(f"{origin.url}/one") == {"path": "/one"}
    parent = http_session._client
    assert parent is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            ok = http_session._client is None and http_session._lock.acquire(timeout=2)
            http_session._lock.release()
            # kept, not freed (freeing writes to the pages the parent shares)
            ok = ok and http_session._parents[-1] is parent and not parent.is_closed
            code = 0 if ok and get(f"{origin.url}/child") == {"path": "/child"} else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert http_session._client is parent
    assert get(f"{origin.url}/two") == {"path": "/two"}  # the parent's connection is intact
    assert origin.accepted == 2  # the parent's one, and the child's own


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_while_another_thread_holds_the_client_lock_does_not_deadlock_the_child() -> None:
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with http_session._lock:
            held.set()
            release.wait(5)

    th = threading.Thread(target=holder)
    th.start()
    held.wait(5)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 3
            try:
                code = 0 if http_session._lock.acquire(timeout=2) else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        th.join(5)
    assert os.waitstatus_to_exitcode(status) == 0


# ----------------------------------------------------------------- proxies


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy() as p:
        yield p


def test_an_env_proxy_carries_http_requests_in_absolute_form(
    origin: ScriptedServer, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", proxy.url("u:pw"))
    monkeypatch.delenv("NO_PROXY")
    assert get(f"{origin.url}/via") == {"path": "/via"}
    (seen,) = proxy.requests
    assert seen.target == f"{origin.url}/via"
    assert seen.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"u:pw").decode()


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "*", "127.0.0.0/8"])
def test_no_proxy_sends_directly(
    origin: ScriptedServer, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    monkeypatch.setenv("http_proxy", proxy.url())
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert get(f"{origin.url}/direct") == {"path": "/direct"}
    assert proxy.requests == []


def test_a_proxy_that_is_down_is_a_connection_failure_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("http_proxy", f"http://user:hunter2@127.0.0.1:{closed_port()}")
    monkeypatch.delenv("NO_PROXY")
    f = fails("http://example.invalid/v1")
    assert f.kind == "connection" and f.retryable
    assert "hunter2" not in f.message and "hunter2" not in " ".join(f.source_chain)


def test_a_socks_proxy_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import socksio  # noqa: F401

        pytest.skip("socksio is installed: httpx2 speaks SOCKS")
    except ImportError:
        pass
    monkeypatch.setenv("all_proxy", "socks5://127.0.0.1:1080")
    monkeypatch.delenv("NO_PROXY")
    f = fails("http://example.invalid/v1")
    assert f.kind == "client_error" and not f.retryable
    assert "unsupported proxy in the environment" in f.message and "http://" in f.message


# --------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI (package openssl)")
    d = tmp_path_factory.mktemp("certs")
    return {
        "good": make_cert(d, "localhost", "DNS:localhost,IP:127.0.0.1"),
        "wrong": make_cert(d, "elsewhere", "DNS:elsewhere.invalid"),
    }


@pytest.fixture
def tls_origin(certs: dict[str, tuple[Path, Path]]) -> Iterator[ScriptedServer]:
    with ScriptedServer(answering, tls=server_context(*certs["good"])) as srv:
        yield srv


def https(srv: ScriptedServer, host: str = "127.0.0.1") -> str:
    return f"https://{host}:{srv.port}/secure"


def test_https_trusts_the_ca_in_ssl_cert_file(
    tls_origin: ScriptedServer, certs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["good"][0]))
    assert get(https(tls_origin)) == {"path": "/secure"}
    assert get(https(tls_origin, "localhost")) == {"path": "/secure"}


def test_https_trusts_the_cas_in_ssl_cert_dir(
    tls_origin: ScriptedServer, certs: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI (package openssl)")
    cert = certs["good"][0]
    subject_hash = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(cert)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (tmp_path / f"{subject_hash}.0").write_bytes(cert.read_bytes())
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert get(https(tls_origin)) == {"path": "/secure"}


def test_an_untrusted_certificate_is_a_connection_failure(
    tls_origin: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    f = fails(https(tls_origin))
    assert f.kind == "connection" and f.stage == "connect"
    assert "CERTIFICATE_VERIFY_FAILED" in " ".join(f.source_chain)


def test_a_hostname_mismatch_is_refused(certs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedServer(answering, tls=server_context(*certs["wrong"])) as srv:
        monkeypatch.setenv("SSL_CERT_FILE", str(certs["wrong"][0]))
        f = fails(https(srv))
    assert f.kind == "connection" and "match" in " ".join(f.source_chain).lower()


def test_an_unreadable_ssl_cert_file_is_a_configuration_error_that_a_fix_clears(
    tls_origin: ScriptedServer, certs: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    f = fails(https(tls_origin))
    assert f.kind == "client_error" and not f.retryable
    assert f"cannot load the CA certificates from SSL_CERT_FILE={missing}" in f.message
    assert http_session._trust is not None and not http_session._trust.loaded
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["good"][0]))
    assert get(https(tls_origin)) == {"path": "/secure"}


_TRUST_PROBE = """
import json, ssl, sys
loads = []
_real = ssl.SSLContext.load_verify_locations
def _counting(self, *a, **kw):
    loads.append(1)
    return _real(self, *a, **kw)
ssl.SSLContext.load_verify_locations = _counting
from holon_cli.providers.http_common import HttpTarget, post_json
counts = []
for url in sys.argv[1:]:
    try:
        post_json(HttpTarget("p", "p/m", url, timeout_s=5), {}, lambda obj: obj)
    except Exception as exc:
        pass
    counts.append(len(loads))
print(json.dumps(counts))
"""


def test_the_ca_store_loads_on_the_first_https_request_only(
    origin: ScriptedServer, tls_origin: ScriptedServer, certs: Any
) -> None:
    """A plain ``http://`` endpoint (a local model server) never loads the CA
    store; the first ``https`` request loads it once for the process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1"}
    env["SSL_CERT_FILE"] = str(certs["good"][0])
    urls = [f"{origin.url}/a", f"{origin.url}/b", https(tls_origin), https(tls_origin)]
    out = subprocess.run(
        [sys.executable, "-c", _TRUST_PROBE, *urls],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(out.stdout) == [0, 0, 1, 1]
    assert len(tls_origin.requests) == 2


def test_https_through_a_connect_tunnel(
    tls_origin: ScriptedServer, proxy: ForwardProxy, certs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["good"][0]))
    monkeypatch.setenv("https_proxy", proxy.url("u:pw"))
    monkeypatch.delenv("NO_PROXY")
    assert get(https(tls_origin)) == {"path": "/secure"}
    assert get(https(tls_origin)) == {"path": "/secure"}  # the tunnel is kept
    assert proxy.server.accepted == 1
    (seen,) = proxy.requests
    assert (seen.method, seen.target) == ("CONNECT", f"127.0.0.1:{tls_origin.port}")
    assert "proxy-authorization" not in tls_origin.requests[0].headers


def test_https_through_an_https_proxy(
    tls_origin: ScriptedServer, certs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS inside TLS: the proxy's certificate and the endpoint's are both checked."""
    with ForwardProxy(tls=server_context(*certs["good"])) as tls_proxy:
        monkeypatch.setenv("SSL_CERT_FILE", str(certs["good"][0]))
        monkeypatch.setenv("https_proxy", tls_proxy.url())
        monkeypatch.delenv("NO_PROXY")
        assert get(https(tls_origin)) == {"path": "/secure"}
        assert [r.method for r in tls_proxy.requests] == ["CONNECT"]


def test_a_transport_over_https_with_a_corporate_ca(
    tls_origin: ScriptedServer, certs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole stack, as a user behind a TLS-inspecting proxy configures it."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["good"][0]))
    t = OpenAIResponsesTransport(model="m", base_url=f"https://localhost:{tls_origin.port}/v1",
                                 api_key="sk-secret")  # fmt: skip
    with pytest.raises(ProviderFailure) as ei:  # the origin echoes a path, not a response
        t.complete(_request())
    assert ei.value.kind == "invalid_response" and "sk-secret" not in ei.value.message
    assert tls_origin.requests[0].headers["authorization"] == "Bearer sk-secret"


def _request() -> Any:
    from provider_helpers import build_request

    return build_request()


def test_the_client_sends_our_user_agent_and_no_redirects_are_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def redirecting(peer: Peer) -> None:
        while peer.read_request() is not None:
            peer.send(response(b"", "307 Temporary Redirect", {"location": "http://x.invalid/"}))

    with ScriptedServer(redirecting) as srv:
        f = fails(f"{srv.url}/v1")
        assert f.kind == "client_error" and "redirecting to http://x.invalid/" in f.message
        assert len(srv.requests) == 1
        assert srv.requests[0].headers["user-agent"].startswith("holon-cli/")
