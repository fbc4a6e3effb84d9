"""The replay plane (issue 40): every settled turn's record, ``holon replay``,
its ``--export`` to a ``scripted:`` model, and ``holon agent fork``.

Modules:

- :mod:`.docs`: a request, a response and a tool result as plain JSON
  documents (built from the values, so a new field of a frame or a response
  is recorded without a change here), content-addressed packing (the prefix
  rounds repeat is stored once), the volatile fields' normalisation and the
  text form a unified diff is taken of;
- :mod:`.capture`: :class:`~.capture.TurnCapture`, the observer every
  :class:`~holon_cli.runtime.turn.loop.TurnRun` reports to; it appends what
  it sees to the turn journal (durable with the round's fsync batch, so a
  crashed turn resumed by another process keeps its record) and, at settle,
  appends the compressed record to ``ledger/turn_records.jsonl``;
- :mod:`.records`: that ledger (segmented, the retention of ``events``):
  append, look a turn up, decode, and the errors of a missing, dropped or
  damaged record;
- :mod:`.scratch`: the agent as it was before the turn, in a temporary home
  (today's AGENTS.md, skills and config; the ledgers cut where they were),
  kept in step with the recorded tool results;
- :mod:`.replay`: the turn run again by today's code over the scratch home
  (recorded answers and tool results served back), request by request;
- :mod:`.export`: the model steps as a ``scripted:`` script;
- :mod:`.fork`: a new agent from another one's state, now or after a turn.

Nothing here imports the modules below it at package import (the turn loop
imports :mod:`.capture` only).
"""
