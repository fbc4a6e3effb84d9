"""Facts the pages share that are not in one place of the code: the
environment variables, the files of a home and what each exit code means
(from the CLI contract), and the ``scripted:`` model's format (from the
docstring of ``holon_cli/providers/scripted.py``, its one source)."""

from __future__ import annotations

import re

# From the CLI contract (../shared/cli-contract.md, "Environment").
ENVIRONMENT: list[tuple[str, str]] = [
    ("HOLON_HOME", "Root of all state. Default: ~/.holon."),
    ("HOLON_AGENT_ID", "Agent used when --agent is omitted. Default: main."),
    (
        "HOLON_MODEL",
        "Default model ref (<provider>/<model>). Default: from config.yaml; none is a clear error.",
    ),
    ("HOLON_FALLBACK_MODELS", "Comma-separated fallback model refs. Default: from config.yaml."),
    (
        "OPENAI_API_KEY, OPENAI_BASE_URL",
        "OpenAI credentials and endpoint. Default endpoint: https://api.openai.com/v1.",
    ),
    (
        "ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL",
        "Anthropic credentials and endpoint. Default endpoint: https://api.anthropic.com.",
    ),
    ("HOLON_CONTROL_TOKEN", "Bearer token for the HTTP control surface. Default: none."),
    ("HOLON_HTTP_ADDR", "Listen address of holon serve. Default: 127.0.0.1:7878."),
    (
        "HOLON_DATABASE_URL",
        "PostgreSQL URL of holon serve --engine dbos (--database-url wins). Default: none.",
    ),
    (
        "HOLON_EXECUTOR_ID",
        "The DBOS worker's executor id. Default: <host>-<pid> "
        "(holon daemon start: <host>-daemon-<home hash>).",
    ),
    ("HOLON_DBOS_LOG_LEVEL", "Log level of DBOS Transact under --engine dbos. Default: WARNING."),
    (
        "HOLON_TEMPLATES_DIR",
        "Where holon agent create --template looks for named templates. "
        "Default: ~/.agents/templates.",
    ),
    (
        "HOLON_DEFAULT_TOOL_OUTPUT_TOKENS, HOLON_MAX_TOOL_OUTPUT_TOKENS",
        "A command's output budget for the model, and its cap "
        "(over runtime.default_tool_output_tokens, runtime.max_tool_output_tokens).",
    ),
    (
        "HOLON_WORK_ITEM_STALE_REMINDER_ROUNDS, HOLON_WORK_ITEM_STALE_REMINDER_COOLDOWN_ROUNDS, "
        "HOLON_WORK_ITEM_STALE_REMINDER_MAX_TOKENS",
        "The work-item progress reminder (over the runtime.work_item_stale_reminder_* keys).",
    ),
    ("HOLON_NO_FAST_PATH", "When set, every command goes through click (for debugging)."),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER, OTEL_SERVICE_NAME, OTEL_*",
        "OpenTelemetry: tracing is on when an OTLP endpoint is set or the traces exporter is "
        "otlp or console (the holon-cli[otel] extra); the standard variables apply.",
    ),
    (
        "https_proxy, http_proxy, all_proxy, no_proxy, SSL_CERT_FILE, SSL_CERT_DIR",
        "Proxies and CA certificates of model requests (httpx2 reads them).",
    ),
    ("NO_COLOR", "When set, output is plain text even on a terminal."),
    ("VISUAL, EDITOR", "Editor used by commands that open a file."),
]
PRECEDENCE = "Precedence: flag > environment > $HOLON_HOME/config.yaml > built-in default."

FILES: list[tuple[str, str]] = [
    (
        "$HOLON_HOME/config.yaml",
        "Configuration: model, fallback_models, providers, runtime. "
        "An unknown key is an error that names it.",
    ),
    ("$HOLON_HOME/run/", "Daemon pid, logs, socket and locks."),
    (
        "$HOLON_HOME/agents/<agent_id>/",
        "The agent home: AGENTS.md, memory/self.md, memory/operator.md, notes/, work/, "
        "skills/, work-items/<id>/plan.md.",
    ),
    (
        "$HOLON_HOME/agents/<agent_id>/.holon/inbox/",
        "Maildir inbox (tmp/, new/, cur/): enqueue writes here without a lock.",
    ),
    (
        "$HOLON_HOME/agents/<agent_id>/.holon/ledger/*.jsonl",
        "Append-only ledgers, one JSON record per line, each carrying its format version v.",
    ),
    (
        "$HOLON_HOME/agents/<agent_id>/.holon/state/*.json",
        "Atomically replaced snapshots (agent record, queue).",
    ),
]

EXIT_STATUS: list[tuple[str, str]] = [
    ("EXIT_OK", 'success, including "nothing to do"'),
    ("EXIT_RUNTIME", "runtime or internal error (including a corrupt ledger)"),
    ("EXIT_USAGE", "usage error (bad flag or value)"),
    ("EXIT_NOT_FOUND", "not found (agent, work item, task, ...)"),
    ("EXIT_REJECTED", "rejected by policy or state (stopped agent, illegal transition, bad token)"),
    ("EXIT_PROVIDER", "model provider failure ended the turn or run"),
    ("EXIT_BUSY", "busy: another process holds the lock (retry later)"),
    ("EXIT_INTERRUPTED", "interrupted"),
]


def scripted_format() -> list[tuple[str, str]]:
    """The ``scripted:`` format as ``(kind, text)`` blocks, ``kind`` being
    ``para`` or ``code``, from the provider module's docstring (after its
    first paragraph). RST ````literals```` become single backticks."""
    from holon_cli.providers import scripted

    doc = (scripted.__doc__ or "").strip("\n")
    paragraphs = re.split(r"\n\s*\n", doc)[1:]
    blocks: list[tuple[str, str]] = []
    expect_code = False
    for para in paragraphs:
        if expect_code:
            lines = para.split("\n")
            indent = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
            blocks.append(("code", "\n".join(ln[indent:] for ln in lines)))
            expect_code = False
            continue
        text = " ".join(ln.strip() for ln in para.split("\n"))
        text = text.replace("``", "`")
        if text.endswith("::"):
            text, expect_code = text[:-1], True
        blocks.append(("para", text))
    return blocks
