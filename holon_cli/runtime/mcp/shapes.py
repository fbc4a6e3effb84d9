"""The MCP plane's shapes: operator requests folded from the
``mcp_requests`` ledger (whose line types are in :mod:`holon_cli.model.mcp`)
and their rows, the answers sent back, a tool's problems and a server's row.

What a server says (its tool list, a call's result, a request's params) is
its own JSON (:data:`~holon_cli.model.typed.JsonObject`; in a checked
record ``Mapping[str, object]``), narrowed where read.
Pure types (``requests.py`` checks each ``opened`` line it reads into
:class:`~holon_cli.model.mcp.RequestOpened`).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from holon_cli.model.mcp import OperatorAnswer, RequestOpened
from holon_cli.model.typed import Json

RequestState = Literal["pending", "answered", "resolved"]


class FormField(TypedDict, total=False):
    """One property of an elicitation's form (a flat JSON Schema)."""

    type: str
    title: str
    description: str
    enum: list[object]


class FormSchema(TypedDict, total=False):
    """An elicitation's ``requestedSchema``: the flat form MCP allows."""

    type: str
    properties: dict[str, FormField]
    required: list[str]


class SentAnswer(TypedDict, total=False):
    """One answer sent back for a server's request key: an elicitation result
    (``action``, ``content``) or a roots list (``roots``)."""

    action: str
    content: Json
    roots: list[Json]


class McpRequest(RequestOpened):
    """A request folded from its lines: the ``opened`` record, its state and
    what the ``answered`` and ``resolved`` lines added."""

    state: RequestState
    answer: OperatorAnswer | None
    answered_at: str | None
    outcome: str | None
    result_message_id: str | None
    next_id: str | None
    resolved_at: str | None
    error: str | None


class RequestRow(TypedDict):
    """``holon mcp requests --json``'s ``requests[]`` (and ``answer``'s row)."""

    id: str
    agent_id: str
    server: str
    tool: str
    state: RequestState
    message: str
    requested_schema: FormSchema | None
    url: str | None
    requests: list[str]
    opened_at: str
    answered_at: str | None
    resolved_at: str | None
    outcome: str | None
    result_message_id: str | None
    next_id: str | None
    previous_id: str | None


class ToolProblem(TypedDict):
    """A server whose tools a turn could not offer, and why."""

    server: str
    error: str


class LiveServer(TypedDict):
    agent_id: str
    name: str
    live: bool
