"""The bodies of the commands on the click-free fast path, importable
without click.

``holon enqueue``, ``holon status``, ``holon workitem list`` and ``holon
run`` are what shell scripts, cron lines and watch loops call most; their
click declarations (:mod:`~holon_cli.cli.cmd_enqueue`,
:mod:`~holon_cli.cli.cmd_inspect`, :mod:`~holon_cli.cli.cmd_workitem`,
:mod:`~holon_cli.cli.cmd_run`) forward here, and so does the fast path
(:mod:`holon_cli.cli.fast`), so both ways print exactly the same.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from holon_cli.cli import output

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.runtime.outcome import Marks, MessageOutcome
    from holon_cli.store.agent_store import AgentStore


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
    wait: bool = False,
    timeout: float | None = None,
    idempotency_key: str | None = None,
) -> int | None:
    """``holon enqueue``: admit one message and print its id (with ``--wait``:
    its outcome once it is settled; returns the exit code)."""
    output.begin("enqueue", as_json)
    from holon_cli.errors import UsageError
    from holon_cli.runtime.enqueue import admit

    if timeout is not None and not wait:
        raise UsageError("--timeout needs --wait", hint="holon enqueue TEXT --wait --timeout 5m")
    if timeout is not None and timeout <= 0:
        raise UsageError("--timeout must be positive", hint="e.g. --timeout 90s")

    if text is None or text == "-":
        if text is None and sys.stdin.isatty():
            raise UsageError(
                "no message given", hint="pass TEXT, or `-` to read the message from stdin"
            )
        text = _read_stdin()
    since: Marks | None = None
    store: AgentStore | None = None
    if wait:
        from holon_cli.runtime.agents.lifecycle import open_agent
        from holon_cli.runtime.outcome import marks

        store = open_agent(agent_id)
        since = marks(store)  # nothing about the message can lie before these offsets
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
        idempotency_key=idempotency_key,
        store=store,
        ingest_now=True,
    )
    if store is not None and since is not None:
        return _wait_and_print(store, env, since, timeout, as_json)
    if as_json:
        output.emit_json(env)
    else:
        output.write_line(env["id"])
    return None


def _wait_and_print(
    store: AgentStore, env: Envelope, since: Marks, timeout: float | None, as_json: bool
) -> int | None:
    """``enqueue --wait``: block until the message is settled, print its
    outcome; exit 75 (the id on stdout) when ``timeout`` passes first, 130
    (the id on stdout) on Ctrl-C. The message stays queued either way."""
    from holon_cli.errors import BusyError, InterruptedError_
    from holon_cli.runtime.outcome import Marks, wait_for_outcome

    mid = env["id"]
    if env.get("duplicate"):
        since = Marks()  # the first message with this key: read its ledgers from the start
    see = f"see it with `holon queue list --agent {store.agent_id}`"
    notice = WaitNotice(store, mid)
    try:
        res = wait_for_outcome(store, mid, since, timeout_s=timeout, waiting=notice)
    except KeyboardInterrupt:
        if not as_json:
            output.write_line(mid)
        raise InterruptedError_(
            f"stopped waiting; message {mid} stays queued",
            hint=see,
            details={"message_id": mid},
        ) from None
    if res is None:
        if not as_json:
            output.write_line(mid)
        why = notice.blocker()
        raise BusyError(
            f"message {mid} was not settled within {timeout:g} s; it stays queued"
            + (f" ({why})" if why else ""),
            hint=f"{see}; "
            + (
                notice.remedy()
                if why
                else f"`holon turn --agent {store.agent_id}` or a running `holon serve` settles it"
            ),
            kind="wait_timeout",
            details={"message_id": mid},
        )
    return _print_outcome(store.agent_id, res, as_json)


class WaitNotice:
    """``enqueue --wait``'s word on stderr when nothing would run the turn: the
    agent is held (stopped, paused, a budget that stopped a turn: named with
    until when), or no serve of this home answers on any of its sockets (a
    DBOS worker's included). Said once :data:`FIRST_S` after admission (a
    serve or a cron turn settles most messages before), then again only when
    the answer changes (looked at every :data:`AGAIN_S`). Waiting goes on."""

    FIRST_S = 1.0
    AGAIN_S = 10.0

    def __init__(self, store: AgentStore, message_id: str) -> None:
        self.store = store
        self.message_id = message_id
        self.next_at = self.FIRST_S
        self.said: str | None = None
        self._hold: Any = None

    def __call__(self, waited: float) -> None:
        if waited < self.next_at:
            return
        self.next_at = waited + self.AGAIN_S
        why = self.blocker()
        if why and why != self.said:
            # a hold's reason says how it is lifted; no serve: say what would run it
            then = f"; {self.remedy()}" if self._hold is None else ""
            output.echo(
                f"holon enqueue: message {self.message_id} waits: {why}{then}. "
                "Still waiting (Ctrl-C stops waiting; the message stays queued)",
                err=True,
            )
        self.said = why

    def blocker(self) -> str | None:
        """Why nothing would run the message's turn now, or ``None``."""
        from holon_cli.runtime.agents.holds import hold_line, queue_hold
        from holon_cli.serve.client import live_sockets

        try:
            self._hold = queue_hold(self.store)
        except Exception:  # noqa: BLE001 - a damaged record: the turn reports it
            self._hold = None
        if self._hold is not None:
            return f"agent {self.store.agent_id} is held: {hold_line(self._hold)}"
        from holon_cli.store.layout import HomeLayout

        if not live_sockets():
            return (
                f"no `holon serve` runs for this home (nothing answers on "
                f"{HomeLayout.current().run_dir}/holon.sock or a worker's holon-*.sock), "
                "so only a `holon turn` (cron, another shell) would run it"
            )
        return None

    def remedy(self) -> str:
        aid = self.store.agent_id
        if self._hold is not None:
            if self._hold["kind"] in ("paused", "stopped"):
                return f"`holon agent start {aid}` lets it run"
            return "it runs once the hold ends"
        return f"run `holon turn --agent {aid}` in another shell, or `holon daemon start`"


def _print_outcome(agent_id: str, res: MessageOutcome, as_json: bool) -> int | None:
    """A settled message: its final text (exit 0); aborted: exit 5 when its
    turn failed on the provider, else 1."""
    from holon_cli.errors import EXIT_PROVIDER, EXIT_RUNTIME

    mid = res["message_id"]
    data = {**res, "agent_id": agent_id}
    code = None
    if res["status"] != "processed":
        brief = res["brief"]
        code = EXIT_PROVIDER if brief and brief["kind"] == "failure" else EXIT_RUNTIME
    if as_json:
        if code is None:
            output.emit_json(data)
        else:
            output.emit_json_failure_with_data(
                "message_aborted",
                f"message {mid} was aborted ({res['reason'] or 'see its brief'})",
                f"see `holon tail --agent {agent_id}`; requeue it with "
                f"`holon queue requeue {mid} --agent {agent_id}`",
                data,
            )
        return code
    brief_text = res["brief"].get("text") if res["brief"] else None
    text = res["final_text"] or brief_text or ""
    if text:
        output.echo(text, err=code is not None)
    if code is not None:
        output.echo(f"[aborted: {res['reason'] or 'failed'}] {mid}", err=True)
    return code


def _read_stdin(what: str = "message") -> str:
    """All of stdin as text. Bytes are read and decoded strictly: one clear
    error (exit 2) for anything that is not UTF-8 (the text stream would
    surrogate-escape it or fail with a traceback)."""
    from holon_cli.errors import UsageError

    buf = getattr(sys.stdin, "buffer", None)
    try:
        return buf.read().decode("utf-8") if buf is not None else sys.stdin.read()
    except UnicodeDecodeError:
        raise UsageError(
            f"{what} is not valid UTF-8",
            hint="send UTF-8 text; for binary data send a path or base64 with --json-body",
            kind="invalid_utf8",
        ) from None


def status(agent_id: str | None, as_json: bool, command: str = "status") -> None:
    """Render one agent's summary (`holon status` and `holon agent status`)."""
    output.begin(command, as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
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
    for h in s.get("holds") or []:  # what keeps queued work from running by itself
        until = f" (until {h['until']})" if h["until"] else ""
        rows.append((f"held: {h['kind']}", h["reason"] + until))
    rows += [
        (
            "kind",
            (
                f"{s['identity']['kind']} / {s['identity']['visibility']} / "
                f"{s['identity']['ownership']}"
            ),
        ),
        ("home", s["agent_home"]),
        *_workspace_rows(s),
        ("pending", s["pending"]),
        ("in flight", s["in_flight"]),
        ("processed", s["processed"]),
        ("aborted", _aborted_line(s)),
        ("work item", s["current_work_item_id"] or "-"),
        ("last wake", s["last_wake_reason"] or "-"),
        ("last brief", s.get("last_brief_at") or "-"),
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
        from holon_cli.runtime.presentation import work_counts

        rows.append(("work items", work_counts(s["work_items"])))
    for name, use in (s.get("budget") or {}).items():
        resets = f"resets {use['resets_at']}" if use["resets_at"] else "does not reset"
        rows.append((f"budget {name}", f"{use['used']:g} of {use['limit']:g} ({resets})"))
    tel = s.get("telemetry") or {}
    if tel.get("enabled") or tel.get("dropped"):
        dropped = (
            f", {tel['dropped']} span(s) never reached the collector (is it up? a distant "
            "one needs telemetry.flush_timeout_ms above 40)"
            if tel.get("dropped")
            else ""
        )
        rows.append(("tracing", ("on" if tel.get("enabled") else "off") + dropped))
    wm = s.get("working_memory") or {}
    if wm.get("working_memory_revision"):
        rows.append(
            (
                "memory",
                f"revision {wm['working_memory_revision']}, "
                f"{wm['archived_episode_count']} episode(s) archived",
            )
        )
    prof = s.get("execution_profile") or {}
    if prof.get("turns"):
        rows.append(
            (
                "turns",
                f"{prof['turns']} settled ({prof['aborted_turns']} aborted), "
                f"mean {prof['mean_turn_ms'] / 1000:.1f} s, "
                f"{prof['mean_tool_calls_per_turn']:g} tool call(s) per turn",
            )
        )
    if s.get("compacted_message_count"):
        rows.append(("compacted", f"{s['compacted_message_count']} message(s) so far"))
    if s.get("active_tasks"):
        rows.append(
            ("tasks", ", ".join(f"{t['task_id']} ({t['summary']})" for t in s["active_tasks"]))
        )
    rows.append(("sandbox", _sandbox_line(s.get("sandbox"))))
    rows += _mcp_rows(s)
    rows += _attention_rows(s)
    output.print_kv(rows)


def _sandbox_line(sb: Mapping[str, object] | None) -> str:
    """``bwrap (auto, network on)``; ``none (auto: bubblewrap is not installed ...)``."""
    if not sb:
        return "-"
    line = f"{sb['sandbox']} ({sb['setting']}, network {sb['network']})"
    return f"{line}: {sb['reason']}" if sb.get("reason") else line


def _mcp_rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    """One row per MCP server: state, era, tools offered; a failed one with why."""
    rows: list[tuple[str, Any]] = []
    for r in s.get("mcp_servers") or []:
        line = f"{r['state']} ({r['transport']}"
        line += f", {r['protocol']})" if r.get("protocol") else ")"
        if r.get("tools") is not None:
            line += f", {r['tools']} tool(s)"
        if r["state"] == "failed" and r.get("last_error"):
            line += f": {str(r['last_error'])[:160]}"
        rows.append((f"mcp {r['name']}", line))
    if s.get("mcp_requests_open"):
        rows.append(("mcp requests", f"{s['mcp_requests_open']} open (`holon mcp requests`)"))
    return rows


def _workspace_rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    ws, wt = s["workspace"], s.get("worktree_session")
    rows: list[tuple[str, Any]] = [
        ("workspace", f"{ws['workspace_id']} ({ws['workspace_anchor']})")
    ]
    if ws["execution_root"] != ws["workspace_anchor"]:
        rows.append(("execution root", f"{ws['execution_root']} ({ws['projection_kind']})"))
    if ws["cwd"] != ws["execution_root"]:
        rows.append(("cwd", ws["cwd"]))
    if wt:
        rows.append(("worktree", f"branch {wt['worktree_branch']} from {wt['original_branch']}"))
    import os

    if not os.path.isdir(ws["execution_root"]):
        rows.append(
            (
                "",
                "MISSING: the execution root is gone; `holon workspace use agent_home` "
                "(or another workspace) rebinds the agent",
            )
        )
    return rows


def _attention_rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    """What `holon status` flags for the operator: skills, the trigger, a
    broken config.yaml, the last failed turn (aborted messages: `_aborted_line`)."""
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
    return rows


def _aborted_line(s: dict[str, Any]) -> str:
    """``3 (msg_a: max_attempts_exceeded, ...); holon queue requeue ID``."""
    ab = s.get("aborted_messages") or []
    if not ab:
        return str(s.get("aborted", 0))
    newest = ", ".join(f"{a['message_id']}: {a['reason']}" for a in ab[-3:])
    more = f" and {len(ab) - 3} more" if len(ab) > 3 else ""
    again = "`holon queue requeue ID` runs one again"
    return f"{s.get('aborted', len(ab))} (newest: {newest}{more}; {again})"


def workitem_list(agent_id: str | None, filter_: str, limit: int | None, as_json: bool) -> None:
    """``holon workitem list``: the current item first, then by candidate class."""
    output.begin("workitem list", as_json)
    from holon_cli.runtime.agents.lifecycle import open_agent
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
    max_tokens: int | None = None,
    max_cost: float | None = None,
) -> int:
    """``holon run``: one run to completion; returns the exit code (5 when a
    provider failure ended it, 4 when a budget stopped it, after printing
    what happened)."""
    output.begin("run", as_json)
    from holon_cli.errors import EXIT_PROVIDER, EXIT_REJECTED, UsageError
    from holon_cli.runtime.run import run_once
    from holon_cli.tools.catalog import default_catalog

    if model is None:
        from holon_cli.cli.refs import check_env_model

        check_env_model("HOLON_MODEL")  # unknown provider: exit 2 now, not after agent setup
    if text == "-":
        text = _read_stdin("stdin")
        if "\x00" in text:
            raise UsageError(
                "stdin holds binary data (NUL bytes), not text",
                hint="pipe UTF-8 text to `holon run -`; for a binary file, pass its path in TEXT",
                kind="invalid_utf8",
            )
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
        max_tokens=max_tokens,
        max_cost_usd=max_cost,
    )
    failed = data["final_status"] == "failed"
    budget = data.get("budget") if data.get("waiting_reason") == "budget_exhausted" else None
    if as_json:
        if budget:
            output.emit_json_failure_with_data(
                "budget_exhausted",
                data.get("budget_reason") or "a budget stopped the run",
                "raise the budget (see data.budget) or wait for it to reset; "
                + _inspect_hint(data["agent_id"]),
                data,
            )
        elif failed:
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
        if budget:
            output.echo(f"budget: {data.get('budget_reason')}", err=True)
        if data["final_status"] != "completed" and data.get("agent_kept"):
            output.echo(f"agent {data['agent_id']} kept at {data['agent_home']}", err=True)
            output.echo(_inspect_hint(data["agent_id"]), err=True)
    return EXIT_PROVIDER if failed else EXIT_REJECTED if budget else 0


def _inspect_hint(agent_id: str) -> str:
    return (
        f"inspect it: `holon status --agent {agent_id}`, "
        f"`holon transcript --agent {agent_id}`, `holon tail --agent {agent_id}`; "
        f"remove it: `holon agent rm {agent_id}` (or `holon agent prune`)"
    )
