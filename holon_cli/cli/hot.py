"""The bodies of the commands the fast path runs, importable without click.

``holon enqueue``, ``holon status`` and ``holon workitem list`` are what shell
scripts, cron lines and watch loops call most; their click declarations
(:mod:`~holon_cli.cli.cmd_enqueue`, :mod:`~holon_cli.cli.cmd_inspect`,
:mod:`~holon_cli.cli.cmd_workitem`) forward here, and so does
:mod:`holon_cli.cli.fast`, so both ways print exactly the same.
"""

from __future__ import annotations

import sys
from typing import Any

from holon_cli.cli import output


def enqueue(
    text: str | None,
    agent_id: str | None,
    kind: str | None,
    origin: str | None,
    priority: str,
    json_body: bool,
    work_item_id: str | None,
    correlation_id: str | None,
    causation_id: str | None,
    as_json: bool,
) -> None:
    """``holon enqueue``: admit one message and print its id."""
    output.begin("enqueue", as_json)
    from holon_cli.errors import UsageError
    from holon_cli.runtime.enqueue import admit

    if text is None or text == "-":
        if text is None and sys.stdin.isatty():
            raise UsageError(
                "no message given", hint="pass TEXT, or `-` to read the message from stdin"
            )
        # read bytes: decoding is admission's job, with one clear error for
        # anything that is not UTF-8 (the text stream would surrogate-escape)
        buf = getattr(sys.stdin, "buffer", None)
        try:
            text = buf.read().decode("utf-8") if buf is not None else sys.stdin.read()
        except UnicodeDecodeError:
            raise UsageError(
                "message is not valid UTF-8",
                hint="send UTF-8 text; for binary data send a path or base64 with --json-body",
                kind="invalid_utf8",
            ) from None
    env = admit(
        text,
        agent_id=agent_id,
        json_body=json_body,
        kind=kind,
        origin=origin,
        priority=priority,
        work_item_id=work_item_id,
        correlation_id=correlation_id,
        causation_id=causation_id,
        ingest_now=True,
    )
    if as_json:
        output.emit_json(env)
    else:
        output.write_line(env["id"])


def status(agent_id: str | None, as_json: bool, command: str = "status") -> None:
    """Render one agent's summary (`holon status` and `holon agent status`)."""
    output.begin(command, as_json)
    from holon_cli.runtime.agents import open_agent
    from holon_cli.runtime.inspect import agent_summary

    s = agent_summary(open_agent(agent_id))
    if as_json:
        output.emit_json(s)
        return
    tu = s["token_usage"]
    rows: list[tuple[str, Any]] = [
        ("agent", s["agent_id"]),
        ("status", s["status"]),
    ]
    if s.get("lifecycle_hint"):
        rows.append(("hint", s["lifecycle_hint"]))
    rows += [
        (
            "kind",
            (
                f"{s['identity']['kind']} / {s['identity']['visibility']} / "
                f"{s['identity']['ownership']}"
            ),
        ),
        ("home", s["agent_home"]),
        ("pending", s["pending"]),
        ("in flight", s["in_flight"]),
        ("processed", s["processed"]),
        ("work item", s["current_work_item_id"] or "-"),
        ("last wake", s["last_wake_reason"] or "-"),
        (
            "tokens",
            (
                f"{tu['total']['total_tokens']} total ({tu['total']['input_tokens']} in / "
                f"{tu['total']['output_tokens']} out) over {tu['total_model_rounds']} round(s)"
            ),
        ),
        ("last event", s["last_event_seq"]),
    ]
    if "model" in s:
        m = s["model"]
        rows.append(("model", f"{m.get('effective_model') or '-'} ({m.get('source')})"))
        if m.get("effective_fallback_models"):
            rows.append(("fallbacks", ", ".join(m["effective_fallback_models"])))
    if "work_items" in s:
        rows.append(("work items", ", ".join(f"{k} {v}" for k, v in s["work_items"].items())))
    for name, use in (s.get("budget") or {}).items():
        resets = f"resets {use['resets_at']}" if use["resets_at"] else "does not reset"
        rows.append((f"budget {name}", f"{use['used']:g} of {use['limit']:g} ({resets})"))
    wm = s.get("working_memory") or {}
    if wm.get("working_memory_revision"):
        rows.append(
            (
                "memory",
                f"revision {wm['working_memory_revision']}, "
                f"{wm['archived_episode_count']} episode(s) archived",
            )
        )
    if s.get("active_tasks"):
        rows.append(
            ("tasks", ", ".join(f"{t['task_id']} ({t['summary']})" for t in s["active_tasks"]))
        )
    rows += _attention_rows(s)
    output.print_kv(rows)


def _attention_rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    """What `holon status` flags for the operator: skills, the trigger, a
    broken config.yaml, the last failed turn, aborted messages."""
    rows: list[tuple[str, Any]] = []
    if s.get("skills"):
        rows.append(("skills", ", ".join(f"{k['skill']} ({k['state']})" for k in s["skills"])))
    trig = s.get("external_trigger")
    if trig:
        line = str(trig.get("status"))
        if trig.get("trigger_count"):
            line += f", {trig['trigger_count']} delivery(ies), last {trig['last_triggered_at']}"
        rows.append(("trigger", line + " (`holon trigger show` prints the URL)"))
    if s.get("config_error"):
        rows.append(("config", f"BROKEN: {s['config_error']}"))
    fail = s.get("last_failure")
    if fail:
        rows.append(
            ("last failure", f"{fail.get('at')} turn {fail.get('turn_id')}: {fail.get('summary')}")
        )
    if s.get("aborted_messages"):
        shown = ", ".join(
            f"{m['message_id']} ({m.get('reason') or 'no reason recorded'})"
            for m in s["aborted_messages"]
        )
        rows.append(("aborted", f"{s['aborted']} message(s): {shown}"))
        rows.append(
            (
                "",
                "`holon queue list --status aborted` lists them; "
                "`holon queue requeue ID` runs one again",
            )
        )
    return rows


def workitem_list(agent_id: str | None, filter_: str, limit: int | None, as_json: bool) -> None:
    """``holon workitem list``: the current item first, then by candidate class."""
    output.begin("workitem list", as_json)
    from holon_cli.runtime.agents import open_agent
    from holon_cli.runtime.workitems import list_work_items

    res = list_work_items(open_agent(agent_id), filter=filter_, limit=limit)
    if as_json:
        output.emit_json(res)
        return
    items = res["work_items"]
    if not items:
        from holon_cli.runtime.workitems.hints import CliVocabulary

        create = CliVocabulary(agent_id, {}).command("create OBJECTIVE")
        output.write_line(f"no work items ({filter_}); create one with {create}", err=True)
        return
    rows = []
    for w in items:
        tc = w["todo_counts"]
        rows.append(
            [
                "*" if w["is_current"] else "",
                w["id"],
                w["readiness"],
                w["plan_status"],
                f"{tc['completed']}/{tc['total']}" if tc["total"] else "-",
                (w["objective"][:70] + "…") if len(w["objective"]) > 71 else w["objective"],
            ]
        )
    output.print_table(["", "id", "readiness", "plan", "todo", "objective"], rows)
    if res["truncated"]:
        output.write_line(
            f"({len(items)} of {res['total']} shown; raise --limit to see more)", err=True
        )


def run(
    text: str,
    agent_id: str | None,
    create_agent: bool,
    model: str | None,
    max_turns: int,
    no_wait_for_tasks: bool,
    workspace_root: str | None,
    cwd: str | None,
    keep_agent: bool,
    as_json: bool,
) -> int:
    """``holon run``: one run to completion; returns the exit code (5 when a
    provider failure ended it, after printing what happened)."""
    output.begin("run", as_json)
    from holon_cli.errors import EXIT_PROVIDER, UsageError
    from holon_cli.runtime.run import run_once
    from holon_cli.tools.catalog import default_catalog

    if model is None:
        from holon_cli.cli.refs import check_env_model

        check_env_model("HOLON_MODEL")  # unknown provider: exit 2 now, not after agent setup
    if text == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError:
            raise UsageError("stdin is not valid UTF-8 text") from None
    data = run_once(
        text,
        agent_id=agent_id,
        create=create_agent,
        model=model,
        max_turns=max_turns,
        workspace_root=workspace_root,
        cwd=cwd,
        keep_agent=keep_agent,
        wait_for_tasks=not no_wait_for_tasks,
        catalog=default_catalog(),
    )
    failed = data["final_status"] == "failed"
    if as_json:
        if failed:
            fa = data.get("failure_artifact") or {}
            output.emit_json_failure_with_data(
                "provider_failure",
                fa.get("summary", "the run failed"),
                "see data.failure_artifact and data.provider_attempt_timeline; "
                + _inspect_hint(data["agent_id"]),
                data,
            )
        else:
            output.emit_json(data)
    else:
        if data["final_text"]:
            output.echo(data["final_text"])
        if data["final_status"] != "completed":
            output.echo(f"[{data['final_status']}]", err=True)
        if data.get("failure_artifact"):
            output.echo(f"failure: {data['failure_artifact'].get('summary')}", err=True)
        if data["final_status"] != "completed" and data.get("agent_kept"):
            output.echo(f"agent {data['agent_id']} kept at {data['agent_home']}", err=True)
            output.echo(_inspect_hint(data["agent_id"]), err=True)
    return EXIT_PROVIDER if failed else 0


def _inspect_hint(agent_id: str) -> str:
    return (
        f"inspect it: `holon status --agent {agent_id}`, "
        f"`holon transcript --agent {agent_id}`, `holon tail --agent {agent_id}`; "
        f"remove it: `holon agent rm {agent_id}` (or `holon agent prune`)"
    )
