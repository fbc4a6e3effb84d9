"""The model chain is resolved and validated before a turn dequeues (issue 8.1):
a chain that cannot be served leaves the queue untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from holon_cli.errors import EXIT_PROVIDER, ProviderError
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.run import run_once
from holon_cli.runtime.turn import run_turn
from holon_cli.tools.catalog import default_catalog


def _untouched(mid: str) -> None:
    store = open_agent(None)
    st = q.load(store)
    assert q.pending_count(store, st) == 1 and mid not in st.recent_final
    assert st.in_flight() == [] and st.aborted == 0
    kinds = [e["kind"] for e in store.events.records()]
    assert "message_processing_started" not in kinds and "turn_terminal" not in kinds
    assert store.read_record()["state"]["status"] == "awake_idle"


def _bad_yaml(tmp_path: Path) -> str:
    p = tmp_path / "bad.yaml"
    p.write_text("steps: [text: 'unterminated\n")
    return f"scripted:{p}"


def _not_a_script(tmp_path: Path) -> str:
    p = tmp_path / "list.yaml"
    p.write_text(yaml.safe_dump({"steps": [{"nope": 1}]}))
    return f"scripted:{p}"


@pytest.mark.parametrize(
    ("make_ref", "kind"),
    [
        (lambda tmp: "foo/bar", "unsupported_transport"),
        (lambda tmp: "openai/gpt-x", "missing_credentials"),
        (lambda tmp: f"scripted:{tmp / 'missing.yaml'}", "script_error"),
        (_bad_yaml, "script_error"),
        (_not_a_script, "script_error"),
    ],
)
def test_unservable_model_leaves_the_message_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_ref, kind: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    mid = admit("important")["id"]
    with pytest.raises(ProviderError) as ei:
        run_turn(None, cli_model=make_ref(tmp_path), catalog=default_catalog())
    assert ei.value.kind == kind and ei.value.exit_code == EXIT_PROVIDER
    assert "nothing was dequeued" in ei.value.message
    _untouched(mid)
    # the message is still there for a good model
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"steps": [{"text": "ok"}]}))
    res = run_turn(None, cli_model=f"scripted:{good}", catalog=default_catalog())
    assert res.ran and res.message_id == mid and res.status == "completed"


def test_a_servable_fallback_is_enough(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"steps": [{"text": "from the fallback"}]}))
    admit("hi")
    res = run_turn(
        None, cli_model="foo/bar", cli_fallbacks=[f"scripted:{good}"], catalog=default_catalog()
    )
    assert res.status == "completed" and res.final_text == "from the fallback"
    outcomes = [a["outcome"] for a in res.provider_attempt_timeline["attempts"]]
    assert outcomes == ["fail_fast_aborted", "succeeded"]


def test_run_with_an_unservable_model_admits_nothing(tmp_path: Path) -> None:
    from holon_cli.store.layout import HomeLayout

    open_agent(None)
    agents_before = sorted(p.name for p in HomeLayout.current().agents_dir.iterdir())
    with pytest.raises(ProviderError) as ei:
        run_once("hi", model=f"scripted:{tmp_path / 'missing.yaml'}", catalog=default_catalog())
    assert "nothing was run" in ei.value.message
    # the temporary agent made for the run is gone again
    assert sorted(p.name for p in HomeLayout.current().agents_dir.iterdir()) == agents_before
