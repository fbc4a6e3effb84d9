"""Model refs to transports (built-ins, config-declared providers, scripted),
fail-closed resolution, and the model-selection precedence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from loopback import LoopbackServer, Reply
from provider_helpers import build_request

from holon_cli.errors import ConfigError
from holon_cli.providers.anthropic import AnthropicTransport
from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.openai_chat import OpenAIChatTransport
from holon_cli.providers.openai_codex import OpenAICodexTransport
from holon_cli.providers.openai_responses import OpenAIResponsesTransport
from holon_cli.providers.registry import model_chain, model_state, resolve_transport
from holon_cli.providers.scripted import ScriptedTransport


def failure(ref: str, **kw: object) -> ProviderFailure:
    with pytest.raises(ProviderFailure) as ei:
        resolve_transport(ref, **kw)  # type: ignore[arg-type]
    return ei.value


# ---------------------------------------------------------------- built-ins


def test_builtin_providers_and_endpoints() -> None:
    env = {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}
    t = resolve_transport("openai/gpt-4.1", config={}, env=env)
    assert isinstance(t, OpenAIResponsesTransport) and not isinstance(t, OpenAICodexTransport)
    assert (t.provider, t.model_ref, t.base_url) == (
        "openai",
        "openai/gpt-4.1",
        "https://api.openai.com/v1",
    )
    c = resolve_transport("openai-codex/gpt-5-codex", config={}, env=env)
    assert isinstance(c, OpenAICodexTransport) and c.provider == "openai-codex" and c.stream
    a = resolve_transport("anthropic/claude-sonnet-4-5", config={}, env=env)
    assert isinstance(a, AnthropicTransport) and a.base_url == "https://api.anthropic.com"
    assert "sk-a" not in repr(a)


def test_base_url_env_overrides() -> None:
    env = {
        "OPENAI_API_KEY": "k",
        "OPENAI_BASE_URL": "http://proxy.local/v1",
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": "http://claude.local",
    }
    assert resolve_transport("openai/x", config={}, env=env).base_url == "http://proxy.local/v1"  # type: ignore[attr-defined]
    assert resolve_transport("anthropic/x", config={}, env=env).base_url == "http://claude.local"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("ref", "var"),
    [
        ("openai/gpt-4.1", "OPENAI_API_KEY"),
        ("openai-codex/gpt-5", "OPENAI_API_KEY"),
        ("anthropic/claude", "ANTHROPIC_API_KEY"),
    ],
)
def test_missing_api_key_fails_fast_naming_the_variable(ref: str, var: str) -> None:
    f = failure(ref, config={}, env={var: ""})
    assert f.kind == "missing_credentials" and not f.retryable
    assert var in f.message and f.hint and var in f.hint
    assert f.model_ref == ref


def test_unknown_provider_names_known_ones() -> None:
    f = failure(
        "mistral/large",
        config={
            "providers": {"local": {"transport": "openai_chat_completions", "base_url": "http://x"}}
        },
        env={},
    )
    assert f.kind == "unsupported_transport"
    assert "mistral" in f.message and f.hint
    for name in ("openai", "anthropic", "openai-codex", "local", "scripted:<path>"):
        assert name in f.hint


@pytest.mark.parametrize("ref", ["gpt-4.1", "openai/", "/model", "scripted:"])
def test_invalid_refs_fail_closed(ref: str) -> None:
    assert failure(ref, config={}, env={}).kind == "unsupported_transport"


def test_scripted_needs_no_config_or_credentials(tmp_path: Path) -> None:
    t = resolve_transport(f"scripted:{tmp_path / 'x.yaml'}", config=None, env={})
    assert isinstance(t, ScriptedTransport)


# -------------------------------------------------------- config providers


def test_config_declared_chat_provider_end_to_end(loopback: LoopbackServer) -> None:
    config = {
        "providers": {
            "local": {
                "transport": "openai_chat_completions",
                "base_url": f"{loopback.url}/v1",
                "api_key_env": "LOCAL_API_KEY",
                "timeout_s": 7,
                "headers": {"x-team": "a"},
            }
        }
    }
    t = resolve_transport("local/qwen2.5", config=config, env={"LOCAL_API_KEY": "lk"})
    assert (
        isinstance(t, OpenAIChatTransport) and t.model_ref == "local/qwen2.5" and t.timeout_s == 7.0
    )
    loopback.queue(
        Reply.json_body(
            {"choices": [{"message": {"content": "local says hi"}, "finish_reason": "stop"}]}
        )
    )
    assert t.complete(build_request()).text == "local says hi"
    r = loopback.requests[0]
    assert (
        r.path == "/v1/chat/completions"
        and r.headers["authorization"] == "Bearer lk"
        and r.headers["x-team"] == "a"
    )
    assert r.json()["model"] == "qwen2.5"


def test_config_provider_key_optional_but_enforced_when_declared() -> None:
    cfg = {
        "providers": {
            "ollama": {
                "transport": "openai_chat_completions",
                "base_url": "http://127.0.0.1:11434/v1",
            }
        }
    }
    t = resolve_transport("ollama/llama3", config=cfg, env={})
    assert isinstance(t, OpenAIChatTransport) and "authorization" not in t.target().headers
    cfg["providers"]["ollama"]["api_key_env"] = "OLLAMA_KEY"
    f = failure("ollama/llama3", config=cfg, env={})
    assert f.kind == "missing_credentials" and "OLLAMA_KEY" in (f.hint or "")


def test_config_provider_transports_and_stream_flag() -> None:
    cfg = {
        "runtime": {"provider_timeout_s": 33, "max_output_tokens": 1024},
        "providers": {
            "gw": {"transport": "openai_responses", "base_url": "http://gw/v1"},
            "gws": {"transport": "openai_responses", "base_url": "http://gw/v1", "stream": True},
            "bedrock-proxy": {
                "transport": "anthropic_messages",
                "base_url": "http://bp",
                "stream": True,
                "max_output_tokens": 4096,
            },
            "vllm": {
                "transport": "openai_chat_completions",
                "base_url": "http://v/v1",
                "stream": True,
            },
            "weird": {"transport": "grpc", "base_url": "http://w"},
        },
    }
    gw = resolve_transport("gw/m", config=cfg, env={})
    assert (
        isinstance(gw, OpenAIResponsesTransport)
        and not gw.stream
        and gw.timeout_s == 33
        and gw.max_output_tokens == 1024
    )
    gws = resolve_transport("gws/m", config=cfg, env={})
    assert isinstance(gws, OpenAIResponsesTransport) and gws.stream
    assert gws.build_body(build_request())["stream"] is True
    bp = resolve_transport("bedrock-proxy/claude", config=cfg, env={})
    assert isinstance(bp, AnthropicTransport) and bp.stream and bp.max_output_tokens == 4096
    v = resolve_transport("vllm/m", config=cfg, env={})
    assert isinstance(v, OpenAIChatTransport) and v.stream
    assert failure("weird/m", config=cfg, env={}).kind == "unsupported_transport"


def test_config_provider_overrides_builtin_name() -> None:
    cfg = {
        "providers": {
            "openai": {"transport": "openai_chat_completions", "base_url": "http://compat/v1"}
        }
    }
    t = resolve_transport("openai/gpt", config=cfg, env={})
    assert isinstance(t, OpenAIChatTransport) and t.base_url == "http://compat/v1"


def test_config_loaded_from_holon_home_when_not_given(holon_home: Path) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": {
                    "lm": {"transport": "openai_chat_completions", "base_url": "http://lm/v1"}
                }
            }
        )
    )
    assert isinstance(resolve_transport("lm/x", env={}), OpenAIChatTransport)


# -------------------------------------------------------------- model chain


def test_model_precedence() -> None:
    env = {"HOLON_MODEL": "openai/env"}
    cfg = {"model": "openai/config", "fallback_models": ["anthropic/cfg-fb"]}
    assert model_chain(None, None, {}, cfg) == ("openai/config", ["anthropic/cfg-fb"])
    assert model_chain(None, None, env, cfg)[0] == "openai/env"
    assert model_chain("openai/agent", None, env, cfg)[0] == "openai/agent"
    assert model_chain("openai/agent", "openai/flag", env, cfg)[0] == "openai/flag"


def test_fallback_precedence_and_dedupe() -> None:
    cfg = {"model": "a/1", "fallback_models": ["b/1"]}
    assert model_chain(None, None, {"HOLON_FALLBACK_MODELS": " c/1, a/1 ,c/1,, d/1"}, cfg) == (
        "a/1",
        ["c/1", "d/1"],
    )
    assert model_chain(None, None, {"HOLON_FALLBACK_MODELS": ""}, cfg) == (
        "a/1",
        [],
    )  # set but empty: none
    assert model_chain(None, None, {}, cfg, cli_fallbacks=["e/1"]) == ("a/1", ["e/1"])


def test_no_model_anywhere_is_config_error_with_hint() -> None:
    with pytest.raises(ConfigError) as ei:
        model_chain(None, None, {}, {})
    assert ei.value.exit_code == 2
    hint = ei.value.hint or ""
    assert (
        "HOLON_MODEL" in hint
        and "--model" in hint
        and "config.yaml" in hint
        and "scripted:examples/hello.yaml" in hint
    )


def test_model_chain_reads_config_file(holon_home: Path) -> None:
    holon_home.mkdir(parents=True, exist_ok=True)
    (holon_home / "config.yaml").write_text(
        "model: anthropic/from-file\nfallback_models: [openai/fb]\n"
    )
    assert model_chain(None, env={}) == ("anthropic/from-file", ["openai/fb"])


def test_model_state_shapes() -> None:
    cfg = {"model": "a/default", "fallback_models": ["b/fb"]}
    s = model_state(None, {}, cfg)
    assert s == {
        "source": "runtime_default",
        "runtime_default_model": "a/default",
        "effective_model": "a/default",
        "effective_fallback_models": ["b/fb"],
    }
    o = model_state("c/override", {}, cfg)
    assert (
        o["source"] == "agent_override"
        and o["effective_model"] == "c/override"
        and o["override_model"] == "c/override"
    )
    assert o["runtime_default_model"] == "a/default"
    assert model_state(None, {}, {})["effective_model"] is None


# ----------------------------------------------------------- import weight


def test_importing_registry_and_chain_does_not_import_httpx2() -> None:
    code = (
        "import sys, holon_cli.providers.registry, holon_cli.providers.chain, "
        "holon_cli.providers.scripted;"
        "print('httpx' in sys.modules, 'httpx2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
