"""``holon home``: create, locate and check the state home."""

from __future__ import annotations

from typing import Any

import click

from holon_cli.cli import output


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def home() -> None:
    """Manage the state home ($HOLON_HOME, default ~/.holon).

    \b
    Example:
      holon home init && holon home check
    """


@home.command("init")
@output.json_option
def home_init(as_json: bool) -> None:
    """Create the home and the default agent (idempotent).

    Also seeds the builtin templates (holon-default, holon-developer) into
    ~/.agents/templates/ ($HOLON_TEMPLATES_DIR): an unchanged seeded copy is
    refreshed, a copy you edited is never overwritten.

    \b
    Example:
      HOLON_HOME=/srv/holon holon home init
    """
    output.begin("home init", as_json)
    from holon_cli.runtime.agents.lifecycle import ensure_home, open_agent
    from holon_cli.runtime.agents.templates import seed_builtin_templates

    layout = ensure_home()
    store = open_agent(None)
    seeded = seed_builtin_templates()
    data = {
        "home": str(layout.root),
        "default_agent": store.agent_id,
        "agent_home": str(store.layout.home),
        "templates": seeded,
    }
    if as_json:
        output.emit_json(data)
    else:
        click.echo(f"home: {layout.root}")
        click.echo(f"default agent: {store.agent_id} ({store.layout.home})")
        for t in seeded:
            note = " (edited by you: left as is)" if t["status"] == "diverged" else ""
            click.echo(f"template {t['template_id']}: {t['status']} ({t['path']}){note}")


@home.command("path")
@output.json_option
def home_path(as_json: bool) -> None:
    """Print the home directory path.

    \b
    Example:
      ls "$(holon home path)/agents"
    """
    output.begin("home path", as_json)
    from holon_cli.store.layout import home_root

    root = home_root()
    if as_json:
        output.emit_json({"home": str(root), "exists": root.exists()})
    else:
        click.echo(str(root))


@home.command("check")
@click.option(
    "--repair",
    is_flag=True,
    help="First rebuild what can be rebuilt (damaged agent records and snapshots, "
    "ledger marks), setting damaged files aside; then check.",
)
@output.json_option
def home_check(repair: bool, as_json: bool) -> None:
    """Validate config.yaml, every ledger, snapshot and inbox file; report
    problems with file and line.

    Records are checked against their schema, not just parsed; a ledger
    shorter than its mark (emptied, cut, an older copy) and a snapshot that
    disagrees with its ledger are problems too. Exits 1 when a problem is
    found. A torn last line (an interrupted write) is a note, not a problem:
    it is ignored and repaired on the next append. Also reports the space
    used by full command outputs (.holon/outputs/).

    --repair never deletes: a damaged file is renamed aside
    (NAME.damaged-TIME); agent.json is restored from the copy kept before its
    last change or rebuilt from the ledgers; queue, timer, work item and
    trigger snapshots are rebuilt from their ledgers (records a cut ledger
    lost are appended back from the snapshot first); events cut from
    events.jsonl are recorded as lost. Damaged lines inside a ledger are left
    for you to move aside.

    \b
    Examples:
      holon home check || echo "home needs attention"
      holon home check --repair
    """
    output.begin("home check", as_json)
    from holon_cli.errors import CorruptStateError
    from holon_cli.runtime.inspect import home_check as check

    repairs: list[Any] = []
    if repair:
        from holon_cli.runtime.home.repair_planes import repair_all

        repairs = list(repair_all())
    report = check()
    if repair:
        from holon_cli.runtime.home.repair import unrepaired

        repairs += unrepaired(report["problems"], repairs)  # what it could not fix, and why
        report["repairs"] = repairs
        if not as_json:
            for a in repairs:
                done = "not repaired" if a["action"] == "skipped" else "repaired"
                detail = a["detail"].removeprefix("not repaired: ")
                click.echo(f"{done} {a['path']}: {a['action']}: {detail}", err=True)
            if not repairs:
                click.echo("nothing to repair", err=True)
    if as_json:
        if report["ok"]:
            output.emit_json(report)
        else:
            output.emit_json_error(
                "home check",
                "corrupt_state",
                f"{len(report['problems'])} problem(s) found under {report['home']}",
                "see error.details.problems",
                {
                    "problems": report["problems"],
                    "notes": report["notes"],
                    "checked": report["checked"],
                    "outputs": report.get("outputs"),
                    "usage": report.get("usage"),
                    **({"repairs": report["repairs"]} if repair else {}),
                },
            )
            raise click.exceptions.Exit(1)
        return
    for p in report["problems"]:
        where = f"{p['path']}:{p['line']}" if p["line"] else p["path"]
        click.echo(f"PROBLEM {where}: {p['message']}")
    for n in report["notes"]:
        click.echo(f"note    {n['path']}: {n['message']}", err=True)
    c = report["checked"]
    from holon_cli.runtime.home.checks import human_bytes

    summary = (
        f"checked {c['agents']} agent(s), {c['ledgers']} ledger(s), {c['records']} record(s), "
        f"{c['inbox_messages']} inbox message(s) under {report['home']}; command outputs and "
        f"task logs use {human_bytes(int(c.get('output_bytes', 0)))}"
    )
    if not report["ok"]:
        raise CorruptStateError(
            f"{len(report['problems'])} problem(s) found; {summary}",
            hint="fix each PROBLEM above (move damaged lines or files aside, keeping a "
            "backup), then re-run `holon home check`",
        )
    click.echo(f"ok: {summary}")


@home.command("gc")
@click.option(
    "--dry-run", is_flag=True, help="Report what would be closed and dropped; change nothing."
)
@output.json_option
def home_gc(dry_run: bool, as_json: bool) -> None:
    """Apply `retention` from config.yaml now (serve does it daily).

    Closes (and compresses) every agent's open events and transcript
    segment, drops closed segments older than retention.events_days /
    transcript_days and finished command outputs older than outputs_days,
    then the oldest closed history while the home is over max_home_bytes.
    Nothing unsettled is dropped (queued messages, open work items, timers,
    running tasks, the turn journal). Exit 0; a home still over
    max_home_bytes afterwards is reported (over_max_home_bytes).

    \b
    Examples:
      holon home gc --dry-run
      holon home gc --json
    """
    output.begin("home gc", as_json)
    from holon_cli.runtime.home.checks import human_bytes
    from holon_cli.runtime.home.gc import gc_home

    report = gc_home(dry_run=dry_run)
    if as_json:
        output.emit_json(dict(report))
        return
    verb = "would drop" if dry_run else "dropped"
    for c in report["closed"] if dry_run else ():  # gc itself reports the count
        click.echo(f"would close {c['agent_id']} {c['ledger']} {c['open_path']} into {c['path']}")
    for d in report["dropped"]:
        click.echo(
            f"{verb} {d['agent_id']} {d['ledger']} {d['path']} "
            f"({human_bytes(d['bytes'])}, {d['age_days']:g} days old, {d['reason']})"
        )
    out = report["outputs"]
    if out["removed"]:
        click.echo(f"{verb} {out['removed']} command output(s) ({human_bytes(out['freed_bytes'])})")
    limit = report["max_home_bytes"]
    lim = f" of max {human_bytes(limit)}" if limit is not None else ""
    click.echo(
        f"{'dry run: ' if dry_run else ''}{len(report['closed'])} segment(s) "
        f"{'would be closed' if dry_run else 'closed'}, "
        f"{human_bytes(report['freed_bytes'])} {'would be freed' if dry_run else 'freed'}; "
        f"home uses {human_bytes(report['home_bytes'] or 0)}{lim}"
    )
    if report["over_max_home_bytes"]:
        click.echo(
            "warning: still over retention.max_home_bytes: what is left is unsettled work, "
            "open segments or workspace files; raise the limit or free space by hand",
            err=True,
        )


@home.command("audit")
@click.option(
    "--allow-held",
    is_flag=True,
    help="List held agents (finding `held`) without failing: exit 1 only for the others.",
)
@output.json_option
def home_audit(allow_held: bool, as_json: bool) -> None:
    """Check that no agent is silently stuck; exit 1 with the findings if one is.

    Every admitted message must have exactly one outcome (processed or
    aborted) or still be queued, and every agent holding runnable work must
    have a future wake: a queued message, a timer, a recheck, a pending wake
    hint, a running task, or (awake agents) the activation the next `holon
    tick` makes. An agent with runnable work that a hold keeps back (stopped
    or paused by the operator, a budget, the no-progress guard) is a finding
    `held` naming the hold and until when (--allow-held: listed, exit 0).
    Reads ledgers and state only and takes no lock, so it is safe next to a
    running `holon serve`. A damaged agent is a finding.

    \b
    Examples:
      holon home audit
      # crontab: cron mails the findings (and only then) when an agent is stuck
      */15 * * * * holon home audit > ~/.holon-audit.txt 2>&1 || cat ~/.holon-audit.txt
    """
    output.begin("home audit", as_json)
    from holon_cli.runtime.home.audit import audit_home

    report = audit_home()
    findings = report["findings"]
    failing = [f for f in findings if not (allow_held and f["kind"] == "held")]
    report["ok"] = not failing
    if as_json:
        if not failing:
            output.emit_json(report)
            return
        output.emit_json_failure_with_data(
            "audit_findings",
            f"{len(findings)} finding(s) under {report['home']}",
            "see data.findings: each names the agent and what is missing",
            report,
        )
        raise click.exceptions.Exit(1)
    for f in findings:
        click.echo(f"{f['kind']:<18} {f['agent_id']}: {f['detail']}")
    summary = (
        f"audited {report['agents']} agent(s) and {report['messages']} message(s) "
        f"under {report['home']}"
    )
    if failing:
        click.echo(f"{len(findings)} finding(s); {summary}", err=True)
        raise click.exceptions.Exit(1)
    held = f" ({len(findings)} held agent(s) allowed)" if findings else ""
    click.echo(f"ok: {summary}{held}")
