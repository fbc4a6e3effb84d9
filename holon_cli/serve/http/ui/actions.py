"""Which console actions this serve offers: each is one existing control
route the page posts to, and its button is drawn only when serve has that
route (pause and start came with issue 36; a serve without them shows no
such button rather than one that fails)."""

from __future__ import annotations

from starlette.requests import Request

# the control routes each console action posts to: its button is drawn only
# when serve has the route (pause and start came with issue 36, MCP answers
# with issue 38)
ACTION_ROUTES = {
    "prompt": "/control/agents/{agent_id}/prompt",
    "pause": "/control/agents/{agent_id}/pause",
    "start": "/control/agents/{agent_id}/start",
    "abort": "/control/agents/{agent_id}/abort",
    "work_item_create": "/control/agents/{agent_id}/work-items",
    "pick": "/control/agents/{agent_id}/work-items/{work_item_id}/pick",
    "task_stop": "/control/agents/{agent_id}/tasks/{task_id}/stop",
    "timer_cancel": "/control/agents/{agent_id}/timers/{timer_id}/cancel",
    "mcp_answer": "/control/agents/{agent_id}/mcp/requests/{request_id}/answer",
}


def actions(request: Request) -> dict[str, bool]:
    """Which actions this serve's route table offers."""
    paths = {getattr(r, "path", None) for r in request.app.routes}
    return {name: path in paths for name, path in ACTION_ROUTES.items()}
