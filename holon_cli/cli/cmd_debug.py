"""``holon debug``: prompt frame and latency inspection."""

from __future__ import annotations

import click

from holon_cli.cli import output


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def debug() -> None:
    """Inspect what the runtime would send and where time went.

    \b
    Example:
      holon debug prompt --json | jq .data.instructions
    """


@debug.command("prompt")
@output.agent_option
@click.option(
    "--message",
    "text",
    metavar="TEXT",
    help="Preview the frame as if TEXT were the current operator message.",
)
@click.option("--full", is_flag=True, help="Print the full text of every block.")
@output.json_option
def debug_prompt_cmd(agent_id: str | None, text: str | None, full: bool, as_json: bool) -> None:
    """Show the prompt frame and where each instruction came from.

    \b
    Example:
      holon debug prompt --agent reviewer --full
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.debug import debug_prompt
    from holon_cli.tools.catalog import default_catalog

    d = debug_prompt(open_agent(agent_id), catalog=default_catalog(), text=text)
    if as_json:
        output.emit_json(d)
        return
    rows = [
        (k, d[k])
        for k in (
            "agent_id",
            "agent_home",
            "workspace_id",
            "workspace_anchor",
            "execution_root",
            "cwd",
            "projection_kind",
            "prompt_cache_key",
            "context_fingerprint",
        )
    ]
    wt = d.get("worktree_session")
    if wt:
        rows.append(("worktree", f"{wt['worktree_path']} (branch {wt['worktree_branch']})"))
    rows.append(
        ("execution policy", ", ".join(f"{k}={v}" for k, v in d["execution_policy"].items()))
    )
    for s in d["instructions"]:
        rows.append(
            (f"{s['scope']} instructions", f"{s['path']} ({s['kind']}, {s['bytes']} bytes)")
        )
    if not any(s["scope"] == "workspace" for s in d["instructions"]):
        rows.append(
            ("workspace instructions", "(none: no AGENTS.md or CLAUDE.md at the workspace anchor)")
        )
    rows.append(("skills", ", ".join(s["name"] for s in d["skills"]) or "(none)"))
    rows.append(("tools", ", ".join(d["tools"])))
    cache, hist = d["cache"] or {}, d["history"]
    rows.append(
        (
            "fixed prompt",
            f"about {d['fixed_tokens']} tokens of runtime.context_budget_tokens "
            f"{d['context_budget_tokens']} (instructions and tool schemas: the budget's floor)",
        )
    )
    rows.append(
        (
            "tool schemas",
            ", ".join(f"{src} ~{n} tokens" for src, n in d["tool_schema_tokens"].items()),
        )
    )
    for p in d.get("mcp_problems") or []:
        rows.append((f"mcp {p['server']}", f"no tools offered: {p['error']}"))
    rows.append(
        (
            "prompt cache",
            f"working memory revision {cache.get('working_memory_revision', 0)}, "
            f"compression epoch {cache.get('compression_epoch', 0)}",
        )
    )
    rows.append(
        (
            "history",
            f"{hist['turns']} earlier turn(s), {len(hist['items'])} item(s), "
            f"~{hist['tokens']} tokens (epoch {hist['epoch']}), between the context "
            "blocks before and after it",
        )
    )
    output.print_kv(rows)
    click.echo("")
    click.echo("sections (in prompt order):")
    placed = {"before_history": "before history", "after_history": "after history"}
    for i, s in enumerate(d["sections"], 1):
        where = placed.get(s.get("placement", ""), "instructions")
        output.echo(
            f"  {i:>2}. [{s['scope']}] {s['title']} <- {s['source']} ({s['chars']} chars; {where})"
        )
    if full:
        output.echo("\n=== system prompt ===\n" + d["system_prompt"])
        for b in d["system_blocks"]:
            output.echo("\n=== system block ===\n" + b)
        n = d["stable_blocks"]
        for b in d["context_blocks"][:n]:
            output.echo("\n=== context block (before history) ===\n" + b)
        for it in hist["items"]:
            output.echo(f"\n=== history: {it['role']} ===\n" + (it["text"] or "(tool calls)"))
        for b in d["context_blocks"][n:]:
            output.echo("\n=== context block (after history) ===\n" + b)


@debug.command("latency")
@output.agent_option
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Newest N turns.",
)
@output.json_option
def debug_latency_cmd(agent_id: str | None, limit: int, as_json: bool) -> None:
    """Per-turn latency: queue wait, context build, provider rounds, tools, cleanup.

    \b
    Example:
      holon debug latency --limit 5
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.debug import debug_latency

    turns = debug_latency(open_agent(agent_id), limit=limit)
    if as_json:
        output.emit_json({"turns": turns})
        return
    if not turns:
        click.echo("no turns recorded yet", err=True)
        return
    rows = []
    for t in turns:
        rounds = " + ".join(f"{r['provider_round_ms']:.0f}" for r in t["provider_rounds"]) or "-"
        rows.append(
            [
                t["turn_id"],
                t.get("status") or "?",
                t.get("queue_wait_ms") if t.get("queue_wait_ms") is not None else "-",
                f"{t.get('context_build_total_ms', 0) or 0:.1f}",
                rounds,
                f"{t['tools_ms']:.0f}",
                f"{t.get('cleanup_ms') or 0:.1f}",
                t.get("total_ms") if t.get("total_ms") is not None else "-",
                t.get("runtime_overhead_ms", "-"),
            ]
        )
    output.print_table(
        [
            "turn",
            "status",
            "queue wait ms",
            "context ms",
            "provider rounds ms",
            "tools ms",
            "cleanup ms",
            "total ms",
            "overhead ms",
        ],
        rows,
    )


@debug.command("providers")
@output.agent_option
@click.option(
    "--model", "model", metavar="REF", help="Check this model ref instead of the agent's."
)
@output.json_option
def debug_providers_cmd(agent_id: str | None, model: str | None, as_json: bool) -> None:
    """Check the model chain without sending a request (the provider doctor).

    Prints the retry policy and, per candidate of the agent's model chain
    (primary, then fallbacks), its transport, base URL, whether its
    credential variable is set (never its value), and why it cannot be
    served, and where the primary model comes from (model source: flag,
    agent, HOLON_MODEL, config or default). Exit 0 when at least one
    candidate can be served (read each one's `supported`), 1 when none can
    (or no model is configured): a turn would fail.

    \b
    Example:
      holon debug providers --json | jq '.data.candidates[] | select(.supported | not)'
    """
    from holon_cli.runtime.agents.lifecycle import open_agent
    from holon_cli.runtime.debug import debug_providers

    d = debug_providers(open_agent(agent_id), cli_model=model)
    if as_json:
        if d["problem"]:
            output.emit_json_failure_with_data(
                "no_servable_model",
                d["problem"],
                "see data.candidates[].reason; set HOLON_MODEL, --model or config.yaml model",
                d,
            )
            raise click.exceptions.Exit(1)
        output.emit_json(d)
        return
    policy = d["retry_policy"]
    output.print_kv(
        [
            ("agent", d["agent_id"]),
            ("model source", d["model_source"]),
            (
                "retries",
                f"{policy['max_retries']} per candidate, on: {', '.join(policy['retryable'])}",
            ),
        ]
    )
    rows = [
        [
            c["model"],
            c["transport"] or "-",
            c["base_url"] or "-",
            c["credentials"] + (f" (${c['credentials_env']})" if c["credentials_env"] else ""),
            "yes" if c["supported"] else "no",
            c["reason"] or "",
        ]
        for c in d["candidates"]
    ]
    if rows:
        click.echo("")
        output.print_table(["model", "transport", "base url", "credentials", "ok", "reason"], rows)
    for c in d["candidates"]:
        features = ", ".join(_wire_text(k, v) for k, v in c.get("wire", {}).items())
        if features:
            click.echo(f"wire {c['model']}: {features}")
    if d["problem"]:
        click.echo(f"\nproblem: {d['problem']}", err=True)
        raise click.exceptions.Exit(1)


def _wire_text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return f"{key} {'on' if value else 'off'}"
    if isinstance(value, list):
        return f"{key} {'+'.join(map(str, value)) or 'none'}"
    return f"{key} {value}"
