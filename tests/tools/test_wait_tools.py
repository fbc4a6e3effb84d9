"""RecordExternalWait and CancelExternalWait through the tool framework."""

from __future__ import annotations

import json
from collections.abc import Callable

from holon_cli.runtime import workitems as wi
from holon_cli.runtime.waiting import intents
from holon_cli.tools.base import ToolContext, ToolResult, emit_schema
from holon_cli.tools.catalog import registry

Call = Callable[..., ToolResult]


def test_schemas_use_the_contract_argument_names() -> None:
    tools = registry()
    rec = emit_schema(tools["RecordExternalWait"].args)
    assert set(rec["properties"]) == {"description", "source", "external_ref", "work_item_id"}
    assert rec["required"] == ["description", "source"]
    can = emit_schema(tools["CancelExternalWait"].args)
    assert can["required"] == ["waiting_intent_id"]


def test_record_defaults_to_the_current_item_and_returns_the_secret_url(
    ctx: ToolContext, call: Call
) -> None:
    wid = wi.create_work_item(ctx.store, "deploy")["work_item"]["id"]
    wi.pick_work_item(ctx.store, wid)
    res = call(
        "RecordExternalWait", description="deploy finishes", source="argo", external_ref="app/v2"
    )
    assert res.ok, res.content
    out = json.loads(res.content)
    assert out["work_item_id"] == wid and out["waiting_intent_id"].startswith("wait_")
    assert "/callbacks/wake/cb_" in out["trigger_url"]
    assert "capability secret" in out["trigger_url_note"]
    assert res.effects.external_wait is not None
    assert res.effects.external_wait["waiting_intent_id"] == out["waiting_intent_id"]
    stored = intents.load(ctx.store)[out["waiting_intent_id"]]
    assert stored["status"] == "active" and stored["external_ref"] == "app/v2"
    assert wi.get_work_item(ctx.store, wid)["work_item"]["has_active_waits"] is True


def test_record_without_an_item_is_an_error_result(call: Call) -> None:
    res = call("RecordExternalWait", description="x", source="y")
    assert not res.ok and res.error and res.error["kind"] == "invalid_arguments"
    assert "work_item_id" in (res.error["recovery_hint"] or "")
    res = call("RecordExternalWait", description="x", source="y", work_item_id="wi_nope")
    assert not res.ok and res.error and res.error["kind"] == "work_item_not_found"


def test_cancel(ctx: ToolContext, call: Call) -> None:
    wid = wi.create_work_item(ctx.store, "deploy")["work_item"]["id"]
    w = intents.record_wait(ctx.store, description="d", source="s", work_item_id=wid)
    res = call("CancelExternalWait", waiting_intent_id=w["id"])
    assert res.ok and json.loads(res.content)["changed"] is True
    again = call("CancelExternalWait", waiting_intent_id=w["id"])
    assert again.ok and json.loads(again.content)["changed"] is False
    missing = call("CancelExternalWait", waiting_intent_id="wait_nope")
    assert not missing.ok and missing.error and missing.error["kind"] == "not_found"
    assert wi.get_work_item(ctx.store, wid)["work_item"]["has_active_waits"] is False
