"""Checking ``config.yaml`` against its schema (:mod:`holon_cli.model.config`:
one closed TypedDict per section) with the one checker
(:mod:`holon_cli.model.typed`), and wording what it finds for the file.

:mod:`holon_cli.store.config` reads the file and imports this module only
when there is a file to check (typing's introspection costs more than
``holon status`` itself). An unknown key, a wrong type
(``provider_timeout_s: "30"``) or a value out of range is a
:class:`ConfigError` (exit 2) that names the file and the key path; what one
key's type cannot say is checked here too: a cost budget needs a price, an
MCP server exactly one transport, a webhook a usable secret.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

from holon_cli.errors import ConfigError
from holon_cli.model.config import (  # the sections' types, re-exported for readers
    MIN_CONTEXT_BUDGET_TOKENS as MIN_CONTEXT_BUDGET_TOKENS,
)
from holon_cli.model.config import TRANSPORTS as TRANSPORTS
from holon_cli.model.config import WEBHOOK_SCHEMES as WEBHOOK_SCHEMES
from holon_cli.model.config import HolonConfig as HolonConfig
from holon_cli.model.config import McpServerConfig as McpServerConfig
from holon_cli.model.config import Transport as Transport
from holon_cli.model.typed import (
    CheckError,
    check,
    describe,
    dotted,
    is_typeddict,
    optional_of,
    strip,
)
from holon_cli.store.config_mcp import (  # the light half, read by `holon status`
    MCP_HTTP_KEYS,
    MCP_SERVER_NAME_RE,
    MCP_STDIO_KEYS,
    merged_mcp_servers,
)


def ingress_problems(
    data: Any, environ: typing.Mapping[str, str], *, unset: bool = True
) -> list[tuple[str, str]]:
    """What the environment lacks for ``ingress`` (``(key, message)`` pairs):
    the schema checks the file on every load; ``holon home check`` and ``holon
    serve``'s start also check that each ``secret_env`` is set and usable.
    ``unset=False`` leaves out the variables not set in ``environ`` (``home
    check`` in a login shell: only serve's environment must hold them)."""
    section = data.get("ingress") if isinstance(data, dict) else None
    hooks = section.get("webhooks") if isinstance(section, dict) else None
    out: list[tuple[str, str]] = []
    for source, hook in sorted((hooks or {}).items()):
        key = f"ingress.webhooks.{source}"
        env_name, scheme = hook.get("secret_env"), hook.get("scheme")
        if scheme is not None and env_name is None:
            out.append(
                (f"{key}.secret_env", f"{key}.scheme is set but no secret_env names the secret")
            )
        if env_name is None:
            continue
        secret = environ.get(env_name, "")
        if not secret.strip():
            if not unset:
                continue
            out.append(
                (f"{key}.secret_env", f"{key}.secret_env: ${env_name} is not set (or empty)")
            )
        elif (scheme or "github") == "standard" and standard_secret(secret) is None:
            out.append(
                (
                    f"{key}.secret_env",
                    f"{key}.secret_env: ${env_name} is not a whsec_<base64> secret",
                )
            )
    return out


def ingress_unset(data: Any, environ: typing.Mapping[str, str]) -> list[tuple[str, str]]:
    """The webhook secret variables ``ingress`` names that ``environ`` does
    not set (``(key, variable)`` pairs)."""
    section = data.get("ingress") if isinstance(data, dict) else None
    hooks = section.get("webhooks") if isinstance(section, dict) else None
    return [
        (f"ingress.webhooks.{source}.secret_env", str(hook["secret_env"]))
        for source, hook in sorted((hooks or {}).items())
        if hook.get("secret_env") and not environ.get(hook["secret_env"], "").strip()
    ]


def standard_secret(secret: str) -> bytes | None:
    """A Standard Webhooks secret (``whsec_<base64>``) as its key bytes."""
    import base64
    import binascii

    try:
        key = base64.b64decode(secret.strip().removeprefix("whsec_"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return key or None


# -------------------------------------------------------------- validation
# (the checker is model/typed.py; this section words its findings for config.yaml)

_T = TypeVar("_T")


_describe = describe


def _type_name(tp: Any) -> str:
    tp = strip(tp)
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp) if a is not type(None))
    if origin is list:
        return f"a list of {_type_name(get_args(tp)[0]).removeprefix('a ')}s"
    if origin is dict:
        return "a mapping of name to " + _type_name(get_args(tp)[1])
    if is_typeddict(tp):
        return "a mapping"
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
    }.get(tp, str(tp))


class _Invalid(Exception):
    def __init__(self, key: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.message = message
        self.hint = hint


def _invalid(err: CheckError) -> _Invalid:
    """The checker's finding as config.yaml's error: the key path, what it
    must be, and what to write."""
    key, value = err.where, err.value
    if err.problem == "unknown":
        parent = dotted(err.path[:-1])
        known = sorted(err.expected.__annotations__)
        return _Invalid(
            key,
            f"unknown key {key!r}",
            f"known keys{' of ' + parent if parent else ''}: " + ", ".join(known),
        )
    if err.problem == "missing":
        name = str(err.path[-1])
        hint = f"add `{name}:` ({err.doc})" if err.doc else None
        return _Invalid(key, f"{key} is required", hint)
    if err.problem == "key":
        return _Invalid(key, f"{key}: key {value!r} must be a non-empty name")
    if err.problem == "bound" and err.limit:
        kind, limit = err.limit
        if kind == "min":
            return _Invalid(key, f"{key} must be {limit} or more, got {value!r}")
        return _Invalid(key, f"{key} must be more than {limit}, got {value!r}")
    if err.problem == "rule":
        sep = "" if err.detail.startswith(":") else " "
        return _Invalid(key, f"{key}{sep}{err.detail}", err.hint)
    hint = None
    number = strip(optional_of(err.expected)[1])
    if isinstance(value, str) and number in (int, float):
        name = str(err.path[-1])
        if _numeric(value, number):
            hint = f"write the number without quotes: `{name}: {value.strip()}`"
        else:  # "4k", "1,000", "ten": only digits are read
            example = "32000" if number is int else "0.5"
            hint = f"write it as a plain number, digits only: `{name}: {example}`"
    return _Invalid(key, f"{key} must be {_type_name(err.expected)}, got {_describe(value)}", hint)


def _numeric(text: str, number: Any) -> bool:
    try:
        number(text.strip())
    except ValueError:
        return False
    return True


def build(cls: type[_T], data: Any) -> _T:
    """``data`` (a mapping) checked into the section ``cls`` (floats as floats)."""
    try:
        return check(data, cls, coerce="floats")
    except CheckError as err:
        raise _raise(err, "config.yaml") from None


def cost_budget_keys(data: HolonConfig) -> list[str]:
    """The key paths that set a ``cost_usd_per_day`` budget."""
    out = []
    if ((data.get("budgets") or {}).get("cost_usd_per_day")) is not None:
        out.append("budgets.cost_usd_per_day")
    if (((data.get("budgets") or {}).get("home") or {}).get("cost_usd_per_day")) is not None:
        out.append("budgets.home.cost_usd_per_day")
    for aid, sect in sorted((data.get("agents") or {}).items()):
        if ((sect or {}).get("budgets") or {}).get("cost_usd_per_day") is not None:
            out.append(f"agents.{aid}.budgets.cost_usd_per_day")
    return out


def missing_price(data: HolonConfig, refs: list[str], budget_key: str) -> ConfigError | None:
    """A cost budget cannot be kept for a model without a price: the error
    naming ``prices.<ref>`` for the first model of ``refs`` that has none."""
    prices = data.get("prices") or {}
    for ref in refs:
        if ref and ref not in prices:
            return ConfigError(
                f"prices.{ref} is missing: {budget_key} needs a price for model {ref!r}",
                hint=(
                    f"add `prices: {{{ref!r}: {{input: 2.5, output: 10}}}}` (USD per million "
                    f"tokens) to config.yaml, or remove {budget_key}"
                ),
                details={"key": f"prices.{ref}"},
            )
    return None


def _check_prices(data: HolonConfig) -> None:
    costed = cost_budget_keys(data)
    if not costed:
        return
    refs = [data.get("model"), *(data.get("fallback_models") or [])]
    err = missing_price(data, [r for r in refs if isinstance(r, str)], costed[0])
    if err is not None:
        raise _Invalid(str(err.details["key"]), err.message, err.hint)


def _check_mcp_server(key: str, server: typing.Mapping[str, object], *, partial: bool) -> None:
    """One server entry; ``partial``: an agent's entry over a home-wide one of
    the same name (it may leave the transport to that entry)."""
    import re

    from holon_cli.clock import parse_duration

    stdio, http = server.get("command") is not None, server.get("url") is not None
    if stdio and http:
        raise _Invalid(
            f"{key}.url",
            f"{key}: set `command` (stdio) or `url` (streamable HTTP), not both",
        )
    if not stdio and not http and not partial:
        raise _Invalid(
            key,
            f"{key}: no transport: set `command` (a stdio server) or `url` (streamable HTTP)",
            "e.g. `command: uvx` with `args: [mcp-server-time]`, or `url: http://127.0.0.1:8000/mcp`",
        )
    if stdio or http:
        wrong = MCP_HTTP_KEYS if stdio else MCP_STDIO_KEYS
        for k in wrong:
            if server.get(k) is not None:
                kind = "a stdio server (command)" if stdio else "an HTTP server (url)"
                raise _Invalid(f"{key}.{k}", f"{key}.{k} does not apply to {kind}")
    if stdio and not str(server["command"]).strip():
        raise _Invalid(f"{key}.command", f"{key}.command must not be empty")
    if http:
        url = str(server["url"])
        if not re.match(r"https?://[^/\s]+", url):
            raise _Invalid(
                f"{key}.url",
                f"{key}.url must be an http:// or https:// URL, got {url!r}",
            )
    if server.get("network") is not None and http:
        raise _Invalid(f"{key}.network", f"{key}.network applies to sandboxed stdio servers only")
    for dur in ("startup_timeout", "tool_timeout"):
        raw = server.get(dur)
        if raw is None:
            continue
        try:
            parse_duration(str(raw))
        except ValueError:
            raise _Invalid(
                f"{key}.{dur}",
                f"{key}.{dur} must be a duration such as 10s, 500ms or 2m, got {raw!r}",
            ) from None
    for lst in ("enabled_tools", "disabled_tools"):
        names = server.get(lst)
        for i, name in enumerate(names if isinstance(names, list) else []):
            if not name:
                raise _Invalid(f"{key}.{lst}[{i}]", f"{key}.{lst}[{i}] must be a tool name")


def _normalize_mcp(data: Mapping[str, object]) -> None:
    """YAML reads an unquoted ``protocol: 2026-07-28`` as a date: take it as
    the version it names (in place, so the mapping readers get holds text).
    A section of the wrong type is left for the check to name."""
    import datetime

    groups = [data.get("mcp_servers")]
    agents = data.get("agents")
    if isinstance(agents, dict):
        groups += [a.get("mcp_servers") for a in agents.values() if isinstance(a, dict)]
    for servers in groups:
        if not isinstance(servers, dict):
            continue
        for server in servers.values():
            if isinstance(server, dict) and isinstance(server.get("protocol"), datetime.date):
                server["protocol"] = server["protocol"].isoformat()


def _check_mcp(data: HolonConfig) -> None:
    import re

    home = data.get("mcp_servers") or {}
    sections: list[tuple[str, dict[str, McpServerConfig], bool]] = [("mcp_servers", home, False)]
    for aid, sect in sorted((data.get("agents") or {}).items()):
        servers = (sect or {}).get("mcp_servers")
        if servers:
            sections.append((f"agents.{aid}.mcp_servers", servers, True))
    for prefix, servers, is_agent in sections:
        for name, server in servers.items():
            key = f"{prefix}.{name}"
            if not re.fullmatch(MCP_SERVER_NAME_RE, name):
                raise _Invalid(
                    key,
                    f"{key}: server name {name!r} must be 1-32 of a-z, 0-9, _ and -",
                    "rename it, e.g. `mcp_servers: {git: ...}`",
                )
            _check_mcp_server(key, server or {}, partial=is_agent and name in home)
    for prefix, servers, is_agent in sections[1:]:
        aid = prefix.split(".")[1]
        for name, server in merged_mcp_servers(data, aid).items():
            if name in servers:  # the merged entry must still be one whole server
                _check_mcp_server(f"{prefix}.{name}", server, partial=False)


def _raise(err: CheckError | _Invalid, where: str) -> ConfigError:
    bad = err if isinstance(err, _Invalid) else _invalid(err)
    return ConfigError(
        f"{where}: {bad.message}",
        hint=bad.hint or f"fix {bad.key} in config.yaml",
        details={"path": where, "key": bad.key},
    )


def validate_config(data: Any, where: str = "config.yaml") -> HolonConfig:
    """``data`` checked into :class:`HolonConfig` (``None``: empty), or a
    :class:`ConfigError` naming ``where`` and the key path of the first problem."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: expected a mapping at the top level, got {_describe(data)}",
            hint="config.yaml holds `key: value` lines, e.g. `model: openai/gpt-4.1`",
        )
    try:
        if "mcp_servers" in data or "agents" in data:
            _normalize_mcp(data)
        cfg = check(data, HolonConfig)
        _check_prices(cfg)
        _check_mcp(cfg)
    except (CheckError, _Invalid) as err:
        raise _raise(err, where) from None
    return cfg


# ------------------------------------------------------------------ loading


def known_keys(cls: Any = None, prefix: str = "") -> list[str]:
    """Every key path of the schema (documentation, completion)."""
    out: list[str] = []
    for name, tp in typing.get_type_hints(cls or HolonConfig).items():
        path = f"{prefix}.{name}" if prefix else name
        sub = strip(optional_of(tp)[1])
        if is_typeddict(sub):
            out.extend(known_keys(sub, path))
        elif get_origin(sub) is dict and is_typeddict(get_args(sub)[1]):
            out.extend(known_keys(get_args(sub)[1], f"{path}.<name>"))
        else:
            out.append(path)
    return out
