"""Incremental Responses requests (``runtime.openai_incremental: true``).

A later request (a later round of a turn, or a later turn: the next turn's
input starts with the previous turn's, runtime/memory/history.py) sends
``previous_response_id`` and only the input items that are new since the
previous response, instead of the whole replayable conversation. This module
owns the decision (:meth:`IncrementalState.plan`) and the memory it is made
from; the Responses transport lowers the request and sends what the plan says.

Invariants:
- a request is incremental only when, for the same scope (agent, prompt cache
  key, model ref, endpoint) and the same compression epoch (the frame's cache
  record: a compaction means a full request), everything in the body but
  ``input`` is identical to the previous successful request's (so changed
  instructions, tool catalog, limits or model mean a full request), and the
  previous request's full input followed by the previous response's output,
  lowered exactly as the next request echoes it, is a strict prefix of this
  request's full input (so any rewritten history means a full request).
  Anything else is a full request, with the reason kept.
- the memory is in-process only: a new process (a replayed turn, a restarted
  ``serve``) starts with a full request; it advances only after a success,
  and is forgotten when the provider no longer knows the previous response.
- bounded: at most ``MAX_SCOPES`` scopes are remembered (least recently used
  dropped first); safe to use from ``serve``'s turn threads.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from holon_cli.digest import sha256_hex
from holon_cli.providers.wire import prompt_last

if TYPE_CHECKING:
    from holon_cli.providers.responses_body import Body, InputItem

MAX_SCOPES = 256

RequestMode = Literal["full", "incremental"]
# why a request went out in full
FullReason = Literal[
    "disabled",
    "unscoped",
    "first_request",
    "compacted",
    "request_changed",
    "history_changed",
    "nothing_new",
    "previous_response_unknown",
]

Scope = tuple[str, str, str, str]


@dataclass(frozen=True)
class Plan:
    """What to send: ``body`` (the full one, or the delta with
    ``previous_response_id``), and why when it is full."""

    body: Mapping[str, object]
    mode: RequestMode
    reason: FullReason | None = None


@dataclass(frozen=True)
class _Link:
    turn_id: str
    response_id: str
    shape: str
    items: list[InputItem]  # the previous full input + its echoed output
    epoch: int  # the frame's compression epoch when it was sent


def shape_of(body: Mapping[str, object]) -> str:
    """A digest of everything in a body except its input and continuation."""
    rest = {k: v for k, v in body.items() if k not in ("input", "previous_response_id")}
    return sha256_hex(json.dumps(rest, sort_keys=True, ensure_ascii=False).encode())


def scope_of(agent_id: str | None, cache_key: str | None, model_ref: str, url: str) -> Scope | None:
    if not agent_id or not cache_key:
        return None
    return (agent_id, cache_key, model_ref, url)


class IncrementalState:
    """The previous successful request of each scope, in memory."""

    def __init__(self, max_scopes: int = MAX_SCOPES) -> None:
        self._links: OrderedDict[Scope, _Link] = OrderedDict()
        self._lock = threading.Lock()
        self.max_scopes = max_scopes

    def plan(self, scope: Scope | None, turn_id: str | None, body: Body, epoch: int = 0) -> Plan:
        """The request to send for the full ``body`` of this round."""
        if scope is None or not turn_id:
            return Plan(body, "full", "unscoped")
        with self._lock:
            link = self._links.get(scope)
        if link is None:
            return Plan(body, "full", "first_request")
        if link.epoch != epoch:
            return Plan(body, "full", "compacted")
        if link.shape != shape_of(body):
            return Plan(body, "full", "request_changed")
        items = body.get("input") or []
        n = len(link.items)
        if items[:n] != link.items:
            return Plan(body, "full", "history_changed")
        if len(items) == n:
            return Plan(body, "full", "nothing_new")
        delta = body.copy()  # the same keys in the same order, and then the link
        delta["input"] = items[n:]
        delta["previous_response_id"] = link.response_id
        return Plan(prompt_last(delta, ("tools", "instructions", "input")), "incremental")

    def advance(
        self,
        scope: Scope | None,
        turn_id: str | None,
        full_body: Body,
        echoed_output: list[InputItem],
        response_id: str | None,
        epoch: int = 0,
    ) -> None:
        """Remember a successful request (its full body) and what it answered."""
        if scope is None or not turn_id:
            return
        if not response_id:  # nothing to continue from
            self.forget(scope)
            return
        items = [*(full_body.get("input") or []), *echoed_output]
        link = _Link(turn_id, response_id, shape_of(full_body), items, epoch)
        with self._lock:
            self._links[scope] = link
            self._links.move_to_end(scope)
            while len(self._links) > self.max_scopes:
                self._links.popitem(last=False)

    def forget(self, scope: Scope | None) -> None:
        if scope is None:
            return
        with self._lock:
            self._links.pop(scope, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._links)


# one per process: transports are built per call, the chain of a turn is not
STATE = IncrementalState()


def unknown_previous_response(status: int | None, message: str, body: str | None) -> bool:
    """The provider's error for a ``previous_response_id`` it does not hold
    (expired, never stored, another project): HTTP 400/404 with the code
    ``previous_response_not_found`` or its message."""
    if status not in (400, 404):
        return False
    text = f"{message}\n{body or ''}".lower()
    return "previous_response_not_found" in text or (
        "previous response" in text and "not found" in text
    )
