"""The provider doctor: what each candidate of a model chain would use, and
whether it can be served, without sending a request.

Owns the report of ``holon debug providers``. Never reads a credential's
value into the report: only whether the variable that holds it is set.
Resolution goes through :func:`holon_cli.providers.registry.endpoint`, the
same step a turn takes, so the doctor and a real turn cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from holon_cli.providers.base import ProviderFailure
from holon_cli.providers.registry import endpoint

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.provider import PromptCapability

Credentials = Literal["present", "missing", "not_needed"]


class CandidateReport(TypedDict):
    model: str
    transport: str | None
    base_url: str | None
    credentials: Credentials
    credentials_env: str | None
    supported: bool
    reason: str | None
    # the opt-in wire features this candidate would use (never a header value)
    wire: WireFeatures


class WireFeatures(TypedDict, total=False):
    """The opt-in wire features a candidate would use (never a header value)."""

    prompt_capabilities: list[PromptCapability]
    incremental: bool
    store: bool
    cache_breakpoints: list[str]
    context_management: bool
    beta: list[str]


def describe_candidate(
    ref: str,
    *,
    config: HolonConfig,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> CandidateReport:
    """One candidate: transport, endpoint, whether its credential is set, and
    why it cannot be served (``supported: false`` + ``reason``) if not."""
    env = os.environ if env is None else env
    try:
        ep = endpoint(ref, config, env)
    except ProviderFailure as f:
        return _report(ref, None, None, "not_needed", None, f)
    if ep.kind == "scripted":
        from holon_cli.providers.scripted import ScriptedTransport

        try:
            ScriptedTransport(ep.model, cwd=cwd).preflight()
        except ProviderFailure as f:
            return _report(ref, "scripted", None, "not_needed", None, f)
        return _report(ref, "scripted", None, "not_needed", None, None)
    wire = wire_features(ep.kind, config, ep.spec)
    if ep.key_env is None:
        return _report(ref, ep.kind, ep.base_url, "not_needed", None, None, wire)
    if env.get(ep.key_env):
        return _report(ref, ep.kind, ep.base_url, "present", ep.key_env, None, wire)
    missing = f"${ep.key_env} is not set (export it, or choose another model)"
    return _report(ref, ep.kind, ep.base_url, "missing", ep.key_env, missing, wire)


def wire_features(kind: str, config: HolonConfig, spec: Mapping[str, Any]) -> WireFeatures:
    """What a transport kind adds to its requests under this config: its
    prompt capabilities (runtime spec: ``ProviderPromptCapability``),
    incremental Responses requests (and so stored responses), Anthropic cache
    breakpoints, context management and the beta names asked for. Header
    *values* other than the public beta names are never read into the report."""
    from holon_cli.providers.wire import prompt_support

    rt = config.get("runtime") or {}
    caps = sorted(prompt_support(kind).capabilities)
    if kind == "openai_responses":
        on = rt.get("openai_incremental") is True
        return {"prompt_capabilities": caps, "incremental": on, "store": on}
    if kind != "anthropic_messages":
        return {"prompt_capabilities": caps}
    from holon_cli.providers.wire import (
        ANTHROPIC_CONTEXT_MANAGEMENT_BETA as CONTEXT_MANAGEMENT_BETA,
    )

    raw = spec.get("headers")
    headers: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    declared = next((str(v) for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    beta = [n.strip() for n in declared.split(",") if n.strip()]
    managed = rt.get("anthropic_context_management") is True
    if managed and CONTEXT_MANAGEMENT_BETA not in beta:
        beta.append(CONTEXT_MANAGEMENT_BETA)
    return {
        "prompt_capabilities": caps,
        "cache_breakpoints": list(prompt_support(kind).breakpoints),
        "context_management": managed,
        "beta": beta,
    }


def _report(
    ref: str,
    transport: str | None,
    base_url: str | None,
    credentials: Credentials,
    key_env: str | None,
    why: ProviderFailure | str | None,
    wire: WireFeatures | None = None,
) -> CandidateReport:
    reason: str | None
    if isinstance(why, ProviderFailure):
        reason = f"{why.kind}: {why.message}" + (f" ({why.hint})" if why.hint else "")
    else:
        reason = why
    return {
        "model": ref,
        "transport": transport,
        "base_url": _without_userinfo(base_url),
        "credentials": credentials,
        "credentials_env": key_env,
        "supported": why is None,
        "reason": reason,
        "wire": wire or {},
    }


def _without_userinfo(url: str | None) -> str | None:
    """A base URL as shown to a person: ``user:password@`` never printed."""
    if url is None or "@" not in url:
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = "***@" + host.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path}"
