"""Sections of the config file's shape for the planes beside the runtime:
budgets and prices, retention, ingress (webhooks, rate limits), serve's
HTTP server, telemetry. ``model/config.py`` holds the rest, the whole file
(:class:`~holon_cli.model.config.HolonConfig`) and re-exports these."""

from __future__ import annotations

from typing import Annotated, Literal, Required, TypedDict

from holon_cli.model.typed import NONEMPTY, Rule, describe

# a key of a mapping section (``providers.<name>``, ``agents.<id>``): non-empty text
Name = Annotated[str, NONEMPTY]


# ---------------------------------------------------------------- budgets
# (runtime/budgets/spend.py reads them; the price check across sections is
# ``price_problem`` below, run by ``validate_config``)


class BudgetsConfig(TypedDict, total=False):
    """``budgets`` (all agents) and ``agents.<id>.budgets`` (one agent, key by key
    over the default): spend limits checked before every provider request."""

    tokens_per_day: Annotated[
        int | None,
        Rule(
            min=0,
            doc="input + output tokens per UTC day",
            default="none (unbounded)",
            example=2000000,
        ),
    ]
    cost_usd_per_day: Annotated[
        float | None,
        Rule(
            min=0,
            doc="USD per UTC day, priced by `prices.<provider/model>`",
            default="none (unbounded)",
            example=5,
        ),
    ]
    turns_per_hour: Annotated[
        int | None,
        Rule(
            min=0,
            doc="turns that reach the model in a rolling 60 minutes",
            default="none (unbounded)",
            example=30,
        ),
    ]
    tokens_per_work_item: Annotated[
        int | None,
        Rule(
            min=0,
            doc="input + output tokens spent on one work item",
            default="none (unbounded)",
            example=400000,
        ),
    ]


class HomeBudgetsConfig(TypedDict, total=False):
    """``budgets.home``: the same limits over the sum of every agent's spend
    (the home's spend record, removed agents included)."""

    tokens_per_day: Annotated[
        int | None,
        Rule(
            min=0,
            doc="input + output tokens per UTC day, all agents",
            default="none (unbounded)",
            example=5000000,
        ),
    ]
    cost_usd_per_day: Annotated[
        float | None,
        Rule(
            min=0,
            doc="USD per UTC day, all agents, priced by `prices.<provider/model>`",
            default="none (unbounded)",
            example=20,
        ),
    ]
    turns_per_hour: Annotated[
        int | None,
        Rule(
            min=0,
            doc="turns of all agents that reach the model in a rolling 60 minutes",
            default="none (unbounded)",
            example=120,
        ),
    ]


class DefaultBudgetsConfig(BudgetsConfig, total=False):
    """``budgets``: every agent's budgets (``agents.<id>.budgets`` overrides key
    by key), and ``home``: the budgets of all agents together."""

    home: Annotated[HomeBudgetsConfig | None, Rule(doc="budgets of all agents together")]


class PriceConfig(TypedDict, total=False):
    """``prices.<provider/model>``: USD per million tokens."""

    input: Required[Annotated[float, Rule(min=0, doc="USD per million input tokens")]]
    output: Required[Annotated[float, Rule(min=0, doc="USD per million output tokens")]]


# -------------------------------------------------------------- retention
# (store/retention.py reads it: `holon home gc`, serve's daily pass, the
# free-disk breaker of the task plane)


class RetentionConfig(TypedDict, total=False):
    """``retention``: how long history is kept and how big a home may grow
    (unset: keep forever; ``0`` days: keep nothing but the open segment)."""

    events_days: Annotated[
        float | None,
        Rule(
            min=0,
            doc="days of closed events segments (and turn records) kept",
            default="none (forever)",
            example=30,
        ),
    ]
    transcript_days: Annotated[
        float | None,
        Rule(
            min=0,
            doc="days of closed transcript segments kept",
            default="none (forever)",
            example=90,
        ),
    ]
    outputs_days: Annotated[
        float | None,
        Rule(
            min=0,
            doc="days finished command outputs are kept",
            default="runtime.outputs_max_age_days, else 7",
            example=7,
        ),
    ]
    max_home_bytes: Annotated[
        int | None,
        Rule(
            min=0,
            doc="bytes the whole home may take (oldest history first)",
            default="none (unbounded)",
            example=10737418240,
        ),
    ]
    min_free_bytes: Annotated[
        int | None,
        Rule(
            min=0,
            doc="free disk below which output capture stops and new tasks are refused (0: off)",
            default="1073741824 (1 GiB)",
            example=536870912,
        ),
    ]


# ------------------------------------------------------------- ingress
# (``holon serve``'s public routes: webhooks and rate limits)

WEBHOOK_SCHEMES = ("github", "standard")


class WebhookConfig(TypedDict, total=False):
    """``ingress.webhooks.<source>``: how deliveries of one source are verified."""

    secret_env: Annotated[
        str | None,
        Rule(
            doc="name of the environment variable holding the secret",
            default="none (deliveries are not verified)",
            example="GITHUB_WEBHOOK_SECRET",
        ),
    ]
    scheme: Annotated[
        Literal["github", "standard"] | None,
        Rule(
            doc="signature scheme: github (X-Hub-Signature-256) or standard (Standard Webhooks)",
            default="github (when secret_env is set)",
            example="standard",
        ),
    ]


class IngressConfig(TypedDict, total=False):
    """``ingress``: the public routes of ``holon serve``."""

    rate_per_minute: Annotated[
        int | None,
        Rule(
            more_than=0,
            doc="requests per minute per client address, over all public routes",
            default="60",
            example=120,
        ),
    ]
    webhooks: Annotated[
        dict[Name, WebhookConfig] | None, Rule(doc="per-source webhook verification")
    ]


# --------------------------------------------------------------- serve
# (``holon serve``'s HTTP server: serve/http/app.py and serve/http/server.py read it at start)


def _duration_problem(value: str) -> str | None:
    from holon_cli.clock import parse_duration

    try:
        parse_duration(value)
    except ValueError as exc:
        return f": {exc}"
    return None


def _ip_problem(value: str) -> str | None:
    import ipaddress

    try:
        ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        return f"must be an IP address or network, got {describe(value)}"
    return None


Duration = Annotated[
    str, Rule(test=_duration_problem, hint="write a duration such as 10s, 500ms or 2m")
]
IpNetwork = Annotated[str, Rule(test=_ip_problem, hint="write e.g. 127.0.0.1, ::1 or 10.0.0.0/8")]
Seconds = Annotated[float, Rule(more_than=0)]


class ServeConfig(TypedDict, total=False):
    """``serve``: the HTTP server of ``holon serve`` (read when serve starts)."""

    trusted_proxies: Annotated[
        list[IpNetwork] | None,
        Rule(
            doc=(
                "addresses (or networks) of reverse proxies whose X-Forwarded-For, Forwarded and "
                "X-Real-IP headers are believed"
            ),
            default="none (forwarding headers are ignored)",
            example=["127.0.0.1", "10.0.0.0/8"],
        ),
    ]
    header_timeout: Annotated[
        Duration | Seconds | None,
        Rule(
            doc="a connection must send a whole request head within this",
            default="10s",
            example="30s",
        ),
    ]
    max_connections: Annotated[
        int | None,
        Rule(min=1, doc="open HTTP connections per listener", default="512", example=1024),
    ]


class TelemetryConfig(TypedDict, total=False):
    """``telemetry``: OpenTelemetry traces and metrics (runtime/telemetry/);
    the standard ``OTEL_*`` variables apply and can turn it on too."""

    enabled: Annotated[
        bool | None,
        Rule(
            doc="export GenAI traces and metrics over OTLP (needs the holon-cli[otel] extra)",
            default="false (the OTEL_* variables can turn it on)",
            example=True,
        ),
    ]
    flush_timeout_ms: Annotated[
        int | None,
        Rule(
            min=0,
            doc="how long a process waits at its end for spans to leave, in ms",
            default="40",
            example=200,
        ),
    ]
