"""Model refs to transports, and the model candidate chain.

Owns: which transport serves a model ref (``openai/``, ``anthropic/``,
``openai-codex/``, ``scripted:``, or a provider declared under ``providers:``
in ``$HOLON_HOME/config.yaml``, which wins over a built-in of the same name),
where its endpoint and credential come from, and the precedence rules of
model selection. Resolution fails closed with a classified
:class:`ProviderFailure` (``unsupported_transport``, ``missing_credentials``)
so the fallback chain can record it and move on. Transport modules (and their
HTTP client) are imported only when a ref of that kind is resolved.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from holon_cli.errors import ConfigError

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.providers.base import ProviderFailure, Transport

# Read-only surfaces (`holon status`, `agent model`) import this module for the
# precedence rules alone: provider values, http_common (email.utils) and the
# transports load only inside the functions that resolve a transport.

# transport kind -> (module, class). Modules (and their HTTP client) load only
# when a ref of that kind is resolved.
TRANSPORTS: dict[str, tuple[str, str]] = {
    "openai_responses": ("holon_cli.providers.openai_responses", "OpenAIResponsesTransport"),
    "openai_codex": ("holon_cli.providers.openai_codex", "OpenAICodexTransport"),
    "anthropic_messages": ("holon_cli.providers.anthropic", "AnthropicTransport"),
    "openai_chat_completions": ("holon_cli.providers.openai_chat", "OpenAIChatTransport"),
}

BUILTIN = {
    # provider: (transport kind, base-url env, default base url, key env)
    "openai": (
        "openai_responses",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    ),
    "openai-codex": (
        "openai_codex",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    ),
    "anthropic": (
        "anthropic_messages",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    ),
}
# the kinds a provider declared in config.yaml may name
CONFIG_TRANSPORTS = ("openai_chat_completions", "openai_responses", "anthropic_messages")

NO_MODEL_HINT = (
    "set HOLON_MODEL, pass --model, or add `model:` to config.yaml; "
    "try scripted:examples/hello.yaml offline"
)


def _load_config() -> HolonConfig:
    from holon_cli.store.config import load_config

    return load_config()


def known_providers(config: HolonConfig | None = None) -> list[str]:
    names = set(BUILTIN) | set((config or {}).get("providers") or {})
    return sorted(names) + ["scripted:<path>"]


def _timeout(spec: Mapping[str, Any], config: HolonConfig) -> float:
    for v in (spec.get("timeout_s"), (config.get("runtime") or {}).get("provider_timeout_s")):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v)
    from holon_cli.providers.base import DEFAULT_TIMEOUT_S

    return DEFAULT_TIMEOUT_S


def _max_output(spec: Mapping[str, Any], config: HolonConfig) -> int | None:
    for v in (
        spec.get("max_output_tokens"),
        (config.get("runtime") or {}).get("max_output_tokens"),
    ):
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _missing_key(ref: str, env_name: str) -> ProviderFailure:
    from holon_cli.providers.base import ProviderFailure

    return ProviderFailure(
        "missing_credentials",
        f"{ref} needs an API key but ${env_name} is not set",
        stage="request",
        provider=ref.partition("/")[0],
        model_ref=ref,
        hint=f"export {env_name}=... (or choose another model with --model / HOLON_MODEL)",
    )


class Endpoint(NamedTuple):
    """Where a model ref goes, before any transport is built or credential checked."""

    ref: str
    kind: str  # a TRANSPORTS key, or "scripted"
    provider: str
    model: str
    base_url: str | None
    key_env: str | None  # the variable the credential comes from; None: none needed
    spec: Mapping[str, Any]  # the config.yaml provider entry ({} for built-ins)


def endpoint(
    model_ref: str, config: HolonConfig | None = None, env: Mapping[str, str] | None = None
) -> Endpoint:
    """The transport kind, endpoint and credential variable of ``model_ref``.
    Raises ``ProviderFailure`` (``unsupported_transport``) when no transport
    can serve it; reads no credential and touches no network."""
    from holon_cli.providers.base import ProviderFailure

    env = os.environ if env is None else env
    ref = model_ref.strip()
    if ref.startswith("scripted:"):
        path = ref[len("scripted:") :]
        if not path:
            raise ProviderFailure(
                "unsupported_transport",
                "model ref 'scripted:' needs a script path",
                provider="scripted",
                model_ref=ref,
                hint="e.g. scripted:examples/hello.yaml",
            )
        return Endpoint(ref, "scripted", "scripted", path, None, None, {})
    if config is None:
        config = _load_config()
    provider, sep, model = ref.partition("/")
    if not sep or not provider or not model:
        raise ProviderFailure(
            "unsupported_transport",
            f"invalid model ref {model_ref!r}",
            model_ref=ref,
            hint="use <provider>/<model> (e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5) "
            "or scripted:<path>",
        )
    declared = (config.get("providers") or {}).get(provider)
    if isinstance(declared, Mapping):
        return _declared_endpoint(ref, provider, model, declared)
    if provider not in BUILTIN:
        raise ProviderFailure(
            "unsupported_transport",
            f"unknown model provider {provider!r} in {ref!r}",
            provider=provider,
            model_ref=ref,
            hint=f"known providers: {', '.join(known_providers(config))}; "
            "declare others under `providers:` in config.yaml",
        )
    kind, url_env, default_url, key_env = BUILTIN[provider]
    return Endpoint(ref, kind, provider, model, env.get(url_env) or default_url, key_env, {})


def _declared_endpoint(ref: str, provider: str, model: str, spec: Mapping[str, Any]) -> Endpoint:
    from holon_cli.providers.base import ProviderFailure

    kind = spec.get("transport")
    if kind not in CONFIG_TRANSPORTS:
        raise ProviderFailure(
            "unsupported_transport",
            f"provider {provider!r} declares transport {kind!r}, which holon does not implement",
            provider=provider,
            model_ref=ref,
            hint=f"use one of: {', '.join(CONFIG_TRANSPORTS)}",
        )
    base_url = spec.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        raise ProviderFailure(
            "unsupported_transport",
            f"provider {provider!r} has no base_url in config.yaml",
            provider=provider,
            model_ref=ref,
            hint=f"add providers.{provider}.base_url",
        )
    key_env = spec.get("api_key_env")
    return Endpoint(
        ref, str(kind), provider, model, base_url, str(key_env) if key_env else None, spec
    )


def resolve_transport(
    model_ref: str,
    *,
    config: HolonConfig | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Transport:
    """The transport serving ``model_ref``. Raises ``ProviderFailure`` (fail-fast
    kinds) when the ref cannot be served; never touches the network."""
    env = os.environ if env is None else env
    if config is None and not model_ref.strip().startswith("scripted:"):
        config = _load_config()
    ep = endpoint(model_ref, config, env)
    if ep.kind == "scripted":
        from holon_cli.providers.scripted import ScriptedTransport

        return ScriptedTransport(ep.model, cwd=cwd)
    assert config is not None
    api_key: str | None = None
    if ep.key_env:
        api_key = env.get(ep.key_env) or None
        if not api_key:
            raise _missing_key(ep.ref, ep.key_env)
    kwargs: dict[str, object] = {
        "model": ep.model,
        "provider": ep.provider,
        "base_url": ep.base_url,
        "api_key": api_key,
        "key_env": ep.key_env,
        "timeout_s": _timeout(ep.spec, config),
        "max_output_tokens": _max_output(ep.spec, config),
    }
    if ep.spec:  # declared in config.yaml: extra headers, streaming
        headers = ep.spec.get("headers") or {}
        kwargs["headers"] = (
            {str(k): str(v) for k, v in headers.items()} if isinstance(headers, Mapping) else None
        )
        kwargs["stream"] = bool(ep.spec.get("stream", False))
    kwargs.update(_wire_options(ep.kind, config))
    return _construct(ep.kind, **kwargs)


def _wire_options(kind: str, config: HolonConfig) -> dict[str, bool]:
    """The opt-in wire features of ``runtime`` a transport kind understands."""
    rt = config.get("runtime") or {}
    if kind == "openai_responses":
        return {"incremental": rt.get("openai_incremental") is True}
    if kind == "anthropic_messages":
        return {"context_management": rt.get("anthropic_context_management") is True}
    return {}


def _construct(kind: str, **kwargs: Any) -> Transport:
    """The transport of ``kind``, from the one table; the only place a transport
    class is named."""
    module, cls = TRANSPORTS[kind]
    transport: Transport = getattr(importlib.import_module(module), cls)(**kwargs)
    return transport


# ---------------------------------------------------------- model selection


def _split_refs(text: str) -> list[str]:
    return [m.strip() for m in text.split(",") if m.strip()]


def model_chain(
    agent_override: str | None,
    cli_model: str | None = None,
    env: Mapping[str, str] | None = None,
    config: HolonConfig | None = None,
    *,
    cli_fallbacks: list[str] | None = None,
) -> tuple[str, list[str]]:
    """``(primary, fallbacks)`` for a turn.

    Primary: ``--model`` > the agent's override > ``$HOLON_MODEL`` > config
    ``model``. Fallbacks: ``cli_fallbacks`` > ``$HOLON_FALLBACK_MODELS``
    (comma-separated; set but empty means none) > config ``fallback_models``.
    Duplicates and the primary itself are removed from the fallbacks.
    """
    env = os.environ if env is None else env
    if config is None:
        config = _load_config()
    primary = (
        (cli_model or "").strip()
        or (agent_override or "").strip()
        or (env.get("HOLON_MODEL") or "").strip()
        or str(config.get("model") or "").strip()
    )
    if not primary:
        raise ConfigError("no model configured", hint=NO_MODEL_HINT)
    if cli_fallbacks is not None:
        fallbacks = [m.strip() for m in cli_fallbacks if m and m.strip()]
    elif env.get("HOLON_FALLBACK_MODELS") is not None:
        fallbacks = _split_refs(env["HOLON_FALLBACK_MODELS"])
    else:
        fallbacks = [
            str(m).strip() for m in (config.get("fallback_models") or []) if str(m).strip()
        ]
    out: list[str] = []
    for ref in fallbacks:
        if ref != primary and ref not in out:
            out.append(ref)
    return primary, out


ModelSource = Literal["flag", "agent", "HOLON_MODEL", "config", "default"]


def model_source(
    agent_override: str | None,
    cli_model: str | None = None,
    env: Mapping[str, str] | None = None,
    config: HolonConfig | None = None,
) -> ModelSource:
    """Where the primary model of :func:`model_chain` comes from, in its
    precedence order: ``--model`` (``flag``), the agent's override
    (``agent``), ``$HOLON_MODEL``, ``config.yaml`` ``model``; ``default``
    when none is set (there is no built-in model: the chain is an error)."""
    env = os.environ if env is None else env
    if config is None:
        config = _load_config()
    if (cli_model or "").strip():
        return "flag"
    if (agent_override or "").strip():
        return "agent"
    if (env.get("HOLON_MODEL") or "").strip():
        return "HOLON_MODEL"
    if str(config.get("model") or "").strip():
        return "config"
    return "default"


def model_state(
    agent_override: str | None,
    env: Mapping[str, str] | None = None,
    config: HolonConfig | None = None,
) -> dict[str, object]:
    """The spec's ``AgentModelState`` (runtime default vs. agent override)."""
    env = os.environ if env is None else env
    if config is None:
        config = _load_config()
    default = (
        (env.get("HOLON_MODEL") or "").strip() or str(config.get("model") or "").strip() or None
    )
    effective, fallbacks = (
        (None, [])
        if not (agent_override or default)
        else model_chain(agent_override, None, env, config)
    )
    out: dict[str, object] = {
        "source": "agent_override" if agent_override else "runtime_default",
        "runtime_default_model": default,
        "effective_model": effective,
        "effective_fallback_models": fallbacks,
    }
    if agent_override:
        out["override_model"] = agent_override
    return out
