"""The config file's shape: one closed TypedDict per section of
``config.yaml`` (pure types; ``store/config_schema.py`` loads and checks the
file against them with the one checker, :mod:`holon_cli.model.typed`).

A key's type *is* its validation: ``str``, ``int``, ``float`` (an int is
accepted), ``bool``, ``Literal[...]``, ``list[X]``, ``dict[Name, X]`` (a
non-empty name), ``X | None`` and a nested section; ``Annotated[X,
Rule(min=0)]`` bounds a number from below (``more_than=0``: above), ``doc``
is a short description used in error hints, a ``test`` checks a string's form
(a duration, an address); ``Required[...]`` makes a key mandatory. Readers
hold the checked mapping: ``cfg.get("runtime") or {}`` is a
:class:`RuntimeConfig`, and a key not set means "not set" (readers keep
their built-in default). To add a setting, add a key to its section; to add
a section, a TypedDict, one key of that type in :class:`HolonConfig`, and the
class to ``closed(...)`` below.
"""

from __future__ import annotations

from typing import Annotated, Literal, Required, TypedDict

from holon_cli.model.config_sections import (
    WEBHOOK_SCHEMES as WEBHOOK_SCHEMES,
)
from holon_cli.model.config_sections import (
    BudgetsConfig as BudgetsConfig,
)
from holon_cli.model.config_sections import (
    DefaultBudgetsConfig as DefaultBudgetsConfig,
)
from holon_cli.model.config_sections import (
    Duration as Duration,
)
from holon_cli.model.config_sections import (
    HomeBudgetsConfig as HomeBudgetsConfig,
)
from holon_cli.model.config_sections import (
    IngressConfig as IngressConfig,
)
from holon_cli.model.config_sections import (
    IpNetwork as IpNetwork,
)
from holon_cli.model.config_sections import (
    Name as Name,
)
from holon_cli.model.config_sections import (
    PriceConfig as PriceConfig,
)
from holon_cli.model.config_sections import (
    RetentionConfig as RetentionConfig,
)
from holon_cli.model.config_sections import (
    Seconds as Seconds,
)
from holon_cli.model.config_sections import (
    ServeConfig as ServeConfig,
)
from holon_cli.model.config_sections import (
    TelemetryConfig as TelemetryConfig,
)
from holon_cli.model.config_sections import (
    WebhookConfig as WebhookConfig,
)
from holon_cli.model.typed import Rule, closed

# the smallest `runtime.context_budget_tokens` (a smaller one cannot hold a frame)
MIN_CONTEXT_BUDGET_TOKENS = 1000


TRANSPORTS = ("openai_chat_completions", "openai_responses", "anthropic_messages")
Transport = Literal["openai_chat_completions", "openai_responses", "anthropic_messages"]


class ProviderConfig(TypedDict, total=False):
    """``providers.<name>``: an OpenAI- or Anthropic-compatible endpoint."""

    transport: Required[Annotated[Transport, Rule(doc="the wire protocol")]]
    base_url: Required[Annotated[str, Rule(doc="the endpoint URL")]]
    api_key_env: Annotated[
        str | None,
        Rule(
            doc="name of the environment variable holding the key",
            default="none (no Authorization header)",
            example="LOCAL_LLM_KEY",
        ),
    ]
    headers: Annotated[
        dict[Name, str] | None,
        Rule(doc="extra HTTP headers", default="none", example={"X-Team": "agents"}),
    ]
    timeout_s: Annotated[
        float | None,
        Rule(
            more_than=0,
            doc="request timeout in seconds",
            default="runtime.provider_timeout_s, else 120",
            example=300,
        ),
    ]
    max_output_tokens: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="output token cap per request",
            default="runtime.max_output_tokens",
            example=4096,
        ),
    ]
    stream: Annotated[bool | None, Rule(doc="stream responses", default="false", example=True)]


class RuntimeConfig(TypedDict, total=False):
    """``runtime``: turn, tool and provider limits."""

    default_tool_output_tokens: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="tool output budget per call (HOLON_DEFAULT_TOOL_OUTPUT_TOKENS wins)",
            default="8000",
            example=4000,
        ),
    ]
    max_tool_output_tokens: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc=(
                "upper bound of a call's max_output_tokens, at most 64000 "
                "(HOLON_MAX_TOOL_OUTPUT_TOKENS wins)"
            ),
            default="64000",
            example=16000,
        ),
    ]
    max_provider_rounds: Annotated[
        int | None, Rule(more_than=0, doc="model rounds per turn", default="50", example=20)
    ]
    exec_timeout_ms: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="timeout of one ExecCommandBatch item in ms",
            default="120000",
            example=300000,
        ),
    ]
    provider_timeout_s: Annotated[
        float | None,
        Rule(more_than=0, doc="provider request timeout in seconds", default="120", example=300),
    ]
    max_output_tokens: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="output token cap per model request",
            default="none (the provider's)",
            example=8192,
        ),
    ]
    work_item_stale_reminder_rounds: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="rounds without a work-item change before a stale reminder",
            default="8",
            example=12,
        ),
    ]
    work_item_stale_reminder_cooldown_rounds: Annotated[
        int | None, Rule(min=0, doc="rounds between stale reminders", default="8", example=4)
    ]
    work_item_stale_reminder_max_tokens: Annotated[
        int | None,
        Rule(more_than=0, doc="size cap of a stale reminder in tokens", default="400", example=200),
    ]
    default_recheck_after_ms: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="default blocker recheck delay in ms",
            default="1800000 (30 minutes)",
            example=600000,
        ),
    ]
    exec_env_passthrough: Annotated[
        list[str] | None,
        Rule(
            doc="older name of execution.env.pass (read as more pass names)",
            default="none",
            example=["JAVA_HOME"],
        ),
    ]
    exec_yield_time_ms: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="how long ExecCommand waits before the command becomes a task, in ms",
            default="10000",
            example=30000,
        ),
    ]
    task_output_max_bytes: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="output captured per command or task before it is stopped (output_limit)",
            default="67108864 (64 MiB)",
            example=16777216,
        ),
    ]
    outputs_max_age_days: Annotated[
        float | None, Rule(min=0, doc="days kept in .holon/outputs/", default="7", example=3)
    ]
    outputs_max_bytes: Annotated[
        int | None,
        Rule(
            min=0,
            doc="bytes kept in .holon/outputs/ per agent",
            default="1073741824 (1 GiB)",
            example=268435456,
        ),
    ]
    context_budget_tokens: Annotated[
        int | None,
        Rule(
            min=MIN_CONTEXT_BUDGET_TOKENS,
            doc=(
                "prompt budget in tokens; older rounds are compacted above it; at least the fixed"
                " part of the prompt (`holon debug prompt --json` fixed_tokens)"
            ),
            default="128000",
            example=32000,
        ),
    ]
    openai_incremental: Annotated[
        bool | None,
        Rule(
            doc="Responses rounds continue the previous response (stored) and send only new items",
            default="false",
            example=True,
        ),
    ]
    anthropic_context_management: Annotated[
        bool | None,
        Rule(
            doc="Anthropic clears old tool results server-side as the context fills (beta)",
            default="false",
            example=True,
        ),
    ]


# -------------------------------------------------------------- execution
# (runtime/tasks/sandbox.py reads it; the model can never change it)

Network = Literal["on", "off"]


ExecEnvConfig = TypedDict(
    "ExecEnvConfig",
    {
        "inherit": Annotated[
            Literal["core", "all", "none"] | None,
            Rule(
                doc=(
                    "core (PATH HOME USER LOGNAME SHELL LANG LC_* TERM TZ TMPDIR), all (secret-"
                    "like names withheld) or none"
                ),
                default="core",
                example="all",
            ),
        ],
        "pass": Annotated[
            list[str] | None,
            Rule(
                doc="variables passed whatever they look like (never a provider's api_key_env)",
                default="none",
                example=["GITHUB_TOKEN", "NPM_CONFIG_REGISTRY"],
            ),
        ],
        "set": Annotated[
            dict[Name, str] | None,
            Rule(doc="variables set to these values", default="none", example={"CI": "1"}),
        ],
    },
    total=False,
)
ExecEnvConfig.__doc__ = """``execution.env``: the environment of model-run commands, an allowlist
    (runtime/tasks/environment.py reads it)."""


class ExecutionConfig(TypedDict, total=False):
    """``execution`` (all agents) and ``agents.<id>.execution`` (one agent, key
    by key over the default): how model-run commands are confined."""

    sandbox: Annotated[
        Literal["auto", "none", "bwrap"] | None,
        Rule(
            doc=(
                "auto (bubblewrap when it works here, else none), bwrap (fail closed without it) "
                "or none"
            ),
            default="auto",
            example="bwrap",
        ),
    ]
    network: Annotated[
        Network | bool | None,
        Rule(
            doc="on or off: network inside the sandbox",
            default="on (off under an explicit sandbox: bwrap)",
            example="off",
        ),
    ]
    env: Annotated[
        ExecEnvConfig | None, Rule(doc="the environment commands get (inherit, pass, set)")
    ]


# ------------------------------------------------------------ mcp servers
# (runtime/mcp/ reads them; ``_check_mcp`` below checks what one field's type
# cannot: the name, the durations, exactly one transport)


class McpServerConfig(TypedDict, total=False):
    """``mcp_servers.<name>`` (all agents) and ``agents.<id>.mcp_servers.<name>``
    (one agent, merged by name): an MCP server reached over stdio (``command``)
    or streamable HTTP (``url``)."""

    command: Annotated[
        str | None, Rule(doc="stdio: the program to start", default="none", example="uvx")
    ]
    args: Annotated[
        list[str] | None,
        Rule(
            doc="stdio: its arguments",
            default="none",
            example=["mcp-server-git", "--repository", "."],
        ),
    ]
    env: Annotated[
        dict[Name, str] | None,
        Rule(
            doc="stdio: variables set over the command environment (execution.env)",
            default="none",
            example={"GIT_PAGER": "cat"},
        ),
    ]
    cwd: Annotated[
        str | None,
        Rule(
            doc="stdio: its working folder",
            default="the agent's execution root",
            example="/src/app",
        ),
    ]
    url: Annotated[
        str | None,
        Rule(
            doc="streamable HTTP: the endpoint URL",
            default="none",
            example="http://127.0.0.1:8000/mcp",
        ),
    ]
    headers: Annotated[
        dict[Name, str] | None,
        Rule(
            doc="streamable HTTP: extra request headers", default="none", example={"X-Key": "abc"}
        ),
    ]
    bearer_token_env: Annotated[
        str | None,
        Rule(
            doc="streamable HTTP: name of the environment variable holding a bearer token",
            default="none",
            example="DOCS_MCP_TOKEN",
        ),
    ]
    enabled: Annotated[
        bool | None, Rule(doc="offer this server's tools", default="true", example=False)
    ]
    required: Annotated[
        bool | None,
        Rule(
            doc="a turn fails before its provider request if it cannot start (exit 5)",
            default="false",
            example=True,
        ),
    ]
    startup_timeout: Annotated[
        str | float | None,
        Rule(
            doc="start and handshake limit, a duration (a number is seconds)",
            default="10s",
            example="30s",
        ),
    ]
    tool_timeout: Annotated[
        str | float | None,
        Rule(
            doc="limit of one tool call, a duration (a number is seconds)",
            default="60s",
            example="2m",
        ),
    ]
    enabled_tools: Annotated[
        list[str] | None,
        Rule(doc="offer only these tools", default="every tool", example=["git_status", "git_log"]),
    ]
    disabled_tools: Annotated[
        list[str] | None, Rule(doc="never offer these tools", default="none", example=["git_reset"])
    ]
    protocol: Annotated[
        Literal["auto", "2026-07-28", "2025-11-25"] | None,
        Rule(
            doc="auto (probe server/discover, fall back to initialize), 2026-07-28 or 2025-11-25",
            default="auto",
            example="2025-11-25",
        ),
    ]
    network: Annotated[
        Network | bool | None,
        Rule(doc="sandboxed stdio server: on or off", default="execution.network", example="off"),
    ]


class AgentConfig(TypedDict, total=False):
    """``agents.<id>``: settings of one agent."""

    budgets: Annotated[
        BudgetsConfig | None, Rule(doc="this agent's budgets (over the default `budgets`)")
    ]
    execution: Annotated[ExecutionConfig | None, Rule(doc="this agent's command confinement")]
    mcp_servers: Annotated[
        dict[Name, McpServerConfig] | None,
        Rule(doc="this agent's MCP servers (merged by name over `mcp_servers`)"),
    ]


class HolonConfig(TypedDict, total=False):
    """The whole file."""

    model: Annotated[
        str | None,
        Rule(doc="default model ref (HOLON_MODEL wins)", default="none", example="openai/gpt-4.1"),
    ]
    fallback_models: Annotated[
        list[str] | None,
        Rule(
            doc="fallback model refs, tried in order (HOLON_FALLBACK_MODELS wins)",
            default="none",
            example=["anthropic/claude-sonnet-4-5"],
        ),
    ]
    providers: Annotated[dict[Name, ProviderConfig] | None, Rule(doc="named providers")]
    runtime: Annotated[RuntimeConfig | None, Rule(doc="runtime limits")]
    http_addr: Annotated[
        str | None,
        Rule(
            doc="accepted but not read: give `holon serve` --listen or HOLON_HTTP_ADDR",
            default="none",
            example="127.0.0.1:7878",
        ),
    ]
    control_token: Annotated[
        str | None,
        Rule(
            doc="accepted but not read: give `holon serve` --token-file or HOLON_CONTROL_TOKEN",
            default="none",
            example="s3cret-token",
        ),
    ]
    budgets: Annotated[
        DefaultBudgetsConfig | None, Rule(doc="spend limits of every agent, and of all together")
    ]
    prices: Annotated[
        dict[Name, PriceConfig] | None, Rule(doc="USD per million tokens, per model ref")
    ]
    agents: Annotated[dict[Name, AgentConfig] | None, Rule(doc="per-agent settings")]
    ingress: Annotated[
        IngressConfig | None, Rule(doc="public routes of `holon serve`: webhooks, rate limits")
    ]
    retention: Annotated[
        RetentionConfig | None, Rule(doc="how long history is kept, how big a home grows")
    ]
    execution: Annotated[ExecutionConfig | None, Rule(doc="confinement of model-run commands")]
    serve: Annotated[
        ServeConfig | None, Rule(doc="HTTP server of `holon serve`: proxies, timeouts, connections")
    ]
    mcp_servers: Annotated[
        dict[Name, McpServerConfig] | None, Rule(doc="MCP servers every agent reaches")
    ]
    telemetry: Annotated[TelemetryConfig | None, Rule(doc="OpenTelemetry traces and metrics")]


closed(
    HolonConfig,
    ProviderConfig,
    RuntimeConfig,
    BudgetsConfig,
    HomeBudgetsConfig,
    DefaultBudgetsConfig,
    PriceConfig,
    RetentionConfig,
    ExecEnvConfig,
    ExecutionConfig,
    McpServerConfig,
    AgentConfig,
    WebhookConfig,
    IngressConfig,
    ServeConfig,
    TelemetryConfig,
)
