"""The parts of ``holon home check`` beyond ledgers and snapshots: the home
itself (a file where a folder belongs, permissions), ``config.yaml``, inbox
envelopes, leftovers of killed writers, and the space ``.holon/outputs/``
uses. Read-only: nothing here changes a file (but the sandbox probe's cache,
``run/sandbox-probe.json``, written when bwrap had to be probed).

Each function returns ``Problem``s (make ``home check`` exit 1) and notes
(reported, exit 0); ``runtime/inspect.home_check`` composes them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from holon_cli.errors import CorruptStateError
from holon_cli.store.layout import AgentLayout, HomeLayout
from holon_cli.store.ledger import Problem

if TYPE_CHECKING:
    from holon_cli.model.workitem import WorkItemRecord
    from holon_cli.store.ledger import Ledger

R = TypeVar("R", bound="Mapping[str, object]")


def home_root_problem(home: HomeLayout) -> Problem | None:
    """``HOLON_HOME`` names something that is not a folder."""
    root = home.root
    if root.exists() and not root.is_dir():
        return Problem(
            str(root),
            None,
            "HOLON_HOME is a file, not a folder: point HOLON_HOME at a folder "
            "(it is created when missing), or unset it to use ~/.holon",
        )
    return None


def config_problems(home: HomeLayout) -> list[Problem]:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        cfg = load_config(home)
    except ConfigError as exc:
        key = exc.details.get("key")
        msg = exc.message.removeprefix(f"{home.config}: ")
        if exc.hint:
            msg += f" ({exc.hint})"
        return [Problem(str(home.config), None, msg if key is None else msg)]
    import os

    from holon_cli.runtime.budgets.spend import config_errors
    from holon_cli.store.config_schema import ingress_problems

    problems = [
        Problem(str(home.config), None, f"{e.message} ({e.hint})" if e.hint else e.message)
        for e in config_errors(cfg)
    ]
    if "ingress" in cfg:
        # what `holon serve` needs from its environment (a secret in a bad
        # form); a variable unset here is a note (config_notes): a login
        # shell need not hold what only serve's environment holds
        problems += [
            Problem(str(home.config), None, f"{msg} (export it before `holon serve`)")
            for _key, msg in ingress_problems(cfg, os.environ, unset=False)
        ]
    return problems


def config_notes(home: HomeLayout) -> list[dict[str, object]]:
    """Webhook secret variables this shell does not set: serve refuses to
    start without them, but serve's environment (a unit's EnvironmentFile,
    the daemon's) is not this shell's, so it is a note, not a problem."""
    import os

    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config
    from holon_cli.store.config_schema import ingress_unset

    try:
        cfg = load_config(home)
    except ConfigError:
        return []  # config_problems reports it
    return [
        {
            "path": str(home.config),
            "kind": "secret_env_unset",
            "message": f"{key}: ${var} is not set in this environment; `holon serve` needs it "
            "in its own (it refuses to start without it): export it there, e.g. in the "
            "service's EnvironmentFile",
        }
        for key, var in ingress_unset(cfg, os.environ)
    ]


def sandbox_findings(home: HomeLayout) -> tuple[list[Problem], list[dict[str, object]]]:
    """The command sandbox on this machine (probing bwrap when the cache has
    no answer): ``auto`` that found no usable bubblewrap is a note (commands
    run unconfined), an explicit ``bwrap`` that cannot run is a problem
    (every command is refused). Also the older ``runtime.exec_env_passthrough``."""
    from holon_cli.errors import ConfigError
    from holon_cli.runtime.tasks import sandbox
    from holon_cli.store.config import load_config

    try:
        cfg = load_config(home)
    except ConfigError:
        return [], []  # config_problems names it
    problems: list[Problem] = []
    notes: list[dict[str, object]] = []
    agents = cfg.get("agents")
    agents = agents if isinstance(agents, dict) else {}
    scopes: list[tuple[str | None, str]] = [(None, "execution")]
    scopes += [
        (aid, f"agents.{aid}.execution")
        for aid, sect in sorted(agents.items())
        if isinstance(sect, dict) and sect.get("execution")
    ]
    for aid, key in scopes:
        pol = sandbox.policy(cfg, aid)
        if pol.backend == "none" and pol.setting == "auto":
            notes.append(
                {
                    "path": str(home.config),
                    "kind": "sandbox_unconfined",
                    "message": f"{key}.sandbox is auto and commands run unsandboxed: "
                    f"{pol.reason} (install bubblewrap to confine them; "
                    f"`{key.rsplit('.', 1)[-1]}: {{sandbox: none}}` says so explicitly)",
                }
            )
        elif not pol.usable:
            problems.append(
                Problem(
                    str(home.config),
                    None,
                    f"{key}.sandbox is bwrap but it cannot run here: {pol.reason}; every "
                    "command is refused until bubblewrap works here (or set "
                    f"`{key}.sandbox: none` to run commands unconfined)",
                )
            )
    runtime = cfg.get("runtime")
    runtime = runtime if isinstance(runtime, dict) else {}
    if runtime.get("exec_env_passthrough") is not None:
        notes.append(
            {
                "path": str(home.config),
                "kind": "deprecated_key",
                "message": "runtime.exec_env_passthrough is the older name of "
                "execution.env.pass (still read as more pass names): move the names there",
            }
        )
    return problems, notes


def permission_notes(home: HomeLayout) -> list[dict[str, object]]:
    """The home holds message content: say so when others can read it."""
    try:
        mode = stat.S_IMODE(home.root.stat().st_mode)
    except OSError:
        return []
    if mode & 0o077:
        return [
            {
                "path": str(home.root),
                "message": f"the home is accessible to other users (mode {mode:04o}); "
                f"it holds message content: `chmod 700 {home.root}`",
            }
        ]
    return []


def staging_notes(home: HomeLayout) -> list[dict[str, object]]:
    from holon_cli.runtime.agents.lifecycle import stale_staging

    return [
        {
            "path": str(p),
            "message": "leftover of an interrupted `agent create`; "
            "it is removed by the next `holon agent create` (or remove it yourself)",
        }
        for p in stale_staging(home)
    ]


def inbox_problems(layout: AgentLayout) -> tuple[list[Problem], int]:
    """Delivered, not yet ingested messages that ingestion would refuse."""
    from holon_cli.store.records import envelope_problem

    problems: list[Problem] = []
    count = 0
    new = layout.inbox_dir / "new"
    try:
        names = sorted(os.listdir(new))
    except (FileNotFoundError, NotADirectoryError):
        return problems, 0
    for name in names:
        p = new / name
        count += 1
        try:
            import json

            obj = json.loads(p.read_bytes())
        except (OSError, ValueError) as exc:
            problems.append(Problem(str(p), None, f"unreadable inbox message: {exc}"))
            continue
        except RecursionError:  # e.g. megabytes of `[`
            problems.append(Problem(str(p), None, "unreadable inbox message: nested too deeply"))
            continue
        reason = envelope_problem(obj, "inbox message")
        if reason:
            problems.append(Problem(str(p), None, reason))
    return problems, count


def outputs_usage(layout: AgentLayout) -> dict[str, int]:
    """Files and bytes under ``.holon/outputs/`` (full outputs of truncated commands)."""
    root = layout.runtime / "outputs"
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            files += 1
            size += st.st_size
    return {"files": files, "bytes": size}


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


class HomeOutputs(TypedDict):
    """``holon home check``'s ``outputs``: the full outputs of truncated
    commands (``outputs_path``), files and bytes in all and by agent (its
    folder, files, bytes)."""

    files: int
    bytes: int
    agents: dict[str, dict[str, object]]


def outputs_path(layout: AgentLayout) -> Path:
    return layout.runtime / "outputs"


def event_seq_findings(layout: AgentLayout) -> tuple[list[Problem], list[dict[str, object]]]:
    """``event_seq`` must increase along ``events.jsonl`` and stay below its
    high-water mark (``events.seq``). A file whose last number is below the
    mark was cut or replaced (the lost numbers are never reused: the next
    event continues above the mark); a jump inside the file is what such a
    cut left behind (a note: nothing to repair, the events are gone)."""
    from holon_cli.store.ledger import Ledger, read_mark

    path = layout.ledger_path("events")
    led = Ledger(path, layout.ledger_lock("events"), seq_key="event_seq")
    problems: list[Problem] = []
    notes: list[dict[str, object]] = []
    prev = closed_high(led)  # the open file continues its closed segments
    try:
        for line, _, rec in led.scan(0):
            seq = rec.get("event_seq")
            if not isinstance(seq, int) or seq <= prev:
                problems.append(
                    Problem(
                        str(path), line, f"event_seq {seq!r} does not increase (previous {prev})"
                    )
                )
                return problems, notes
            if seq > prev + 1:
                notes.append(
                    {
                        "path": f"{path}:{line}",
                        "message": f"event_seq jumps from {prev} to {seq}: events "
                        f"{prev + 1}-{seq - 1} were lost from the file (a cut or an older copy); "
                        "their numbers are not reused",
                    }
                )
            prev = seq
    except Exception:  # noqa: BLE001 - the line check reports the damage itself
        return problems, notes
    got = read_mark(led.mark_path)
    mark = got.get("high_water") if isinstance(got, dict) else None
    if mark is not None and mark > prev:
        problems.append(
            Problem(
                str(path),
                None,
                f"events.jsonl ends at event_seq {prev} but events up to {mark} were written "
                f"({led.mark_path.name}): the file was cut or replaced by an older copy and "
                f"events {prev + 1}-{mark} are lost; the next event is numbered {mark + 1} "
                "(numbers are never reused). Restore the file from a backup if you have one; "
                "`holon home check --repair` accepts the loss",
            )
        )
    return problems, notes


def segment_findings(led: Any) -> tuple[list[Problem], int]:
    """Every closed segment read through (a damaged line, a cut or corrupt
    ``.gz``), and how many records they hold."""
    import zlib

    from holon_cli.store.ledger import iter_segment

    problems: list[Problem] = []
    count = 0
    for seg in led.closed_segments():
        try:
            for _ in iter_segment(seg, led.max_version, led.validate):
                count += 1
        except CorruptStateError as exc:
            why = str(exc.details.get("reason") or exc.message)
            problems.append(Problem(str(seg), exc.details.get("line"), why))
        except (OSError, EOFError, zlib.error) as exc:
            problems.append(
                Problem(
                    str(seg),
                    None,
                    f"closed segment cannot be read ({exc}); move it aside (its records are "
                    "lost to readers) and re-run `holon home check`",
                )
            )
    return problems, count


def closed_high(led: Any) -> int:
    """The highest ``event_seq`` before the open file: the newest closed
    segment's last record, else what retention dropped (0: none)."""
    from holon_cli.store.ledger import iter_segment

    for seg in reversed(led.closed_segments()):
        last = 0
        try:
            for _, rec in iter_segment(seg, led.max_version):
                seq = rec.get("event_seq")
                last = seq if isinstance(seq, int) else last
        except Exception:  # noqa: BLE001 - a damaged segment: count from what was read
            pass
        if last:
            return last
    trimmed = led.trimmed() or {}
    through = trimmed.get("through_seq")
    return through if isinstance(through, int) else 0


def ledger_mark_findings(led: Any) -> list[Problem]:
    """A ledger shorter than its mark (``<name>.mark``: the size after the
    last append) was emptied, cut (mid-line included) or replaced by an older
    copy: what was in the lost bytes is gone from the file. A damaged mark is
    a problem too (``--repair`` rewrites it from the ledger)."""
    from holon_cli.store.ledger import read_mark

    got = read_mark(led.mark_path)
    if got is None:
        return []
    if isinstance(got, str):
        return [
            Problem(
                str(led.mark_path),
                None,
                f"the ledger's mark is damaged ({got}); "
                "`holon home check --repair` rewrites it from the ledger",
            )
        ]
    have = led.complete_size()
    if have >= got["size"]:
        return []
    what = "emptied" if have == 0 else "cut or replaced by an older copy"
    if not led.path.exists():
        what = "deleted"
    return [
        Problem(
            str(led.path),
            None,
            f"the ledger was {what}: it holds {have} bytes of complete records but "
            f"{got['size']} were written ({led.mark_path.name}); "
            "restore it from a backup if you have one, else `holon home check --repair` "
            "rebuilds what a snapshot still holds and accepts the rest of the loss",
        )
    ]


# snapshots of an agent's state/ folder that home check reads (agent.json,
# queue.json and template.json are read by the caller)
STATE_SNAPSHOTS = ("timers.json", "trigger.json", "work_items.json")


def _fold(led: Ledger[R], upto: int | None = None) -> list[R]:
    out: list[R] = []
    for _, end, rec in led.scan(0):
        if upto is not None and end > upto:
            break
        out.append(rec)
    return out


def _disagrees(path: Path, why: str) -> Problem:
    return Problem(
        str(path),
        None,
        f"disagrees with its ledger: {why}; `holon home check --repair` rebuilds it "
        "from the ledger",
    )


def snapshot_ledger_findings(layout: AgentLayout) -> list[Problem]:
    """A snapshot that is a fold of a ledger must say what the ledger says up
    to the offset it records (timers.json, work_items.json) or match the
    ledger's last record (trigger.json). Unreadable snapshots or ledgers are
    reported by their own checks; this one then stays quiet."""
    from holon_cli.store.fsio import read_snapshot
    from holon_cli.store.ledger import Ledger
    from holon_cli.store.records import ledger_validator

    def led(name: str) -> Ledger[Any]:
        return Ledger(
            layout.ledger_path(name), layout.ledger_lock(name), validate=ledger_validator(name)
        )

    out: list[Problem] = []
    state = layout.state_dir
    try:
        snap = read_snapshot(state / "timers.json")
        if snap is not None:
            timers = led("timers")
            if snap["offset"] > timers.size():
                out.append(
                    _disagrees(
                        state / "timers.json",
                        "it reflects more of timers.jsonl "
                        f"({snap['offset']} bytes) than the file holds ({timers.size()})",
                    )
                )
            else:
                folded = {r["timer"]["id"]: r["timer"] for r in _fold(timers, snap["offset"])}
                mine = {t["id"]: t for t in snap["timers"]}
                if folded != mine:
                    diff = sorted(set(folded) ^ set(mine)) or sorted(
                        k for k in mine if mine[k] != folded.get(k)
                    )
                    out.append(_disagrees(state / "timers.json", f"timer(s) {', '.join(diff[:3])}"))
    except Exception:  # noqa: BLE001 - reported by the file's own check
        pass
    out += work_item_index_findings(layout, led("work_items"))
    try:
        snap = read_snapshot(state / "trigger.json")
        last = led("triggers").last()
        if snap is not None and last is not None and isinstance(last.get("trigger"), dict):
            keys = ("external_trigger_id", "status", "token_sha256", "token_generation")
            if any(snap.get(k) != last["trigger"].get(k) for k in keys):
                out.append(
                    _disagrees(
                        state / "trigger.json",
                        "its capability differs from the last record of triggers.jsonl",
                    )
                )
    except Exception:  # noqa: BLE001
        pass
    return out


def work_item_index_findings(layout: AgentLayout, items: Any) -> list[Problem]:
    """The work item index (``work_items.json``, the head, and the archive it
    continues) says what ``work_items.jsonl`` says up to the offset it records:
    the same items in the same states, the archive intact up to the length the
    head names and holding as many completed items as the head counts. An
    unreadable head or ledger is reported by its own check; this one is then
    quiet."""
    from holon_cli.store import workitem_archive as wa
    from holon_cli.store import workitem_index as wix
    from holon_cli.store.fsio import read_record
    from holon_cli.store.records import WORK_ITEMS_SNAPSHOT

    state = layout.state_dir
    path, apath = state / "work_items.json", state / wa.ARCHIVE_NAME
    try:  # the snapshot's own check (as every read of it) names a damaged one
        snap = read_record(path, WORK_ITEMS_SNAPSHOT, max_version=wix.INDEX_VERSION)
    except CorruptStateError:
        return []
    if snap is None:
        return []
    arch = snap.get("archive") or {}
    generation = arch.get("generation") if snap.get("v") == wix.INDEX_VERSION else None
    archived: dict[str, WorkItemRecord] = {}
    if isinstance(generation, str):
        try:
            got = wa.read_archive(apath, generation, int(arch.get("bytes") or 0))
        except CorruptStateError as exc:
            return [Problem(str(apath), exc.details.get("line"), _after_path(exc.message, apath))]
        archived = {k: v for k, v in got.items.items() if k not in snap["items"]}
        done = sum(1 for v in archived.values() if v.get("state") == "completed")
        if done != int(arch.get("items") or 0):
            return [
                _disagrees(
                    path,
                    f"it counts {arch.get('items')} archived item(s), {apath.name} holds {done}",
                )
            ]
    try:
        if snap["offset"] > items.size():
            return [
                _disagrees(
                    path,
                    f"it reflects more of work_items.jsonl ({snap['offset']} bytes) than the "
                    f"file holds ({items.size()})",
                )
            ]
        folded = {r["id"]: r.get("state") for r in _fold(items, snap["offset"])}
    except Exception:  # noqa: BLE001 - a damaged ledger line: its own check names it
        return []
    mine = {k: v.get("state") for k, v in {**archived, **snap["items"]}.items()}
    if mine != folded:
        return [_disagrees(path, "its work items or their states differ from work_items.jsonl")]
    return []


def work_item_archive_notes(layout: AgentLayout) -> list[dict[str, object]]:
    """An archive no index names (a migration or repair killed before its
    index was written), or bytes after what the index covers (a checkpoint
    killed before its index was written): harmless, replaced or cut by the
    next checkpoint."""
    from holon_cli.store import workitem_archive as wa
    from holon_cli.store.fsio import read_snapshot

    apath = layout.state_dir / wa.ARCHIVE_NAME
    if not apath.exists():
        return []
    try:
        snap = read_snapshot(layout.state_dir / "work_items.json", max_version=2)
    except CorruptStateError:
        return []
    arch = (snap or {}).get("archive") or {}
    if not isinstance(arch, dict) or not isinstance(arch.get("generation"), str):
        return [
            {
                "path": str(apath),
                "message": "not named by the work item index (a migration or repair was "
                "interrupted); the next work item change replaces it",
            }
        ]
    extra = apath.stat().st_size - int(arch.get("bytes") or 0)
    if extra > 0:
        return [
            {
                "path": str(apath),
                "message": f"{extra} byte(s) after what the work item index covers (an "
                "interrupted checkpoint); ignored, and cut by the next checkpoint",
            }
        ]
    return []


def _after_path(message: str, path: Path) -> str:
    return message.split(": ", 1)[1] if message.startswith(str(path)) else message


def task_problems(layout: AgentLayout) -> list[Problem]:
    """Each command task's ``task.json`` (a damaged one made its task vanish
    from ``task list`` without a word)."""
    import json

    from holon_cli.store.records import TASK_LINE

    out: list[Problem] = []
    try:
        dirs = sorted(p for p in layout.tasks_dir.iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return out
    for d in dirs:
        path = d / "task.json"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue  # a launch in progress (or one that never got this far)
        except OSError as exc:
            out.append(Problem(str(path), None, f"cannot be read ({exc.strerror or exc})"))
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            out.append(Problem(str(path), None, f"not valid JSON ({exc.__class__.__name__})"))
            continue
        reason = TASK_LINE(rec) if isinstance(rec, dict) else "task record is not an object"
        if reason:
            out.append(Problem(str(path), None, reason))
    return out
