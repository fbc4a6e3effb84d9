"""The MCP plane's stored records, pure types: the home's record of one
server (``$HOLON_HOME/mcp/servers/<name>.<key>.json``,
:mod:`holon_cli.runtime.mcp.records`) and the lines of an agent's
``mcp_requests`` ledger (:mod:`holon_cli.runtime.mcp.requests`), which
``home check`` checks line by line (``store/records.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

from holon_cli.model.typed import Json


class McpServerRecord(TypedDict):
    """One server config's snapshot: the tool list as the server gave it
    (``tools``: ``None`` until listed) and the state of its last use."""

    v: int
    name: str
    key: str
    transport: str
    tools: list[dict[str, Any]] | None
    updated_at: NotRequired[str]
    state: NotRequired[Literal["ok", "failed"]]
    protocol: NotRequired[str]
    listed_at: NotRequired[str]
    last_error: NotRequired[str | None]
    server_info: NotRequired[dict[str, Any] | None]


class OperatorAnswer(TypedDict):
    """What the operator answered (``holon mcp answer``): ``accept`` with the
    form's content (``None`` for a URL request), or ``decline``."""

    action: str
    content: NotRequired[Json]


class RequestOpened(TypedDict):
    """The ``opened`` line of ``mcp_requests.jsonl``: the call, the server's
    requests (key -> ``{method, params}``)."""

    v: int
    op: Literal["opened"]
    id: str
    at: str
    agent_id: str
    server: str
    server_key: str
    tool: str
    arguments: Mapping[str, object]
    legacy: bool
    input_requests: Mapping[str, Mapping[str, object]]
    request_state: str | None
    turn_id: str | None
    call_id: str | None
    message_id: str | None
    previous_id: str | None


class RequestAnswered(TypedDict):
    """The ``answered`` line: the operator's answer, kept before the call is
    sent again (answering again after a failed send sends it)."""

    v: int
    op: Literal["answered"]
    id: str
    at: str
    answer: OperatorAnswer


class RequestResolved(TypedDict):
    """The ``resolved`` line: the request's one outcome (``result``,
    ``error``, or ``input_required`` with the ``next_id`` the server asked)."""

    v: int
    op: Literal["resolved"]
    id: str
    at: str
    outcome: NotRequired[str]
    message_id: NotRequired[str | None]
    next_id: NotRequired[str]
    error: NotRequired[str | None]


McpRequestLine = RequestOpened | RequestAnswered | RequestResolved
