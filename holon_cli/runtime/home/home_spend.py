"""The home's spend record (``$HOLON_HOME/budgets/spend.jsonl``) in ``home
check`` and ``--repair``.

The record is appended beside each agent's own spend ledger on every
provider round (``runtime/budgets/spend.py``); ``budgets.home`` and ``holon
usage`` read it. So every round an agent's ledger holds as its *own*
(``agent_id`` is the agent) must be in it, and it is derivable: a deleted,
cut or damaged record is rebuilt from the agents' ledgers plus the lines of
the damaged file that still read. Only the rounds of agents no longer in the
home (a finished ``holon run``'s temporary agent) cannot be recovered once
the home's record lost them, and repair says so.

The reservation, waiting-line and ``holon run`` bound files beside it
(``budgets/reservations/``, ``budgets/waiters/``, ``budgets/runs/``) are
not checked: each lives
as long as the process that holds it, and the next reader drops one whose
holder is gone or whose bytes do not read (``store/held_records.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli.store.ledger_lines import Problem

if TYPE_CHECKING:
    from holon_cli.model.budget import SpendRecord
    from holon_cli.runtime.home.plane_checks import AgentFacts
    from holon_cli.runtime.home.repair import RepairAction
    from holon_cli.store.layout import HomeLayout
    from holon_cli.store.ledger import Ledger

Key = tuple[Any, ...]


def key(rec: SpendRecord) -> Key:
    """One provider round, whichever ledger holds its copy."""
    return (
        rec.get("agent_id"),
        rec.get("turn_id"),
        rec.get("ts"),
        rec.get("input_tokens"),
        rec.get("output_tokens"),
    )


def _present(home: HomeLayout) -> bool:
    mark = home.spend_ledger.with_suffix(".mark")
    return home.spend_ledger.exists() or mark.exists()


def own_rounds(facts: dict[str, AgentFacts]) -> list[SpendRecord]:
    """Every round the agents' spend ledgers hold as their own (damaged lines
    skipped: the agent's own ledger check names them)."""
    from holon_cli.runtime.budgets.spend import LEDGER

    out: list[SpendRecord] = []
    for name, fact in facts.items():
        led = fact.store.ledger(LEDGER)
        if not led.path.exists():
            continue
        recs, _damaged = led.records_skipping_damaged()
        out += [r for r in recs if r.get("agent_id") == name]
    return out


def missing(home: HomeLayout, facts: dict[str, AgentFacts]) -> list[SpendRecord]:
    """The agents' own rounds the home's record lacks (nothing when the home
    has no record and no agent has spent: a home before any provider call)."""
    from holon_cli.runtime.budgets.spend import home_ledger

    rounds = own_rounds(facts)
    if not rounds:
        return []
    led = home_ledger(home)
    have: set[Key] = set()
    if led.path.exists():
        recs, _damaged = led.records_skipping_damaged()
        have = {key(r) for r in recs}
    return [r for r in rounds if key(r) not in have]


def never_written(home: HomeLayout) -> bool:
    """A home from before the record (no ``budgets/`` folder at all: the first
    append makes it, with the file and its mark): its agents' rounds were
    never in it, so nothing was lost; ``home check`` notes it and
    ``--repair`` fills it in. A file deleted with its mark, the folder left,
    is a finding."""
    return not _present(home) and not home.budgets_dir.exists()


def never_written_note(home: HomeLayout, facts: dict[str, AgentFacts]) -> list[dict[str, object]]:
    """``home check``'s note for a home from before the record, when its
    agents have rounds it lacks."""
    try:
        lacks = len(missing(home, facts))
    except Exception:  # noqa: BLE001 - the agents' own checks name their damage
        lacks = 0
    if not lacks:
        return []
    return [
        {
            "path": str(home.spend_ledger),
            "message": f"the home's spend record was never written (a home from before it): "
            f"{lacks} provider round(s) of the agents are not in it, so `budgets.home` counts "
            "from now on; `holon home check --repair` adds them",
        }
    ]


def findings(home: HomeLayout, facts: dict[str, AgentFacts]) -> list[Problem]:
    """What the home's record lacks next to the agents' ledgers (its damaged
    lines and cuts are the ledger check's, run on it like on any ledger)."""
    lost = missing(home, facts)
    if not lost:
        return []
    path = home.spend_ledger
    what = "is missing" if not path.exists() else "lacks records"
    agents = sorted({str(r.get("agent_id")) for r in lost})
    return [
        Problem(
            str(path),
            None,
            f"the home's spend record {what}: {len(lost)} provider round(s) of "
            f"{', '.join(agents)} that the agents' spend ledgers hold are not in it, so "
            "`budgets.home` and `holon usage` count less than was spent; `holon home "
            "check --repair` rebuilds it from the agents' ledgers",
        )
    ]


def repair(home: HomeLayout, facts: dict[str, AgentFacts]) -> list[RepairAction]:
    """Rebuild the home's record when it is damaged, cut or lacks rounds: the
    lines that still read plus the agents' own rounds, in time order, written
    whole (temp file, fsync, rename) under the ledger's lock; a damaged file
    is set aside first, never deleted."""
    from holon_cli.runtime.budgets.spend import home_ledger
    from holon_cli.runtime.home.repair import _act, _set_aside, _was_cut
    from holon_cli.store.ledger_mark import write_mark
    from holon_cli.store.locks import locked

    led = home_ledger(home)
    if not _present(home) and not own_rounds(facts):
        return []
    damaged = bool(led.path.exists() and led.check())
    cut = led.path.exists() and _was_cut(led)
    lost = missing(home, facts)
    deleted = not led.path.exists() and led.mark_path.exists()
    if not (damaged or cut or lost or deleted):
        return []
    home_ledger(home, for_writing=True)  # the folder, 0700
    with locked(led.lock_path, what=f"ledger {led.path.name}"):
        kept: list[SpendRecord] = []
        if led.path.exists():
            kept, _ = led.records_skipping_damaged()
        seen = {key(r) for r in kept}
        added = [r for r in own_rounds(facts) if key(r) not in seen]
        recs = sorted(kept + added, key=lambda r: float(r.get("ts") or 0))
        aside = _set_aside(led.path) if damaged else None
        _write_whole(led, recs)
        write_mark(led.mark_path, led.complete_size(), None)
    detail = f"{len(added)} round(s) from the agents' spend ledgers, {len(kept)} kept"
    if aside is not None:
        detail += f"; the damaged file set aside as {aside.name}"
    if damaged or cut or deleted:
        detail += (
            "; rounds of agents no longer in the home (a finished `holon run`) that "
            "only this record held cannot be recovered"
        )
    return [_act(led.path, "rebuilt", detail)]


def _write_whole(led: Ledger[SpendRecord], recs: list[SpendRecord]) -> None:
    from holon_cli.store.fsio import atomic_write_bytes, dumps

    atomic_write_bytes(led.path, b"".join((dumps(r) + "\n").encode() for r in recs))
