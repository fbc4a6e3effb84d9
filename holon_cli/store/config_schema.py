"""The config schema: one frozen dataclass per section of ``config.yaml``.

:mod:`holon_cli.store.config` reads the file and imports this module only
when there is a file to check (dataclasses and typing's introspection cost
more than ``holon status`` itself).

The schema is one frozen dataclass per section
(:class:`HolonConfig` at the top, :class:`RuntimeConfig`,
:class:`ProviderConfig`, ...); a field's type *is* its validation:

- ``str``, ``int``, ``float`` (an int is accepted), ``bool``, ``Literal[...]``,
  ``list[X]``, ``dict[str, X]``, ``X | None`` and a nested section
  dataclass;
- ``field(metadata={"min": 1})`` bounds a number from below (``"min": 0`` for
  "zero or more"); ``"doc"`` is a short description used in error hints;
- ``"required": True`` makes a key mandatory.

An unknown key, a wrong type (``provider_timeout_s: "30"``) or a value out of
range is a :class:`ConfigError` (exit 2) that names the file and the key path.
To add a setting, add a field to its section (every field defaults to
``None``, meaning "not set": readers keep their built-in default); to add a
section, add a dataclass and one field of that type to :class:`HolonConfig`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from holon_cli.errors import ConfigError
from holon_cli.store.config_mcp import (  # the light half, read by `holon status`
    MCP_HTTP_KEYS,
    MCP_SERVER_NAME_RE,
    MCP_STDIO_KEYS,
    merged_mcp_servers,
)

# the smallest `runtime.context_budget_tokens` (a smaller one cannot hold a frame)
MIN_CONTEXT_BUDGET_TOKENS = 1000

TRANSPORTS = ("openai_chat_completions", "openai_responses", "anthropic_messages")
Transport = Literal["openai_chat_completions", "openai_responses", "anthropic_messages"]


def _pos(doc: str, *, default: str | None = None, example: Any = None) -> Any:
    """A positive number (> 0)."""
    return _opt(doc, default=default, example=example, min_exclusive=0)


def _opt(doc: str, *, default: str | None = None, example: Any = None, **meta: Any) -> Any:
    """An optional key: ``doc`` says what it does; a key holding a value (not
    a section) also gives ``default``, what holds when it is not set (text),
    and ``example``, a value it accepts. The generated reference
    (``docs/reference/config.md``) prints all three, and
    ``tests/store/test_config_reference.py`` checks every example against
    this schema and every key for both."""
    if default is not None:
        meta["default"] = default
    if example is not None:
        meta["example"] = example
    return field(default=None, metadata={"doc": doc, **meta})


@dataclass(frozen=True)
class ProviderConfig:
    """``providers.<name>``: an OpenAI- or Anthropic-compatible endpoint."""

    transport: Transport = field(
        default="openai_chat_completions",
        metadata={"required": True, "doc": "the wire protocol"},
    )
    base_url: str = field(default="", metadata={"required": True, "doc": "the endpoint URL"})
    api_key_env: str | None = _opt(
        "name of the environment variable holding the key",
        default="none (no Authorization header)",
        example="LOCAL_LLM_KEY",
    )
    headers: dict[str, str] | None = _opt(
        "extra HTTP headers", default="none", example={"X-Team": "agents"}
    )
    timeout_s: float | None = _pos(
        "request timeout in seconds", default="runtime.provider_timeout_s, else 120", example=300
    )
    max_output_tokens: int | None = _pos(
        "output token cap per request", default="runtime.max_output_tokens", example=4096
    )
    stream: bool | None = _opt("stream responses", default="false", example=True)


@dataclass(frozen=True)
class RuntimeConfig:
    """``runtime``: turn, tool and provider limits."""

    default_tool_output_tokens: int | None = _pos(
        "tool output budget per call (HOLON_DEFAULT_TOOL_OUTPUT_TOKENS wins)",
        default="8000",
        example=4000,
    )
    max_tool_output_tokens: int | None = _pos(
        "upper bound of a call's max_output_tokens, at most 64000 "
        "(HOLON_MAX_TOOL_OUTPUT_TOKENS wins)",
        default="64000",
        example=16000,
    )
    max_provider_rounds: int | None = _pos("model rounds per turn", default="50", example=20)
    exec_timeout_ms: int | None = _pos(
        "timeout of one ExecCommandBatch item in ms", default="120000", example=300000
    )
    provider_timeout_s: float | None = _pos(
        "provider request timeout in seconds", default="120", example=300
    )
    max_output_tokens: int | None = _pos(
        "output token cap per model request", default="none (the provider's)", example=8192
    )
    work_item_stale_reminder_rounds: int | None = _pos(
        "rounds without a work-item change before a stale reminder", default="8", example=12
    )
    work_item_stale_reminder_cooldown_rounds: int | None = _opt(
        "rounds between stale reminders", default="8", example=4, min=0
    )
    work_item_stale_reminder_max_tokens: int | None = _pos(
        "size cap of a stale reminder in tokens", default="400", example=200
    )
    default_recheck_after_ms: int | None = _pos(
        "default blocker recheck delay in ms", default="1800000 (30 minutes)", example=600000
    )
    # task plane (commands and command tasks)
    exec_env_passthrough: list[str] | None = _opt(
        "older name of execution.env.pass (read as more pass names)",
        default="none",
        example=["JAVA_HOME"],
    )
    exec_yield_time_ms: int | None = _pos(
        "how long ExecCommand waits before the command becomes a task, in ms",
        default="10000",
        example=30000,
    )
    task_output_max_bytes: int | None = _pos(
        "output captured per command or task before it is stopped (output_limit)",
        default="67108864 (64 MiB)",
        example=16777216,
    )
    outputs_max_age_days: float | None = _opt(
        "days kept in .holon/outputs/", default="7", example=3, min=0
    )
    outputs_max_bytes: int | None = _opt(
        "bytes kept in .holon/outputs/ per agent",
        default="1073741824 (1 GiB)",
        example=268435456,
        min=0,
    )
    # memory plane: compaction (runtime/memory/compaction.py reads it)
    context_budget_tokens: int | None = _opt(
        "prompt budget in tokens; older rounds are compacted above it; at least the "
        "fixed part of the prompt (`holon debug prompt --json` fixed_tokens)",
        default="128000",
        example=32000,
        min=MIN_CONTEXT_BUDGET_TOKENS,
    )
    # opt-in provider wire features (providers/registry.py reads them)
    openai_incremental: bool | None = _opt(
        "Responses rounds continue the previous response (stored) and send only new items",
        default="false",
        example=True,
    )
    anthropic_context_management: bool | None = _opt(
        "Anthropic clears old tool results server-side as the context fills (beta)",
        default="false",
        example=True,
    )


# ---------------------------------------------------------------- budgets
# (runtime/budgets/spend.py reads them; the price check across sections is
# ``price_problem`` below, run by ``validate_config``)


@dataclass(frozen=True)
class BudgetsConfig:
    """``budgets`` (all agents) and ``agents.<id>.budgets`` (one agent, key by key
    over the default): spend limits checked before every provider request."""

    tokens_per_day: int | None = _opt(
        "input + output tokens per UTC day", default="none (unbounded)", example=2000000, min=0
    )
    cost_usd_per_day: float | None = _opt(
        "USD per UTC day, priced by `prices.<provider/model>`",
        default="none (unbounded)",
        example=5,
        min=0,
    )
    turns_per_hour: int | None = _opt(
        "turns that reach the model in a rolling 60 minutes",
        default="none (unbounded)",
        example=30,
        min=0,
    )
    tokens_per_work_item: int | None = _opt(
        "input + output tokens spent on one work item",
        default="none (unbounded)",
        example=400000,
        min=0,
    )


@dataclass(frozen=True)
class HomeBudgetsConfig:
    """``budgets.home``: the same limits over the sum of every agent's spend
    (the home's spend record, removed agents included)."""

    tokens_per_day: int | None = _opt(
        "input + output tokens per UTC day, all agents",
        default="none (unbounded)",
        example=5000000,
        min=0,
    )
    cost_usd_per_day: float | None = _opt(
        "USD per UTC day, all agents, priced by `prices.<provider/model>`",
        default="none (unbounded)",
        example=20,
        min=0,
    )
    turns_per_hour: int | None = _opt(
        "turns of all agents that reach the model in a rolling 60 minutes",
        default="none (unbounded)",
        example=120,
        min=0,
    )


@dataclass(frozen=True)
class DefaultBudgetsConfig(BudgetsConfig):
    """``budgets``: every agent's budgets (``agents.<id>.budgets`` overrides key
    by key), and ``home``: the budgets of all agents together."""

    home: HomeBudgetsConfig | None = _opt("budgets of all agents together")


@dataclass(frozen=True)
class PriceConfig:
    """``prices.<provider/model>``: USD per million tokens."""

    input: float = field(
        default=0.0, metadata={"required": True, "min": 0, "doc": "USD per million input tokens"}
    )
    output: float = field(
        default=0.0, metadata={"required": True, "min": 0, "doc": "USD per million output tokens"}
    )


# -------------------------------------------------------------- retention
# (store/retention.py reads it: `holon home gc`, serve's daily pass, the
# free-disk breaker of the task plane)


@dataclass(frozen=True)
class RetentionConfig:
    """``retention``: how long history is kept and how big a home may grow
    (unset: keep forever; ``0`` days: keep nothing but the open segment)."""

    events_days: float | None = _opt(
        "days of closed events segments (and turn records) kept",
        default="none (forever)",
        example=30,
        min=0,
    )
    transcript_days: float | None = _opt(
        "days of closed transcript segments kept", default="none (forever)", example=90, min=0
    )
    outputs_days: float | None = _opt(
        "days finished command outputs are kept",
        default="runtime.outputs_max_age_days, else 7",
        example=7,
        min=0,
    )
    max_home_bytes: int | None = _opt(
        "bytes the whole home may take (oldest history first)",
        default="none (unbounded)",
        example=10737418240,
        min=0,
    )
    min_free_bytes: int | None = _opt(
        "free disk below which output capture stops and new tasks are refused (0: off)",
        default="1073741824 (1 GiB)",
        example=536870912,
        min=0,
    )


# -------------------------------------------------------------- execution
# (runtime/tasks/sandbox.py reads it; the model can never change it)

Network = Literal["on", "off"]


@dataclass(frozen=True)
class ExecEnvConfig:
    """``execution.env``: the environment of model-run commands, an allowlist
    (runtime/tasks/environment.py reads it)."""

    inherit: Literal["core", "all", "none"] | None = _opt(
        "core (PATH HOME USER LOGNAME SHELL LANG LC_* TERM TZ TMPDIR), all "
        "(secret-like names withheld) or none",
        default="core",
        example="all",
    )
    pass_: list[str] | None = _opt(
        "variables passed whatever they look like (never a provider's api_key_env)",
        default="none",
        example=["GITHUB_TOKEN", "NPM_CONFIG_REGISTRY"],
        key="pass",
    )
    set: dict[str, str] | None = _opt(
        "variables set to these values", default="none", example={"CI": "1"}
    )


@dataclass(frozen=True)
class ExecutionConfig:
    """``execution`` (all agents) and ``agents.<id>.execution`` (one agent, key
    by key over the default): how model-run commands are confined."""

    sandbox: Literal["auto", "none", "bwrap"] | None = _opt(
        "auto (bubblewrap when it works here, else none), bwrap (fail closed without it) or none",
        default="auto",
        example="bwrap",
    )
    network: Network | bool | None = _opt(
        "on or off: network inside the sandbox",
        default="on (off under an explicit sandbox: bwrap)",
        example="off",
    )
    env: ExecEnvConfig | None = _opt("the environment commands get (inherit, pass, set)")


# ------------------------------------------------------------ mcp servers
# (runtime/mcp/ reads them; ``_check_mcp`` below checks what one field's type
# cannot: the name, the durations, exactly one transport)


@dataclass(frozen=True)
class McpServerConfig:
    """``mcp_servers.<name>`` (all agents) and ``agents.<id>.mcp_servers.<name>``
    (one agent, merged by name): an MCP server reached over stdio (``command``)
    or streamable HTTP (``url``)."""

    command: str | None = _opt("stdio: the program to start", default="none", example="uvx")
    args: list[str] | None = _opt(
        "stdio: its arguments", default="none", example=["mcp-server-git", "--repository", "."]
    )
    env: dict[str, str] | None = _opt(
        "stdio: variables set over the command environment (execution.env)",
        default="none",
        example={"GIT_PAGER": "cat"},
    )
    cwd: str | None = _opt(
        "stdio: its working folder", default="the agent's execution root", example="/src/app"
    )
    url: str | None = _opt(
        "streamable HTTP: the endpoint URL", default="none", example="http://127.0.0.1:8000/mcp"
    )
    headers: dict[str, str] | None = _opt(
        "streamable HTTP: extra request headers", default="none", example={"X-Key": "abc"}
    )
    bearer_token_env: str | None = _opt(
        "streamable HTTP: name of the environment variable holding a bearer token",
        default="none",
        example="DOCS_MCP_TOKEN",
    )
    enabled: bool | None = _opt("offer this server's tools", default="true", example=False)
    required: bool | None = _opt(
        "a turn fails before its provider request if it cannot start (exit 5)",
        default="false",
        example=True,
    )
    startup_timeout: str | float | None = _opt(
        "start and handshake limit, a duration (a number is seconds)",
        default="10s",
        example="30s",
    )
    tool_timeout: str | float | None = _opt(
        "limit of one tool call, a duration (a number is seconds)",
        default="60s",
        example="2m",
    )
    enabled_tools: list[str] | None = _opt(
        "offer only these tools", default="every tool", example=["git_status", "git_log"]
    )
    disabled_tools: list[str] | None = _opt(
        "never offer these tools", default="none", example=["git_reset"]
    )
    protocol: Literal["auto", "2026-07-28", "2025-11-25"] | None = _opt(
        "auto (probe server/discover, fall back to initialize), 2026-07-28 or 2025-11-25",
        default="auto",
        example="2025-11-25",
    )
    network: Network | bool | None = _opt(
        "sandboxed stdio server: on or off", default="execution.network", example="off"
    )


@dataclass(frozen=True)
class AgentConfig:
    """``agents.<id>``: settings of one agent."""

    budgets: BudgetsConfig | None = _opt("this agent's budgets (over the default `budgets`)")
    execution: ExecutionConfig | None = _opt("this agent's command confinement")
    mcp_servers: dict[str, McpServerConfig] | None = _opt(
        "this agent's MCP servers (merged by name over `mcp_servers`)"
    )


# ------------------------------------------------------------- ingress
# (``holon serve``'s public routes: webhooks and rate limits)

WEBHOOK_SCHEMES = ("github", "standard")


@dataclass(frozen=True)
class WebhookConfig:
    """``ingress.webhooks.<source>``: how deliveries of one source are verified."""

    secret_env: str | None = _opt(
        "name of the environment variable holding the secret",
        default="none (deliveries are not verified)",
        example="GITHUB_WEBHOOK_SECRET",
    )
    scheme: Literal["github", "standard"] | None = _opt(
        "signature scheme: github (X-Hub-Signature-256) or standard (Standard Webhooks)",
        default="github (when secret_env is set)",
        example="standard",
    )


@dataclass(frozen=True)
class IngressConfig:
    """``ingress``: the public routes of ``holon serve``."""

    rate_per_minute: int | None = _pos(
        "requests per minute per client address, over all public routes",
        default="60",
        example=120,
    )
    webhooks: dict[str, WebhookConfig] | None = _opt("per-source webhook verification")


# --------------------------------------------------------------- serve
# (``holon serve``'s HTTP server: serve/http/app.py and serve/http/server.py read it at start)


@dataclass(frozen=True)
class ServeConfig:
    """``serve``: the HTTP server of ``holon serve`` (read when serve starts)."""

    trusted_proxies: list[str] | None = _opt(
        "addresses (or networks) of reverse proxies whose X-Forwarded-For, Forwarded "
        "and X-Real-IP headers are believed",
        default="none (forwarding headers are ignored)",
        example=["127.0.0.1", "10.0.0.0/8"],
        ip_list=True,
    )
    header_timeout: str | float | None = _opt(
        "a connection must send a whole request head within this",
        default="10s",
        example="30s",
        duration=True,
        min_exclusive=0,
    )
    max_connections: int | None = _opt(
        "open HTTP connections per listener", default="512", example=1024, min=1
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


@dataclass(frozen=True)
class TelemetryConfig:
    """``telemetry``: OpenTelemetry traces and metrics (runtime/telemetry/);
    the standard ``OTEL_*`` variables apply and can turn it on too."""

    enabled: bool | None = _opt(
        "export GenAI traces and metrics over OTLP (needs the holon-cli[otel] extra)",
        default="false (the OTEL_* variables can turn it on)",
        example=True,
    )
    flush_timeout_ms: int | None = _opt(
        "how long a process waits at its end for spans to leave, in ms",
        default="40",
        example=200,
        min=0,
    )


@dataclass(frozen=True)
class HolonConfig:
    """The whole file."""

    model: str | None = _opt(
        "default model ref (HOLON_MODEL wins)", default="none", example="openai/gpt-4.1"
    )
    fallback_models: list[str] | None = _opt(
        "fallback model refs, tried in order (HOLON_FALLBACK_MODELS wins)",
        default="none",
        example=["anthropic/claude-sonnet-4-5"],
    )
    providers: dict[str, ProviderConfig] | None = _opt("named providers")
    runtime: RuntimeConfig | None = _opt("runtime limits")
    http_addr: str | None = _opt(
        "accepted but not read: give `holon serve` --listen or HOLON_HTTP_ADDR",
        default="none",
        example="127.0.0.1:7878",
    )
    control_token: str | None = _opt(
        "accepted but not read: give `holon serve` --token-file or HOLON_CONTROL_TOKEN",
        default="none",
        example="s3cret-token",
    )
    budgets: DefaultBudgetsConfig | None = _opt("spend limits of every agent, and of all together")
    prices: dict[str, PriceConfig] | None = _opt("USD per million tokens, per model ref")
    agents: dict[str, AgentConfig] | None = _opt("per-agent settings")
    ingress: IngressConfig | None = _opt("public routes of `holon serve`: webhooks, rate limits")
    retention: RetentionConfig | None = _opt("how long history is kept, how big a home grows")
    execution: ExecutionConfig | None = _opt("confinement of model-run commands")
    serve: ServeConfig | None = _opt("HTTP server of `holon serve`: proxies, timeouts, connections")
    mcp_servers: dict[str, McpServerConfig] | None = _opt("MCP servers every agent reaches")
    telemetry: TelemetryConfig | None = _opt("OpenTelemetry traces and metrics")


# -------------------------------------------------------------- validation

_T = TypeVar("_T")
_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hit = _hints_cache.get(cls)
    if hit is None:
        hit = typing.get_type_hints(cls)
        _hints_cache[cls] = hit
    return hit


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), f"a {type(value).__name__}")
    text = repr(value)
    return f"{text[:60]}… ({kind})" if len(text) > 60 else f"{text} ({kind})"


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp) if a is not type(None))
    if origin is list:
        return f"a list of {_type_name(get_args(tp)[0]).removeprefix('a ')}s"
    if origin is dict:
        return "a mapping of name to " + _type_name(get_args(tp)[1])
    if dataclasses.is_dataclass(tp):
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


def _expect(ok: bool, key: str, tp: Any, value: Any) -> None:
    if not ok:
        hint = None
        if isinstance(value, str) and tp in (int, float):
            hint = f"write the number without quotes: `{key.rsplit('.', 1)[-1]}: {value}`"
        raise _Invalid(key, f"{key} must be {_type_name(tp)}, got {_describe(value)}", hint)


def _check(value: Any, tp: Any, key: str, meta: typing.Mapping[str, Any]) -> None:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            return
        if len(args) == 1:
            _check(value, args[0], key, meta)
            return
        for a in args:  # the first type the value fits
            try:
                _check(value, a, key, meta)
                return
            except _Invalid:
                continue
        _expect(False, key, tp, value)
    if origin is Literal:
        if value not in get_args(tp) or isinstance(value, bool):
            raise _Invalid(key, f"{key} must be {_type_name(tp)}, got {_describe(value)}")
        return
    if origin is list:
        _expect(isinstance(value, list), key, tp, value)
        item_meta = {"ip": True} if meta.get("ip_list") else {}
        for i, item in enumerate(value):
            _check(item, get_args(tp)[0], f"{key}[{i}]", item_meta)
        return
    if origin is dict:
        _expect(isinstance(value, dict), key, tp, value)
        for name, item in value.items():
            if not isinstance(name, str) or not name:
                raise _Invalid(key, f"{key}: key {name!r} must be a non-empty name")
            _check(item, get_args(tp)[1], f"{key}.{name}", {})
        return
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        _expect(isinstance(value, dict), key, tp, value)
        _check_section(value, tp, key)
        return
    if tp is bool:
        _expect(isinstance(value, bool), key, tp, value)
    elif tp is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), key, tp, value)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        _expect(
            ok and value == value and value not in (float("inf"), float("-inf")), key, tp, value
        )
    elif tp is str:
        _expect(isinstance(value, str), key, tp, value)
        _check_str(value, key, meta)
        return
    else:  # pragma: no cover - a schema field of an unsupported type is a bug
        raise TypeError(f"config schema: unsupported type {tp!r} for {key}")
    if "min" in meta and value < meta["min"]:
        raise _Invalid(key, f"{key} must be {meta['min']} or more, got {value!r}")
    if "min_exclusive" in meta and value <= meta["min_exclusive"]:
        raise _Invalid(key, f"{key} must be more than {meta['min_exclusive']}, got {value!r}")


def _check_str(value: str, key: str, meta: typing.Mapping[str, Any]) -> None:
    """The string forms a field's metadata asks for: a duration, an address."""
    if meta.get("duration"):
        from holon_cli.clock import parse_duration

        try:
            parse_duration(value)
        except ValueError as exc:
            raise _Invalid(
                key, f"{key}: {exc}", "write a duration such as 10s, 500ms or 2m"
            ) from None
    if meta.get("ip"):
        import ipaddress

        try:
            ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise _Invalid(
                key,
                f"{key} must be an IP address or network, got {_describe(value)}",
                "write e.g. 127.0.0.1, ::1 or 10.0.0.0/8",
            ) from None


def _key(f: dataclasses.Field[Any]) -> str:
    """The key a field reads in config.yaml (``metadata["key"]``: a Python
    keyword such as ``pass``), else its name."""
    return str(f.metadata.get("key") or f.name)


def _check_section(data: dict[Any, Any], cls: type, prefix: str) -> None:
    hints = _hints(cls)
    fields = {_key(f): f for f in dataclasses.fields(cls)}
    for k in data:
        if not isinstance(k, str) or k not in fields:
            path = f"{prefix}.{k}" if prefix else str(k)
            raise _Invalid(
                path,
                f"unknown key {path!r}",
                f"known keys{' of ' + prefix if prefix else ''}: {', '.join(sorted(fields))}",
            )
    for name, f in fields.items():
        path = f"{prefix}.{name}" if prefix else name
        if name not in data:
            if f.metadata.get("required"):
                doc = f.metadata.get("doc")
                raise _Invalid(
                    path,
                    f"{path} is required",
                    f"add `{name}:` ({doc})" if doc else None,
                )
            continue
        _check(data[name], hints[f.name], path, f.metadata)


def build(cls: type[_T], data: dict[str, Any]) -> _T:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if data.get(_key(f)) is None:
            continue
        kwargs[f.name] = _build_value(hints[f.name], data[_key(f)])
    return cls(**kwargs)


def _build_value(tp: Any, value: Any) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return _build_value(args[0], value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value)
    if origin is dict:
        return {k: _build_value(get_args(tp)[1], v) for k, v in value.items()}
    if origin is list:
        return [_build_value(get_args(tp)[0], v) for v in value]
    if tp is float:
        return float(value)
    return value


def cost_budget_keys(data: dict[str, Any]) -> list[str]:
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


def missing_price(data: dict[str, Any], refs: list[str], budget_key: str) -> ConfigError | None:
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


def _check_prices(data: dict[str, Any]) -> None:
    costed = cost_budget_keys(data)
    if not costed:
        return
    refs = [data.get("model"), *(data.get("fallback_models") or [])]
    err = missing_price(data, [r for r in refs if isinstance(r, str)], costed[0])
    if err is not None:
        raise _Invalid(str(err.details["key"]), err.message, err.hint)


def _check_mcp_server(key: str, server: dict[str, Any], *, partial: bool) -> None:
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
        for i, name in enumerate(server.get(lst) or []):
            if not name:
                raise _Invalid(f"{key}.{lst}[{i}]", f"{key}.{lst}[{i}] must be a tool name")


def _normalize_mcp(data: dict[str, Any]) -> None:
    """YAML reads an unquoted ``protocol: 2026-07-28`` as a date: take it as
    the version it names (in place, so the mapping readers get holds text)."""
    import datetime

    groups = [data.get("mcp_servers")]
    groups += [(a or {}).get("mcp_servers") for a in (data.get("agents") or {}).values()
               if isinstance(a, dict)]  # fmt: skip
    for servers in groups:
        if not isinstance(servers, dict):
            continue
        for server in servers.values():
            if isinstance(server, dict) and isinstance(server.get("protocol"), datetime.date):
                server["protocol"] = server["protocol"].isoformat()


def _check_mcp(data: dict[str, Any]) -> None:
    import re

    home = data.get("mcp_servers") or {}
    sections: list[tuple[str, dict[str, Any], bool]] = [("mcp_servers", home, False)]
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


def validate_config(data: Any, where: str = "config.yaml") -> None:
    """Raise :class:`ConfigError` naming ``where`` and the key path of the first problem."""
    if data is None:
        return
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: expected a mapping at the top level, got {_describe(data)}",
            hint="config.yaml holds `key: value` lines, e.g. `model: openai/gpt-4.1`",
        )
    try:
        if "mcp_servers" in data or "agents" in data:
            _normalize_mcp(data)
        _check_section(data, HolonConfig, "")
        _check_prices(data)
        _check_mcp(data)
    except _Invalid as exc:
        raise ConfigError(
            f"{where}: {exc.message}",
            hint=exc.hint or f"fix {exc.key} in config.yaml",
            details={"path": where, "key": exc.key},
        ) from None


# ------------------------------------------------------------------ loading


def known_keys(cls: type = HolonConfig, prefix: str = "") -> list[str]:
    """Every key path of the schema (documentation, completion)."""
    out: list[str] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}.{_key(f)}" if prefix else _key(f)
        tp = hints[f.name]
        inner = [a for a in get_args(tp) if a is not type(None)] or [tp]
        sub = inner[0]
        if isinstance(sub, type) and dataclasses.is_dataclass(sub):
            out.extend(known_keys(sub, path))
        elif get_origin(sub) is dict and dataclasses.is_dataclass(get_args(sub)[1]):
            out.extend(known_keys(get_args(sub)[1], f"{path}.<name>"))
        else:
            out.append(path)
    return out
