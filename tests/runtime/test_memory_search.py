"""Memory search: sources, CJK bigrams, ranking, exact retrieval through
opaque refs, freshness (editor edits, new briefs, a deleted index, a
rebuild cut off in the middle), workspace scope, concurrent search during
an update, and the model-facing tools' bad arguments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.providers.base import ToolCall
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.briefs import write_brief
from holon_cli.runtime.memory import search as M
from holon_cli.runtime.memory import sync as MS
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.store import memory_index as MI
from holon_cli.store.agent_store import AgentStore
from holon_cli.tools.base import ToolContext, execute
from holon_cli.tools.catalog import registry
from tests.inprocess_cli import bind_runner, run  # noqa: F401


@pytest.fixture
def store() -> AgentStore:
    return open_agent(None)


def write_memory(store: AgentStore, name: str, text: str) -> None:
    (store.layout.home / "memory" / f"{name}.md").write_text(text)


def search(store: AgentStore, q: str, **kw: Any) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = M.memory_search(store, q, **kw)["results"]
    return results


def titles(results: list[dict[str, Any]]) -> list[str]:
    return [r["title"] for r in results]


def test_every_kind_of_source_is_found(store: AgentStore) -> None:
    write_memory(store, "operator", "# Operator\nPrefers squash merges on Fridays.\n")
    write_brief(store, kind="result", text="Rotated the staging TLS certificate.")
    w = wi.create_work_item(store, "Upgrade the kafka brokers", source="operator")
    wi.complete_work_item(
        store,
        w["work_item"]["id"] if "work_item" in w else w["id"],
        report="Brokers on 3.7; consumer lag back under 5 s.",
        source="operator",
        cancel_waits=cancel_for_work_item,
    )
    store.ledger("context_episodes").append(
        {
            "v": 1,
            "episode_id": "ep_1",
            "agent_id": store.agent_id,
            "work_item_id": None,
            "workspace_id": "agent_home",
            "turn_range": [1, 3],
            "message_range": [],
            "message_count": 0,
            "touched_files": ["deploy/helm/values.yaml"],
            "commands": ["helm upgrade"],
            "verification": [],
            "decisions": [],
            "carry_forward": [],
            "waiting": None,
            "summary": "Tuned the helm chart for the ingress controller.",
            "boundary": "hard_cap",
            "started_at": "2026-01-01T00:00:00.000Z",
            "finalized_at": "2026-01-01T00:00:00.000Z",
        }
    )
    kinds = {r["kind"]: r for r in search(store, "squash") + search(store, "certificate")}
    assert set(kinds) == {"memory_file", "brief"}
    assert kinds["memory_file"]["scope_kind"] == "agent"
    assert kinds["memory_file"]["source_path"] == "memory/operator.md"
    (wi_hit,) = search(store, "consumer lag")  # the completion report is indexed
    assert wi_hit["kind"] == "work_item" and wi_hit["title"] == "Upgrade the kafka brokers"
    (ep,) = search(store, "ingress controller")
    assert ep["kind"] == "episode" and ep["metadata"]["turn_range"] == [1, 3]
    assert search(store, "values.yaml")[0]["kind"] == "episode"
    for r in search(store, "the"):
        assert set(r) == {
            "kind",
            "source_ref",
            "scope_kind",
            "workspace_id",
            "agent_id",
            "source_path",
            "title",
            "snippet",
            "score",
            "updated_at",
            "metadata",
        }


def test_cjk_bigrams_find_and_exact_text_comes_back(store: AgentStore) -> None:
    write_memory(store, "self", "# Self\n部署流程使用蓝绿发布。Mixed 中文 and English 混合 text.\n")
    (hit,) = search(store, "蓝绿")
    assert "蓝绿 绿发" not in hit["snippet"] and "部署流程使用蓝绿发布" in hit["snippet"]
    assert search(store, "蓝绿发布") and search(store, "使用蓝绿")
    assert search(store, "混合") and search(store, "English 中文")
    assert search(store, "绿蓝") == []  # bigrams keep order
    got = M.memory_get(store, hit["source_ref"])
    assert got["content"] == "# Self\n部署流程使用蓝绿发布。Mixed 中文 and English 混合 text.\n"
    assert got["truncated"] is False


def test_the_exact_phrase_ranks_first(store: AgentStore) -> None:
    for i in range(3):
        write_brief(
            store, kind="result", text=f"window {i}: the deploy went out; later a window closed"
        )
    write_brief(store, kind="result", text="Agreed deploy window: 14:00 to 16:00 UTC.")
    first = search(store, "deploy window")[0]
    assert "14:00" in first["snippet"]
    assert len(search(store, "deploy window")) == 4


def test_get_bounds_truncation_and_unforgeable_refs(store: AgentStore) -> None:
    write_memory(store, "operator", "alpha " + "y" * 30_000)
    ref = search(store, "alpha")[0]["source_ref"]
    got = M.memory_get(store, ref)
    assert len(got["content"]) == 12_000 and got["truncated"] is True
    assert len(M.memory_get(store, ref, max_chars=50_000)["content"]) == 30_006
    for bad in (0, 50_001, -1):
        with pytest.raises(UsageError) as ei:
            M.memory_get(store, ref, max_chars=bad)
        assert "--max-chars" in ei.value.message  # the command line's words
        assert "`max_chars`" in ei.value.said_on("tool")[0]  # the model's
    for forged in (
        "memory/operator.md",
        str(store.layout.home / "memory/operator.md"),
        "memory:operator",
        "mem_" + "0" * 24,
        "",
    ):
        with pytest.raises(NotFoundError):
            M.memory_get(store, forged)


def test_editor_edits_new_briefs_and_plan_edits_are_seen(store: AgentStore) -> None:
    write_memory(store, "operator", "# Operator\nOn call: Alice.\n")
    assert search(store, "Alice")
    write_memory(store, "operator", "# Operator\nOn call: Bob.\n")
    assert search(store, "Alice") == [] and search(store, "Bob")
    write_brief(store, kind="ack", text="Queued the flamingo migration.")
    assert search(store, "flamingo")[0]["kind"] == "brief"
    w = wi.create_work_item(store, "Write the runbook", source="operator")
    wid = w["work_item"]["id"] if "work_item" in w else w["id"]
    assert search(store, "zeppelin") == []
    plan = store.layout.home / "work-items" / wid / "plan.md"
    plan.write_text(plan.read_text() + "\nStep 3: check the zeppelin gauge.\n")
    (hit,) = search(store, "zeppelin")
    assert hit["kind"] == "work_item" and hit["source_path"] == f"work-items/{wid}/plan.md"


def test_a_same_size_edit_with_the_timestamp_put_back_is_seen(store: AgentStore) -> None:
    """Issue 36 §7: the memory files are hashed before a search (bounded),
    not trusted by size and mtime: an edit of the same size with its mtime
    restored (or within one timestamp tick) is found."""
    import os

    write_memory(store, "operator", "# Operator\nDeploy with the walrus plan.\n")
    assert search(store, "walrus")
    path = store.layout.home / "memory" / "operator.md"
    st = path.stat()
    path.write_text("# Operator\nDeploy with the dugong plan.\n")  # same size
    assert path.stat().st_size == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the timestamp put back
    assert search(store, "dugong") and not search(store, "walrus")


def test_deleted_damaged_or_dirty_index_is_rebuilt(store: AgentStore) -> None:
    write_memory(store, "self", "# Self\nLikes marmalade.\n")
    ref = search(store, "marmalade")[0]["source_ref"]
    import shutil

    shutil.rmtree(M.indexes_dir(store))
    assert search(store, "marmalade")[0]["source_ref"] == ref  # refs survive a rebuild
    MI.remove_files(M.index_path(store))
    M.index_path(store).write_bytes(b"not a database at all" * 100)
    assert search(store, "marmalade")
    M.mark_dirty(store)
    assert search(store, "marmalade") and not M.dirty_marker(store).exists()


def test_a_rebuild_cut_off_leaves_a_correct_index(
    store: AgentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_memory(store, "self", "# Self\nKnows the pelican protocol.\n")
    for i in range(20):
        write_brief(store, kind="result", text=f"report {i} about quokkas")
    assert len(search(store, "quokkas", limit=50)) == 20
    calls = {"n": 0}
    real = MS.Sync.put

    def dying_put(self: MS.Sync, doc: Any, known: Any = None) -> None:
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt  # as a Ctrl-C mid-rebuild
        real(self, doc, known)

    monkeypatch.setattr(MS.Sync, "put", dying_put)
    with pytest.raises(KeyboardInterrupt):
        M.sync(store, rebuild=True)
    assert M.dirty_marker(store).exists()
    monkeypatch.setattr(MS.Sync, "put", real)
    assert len(search(store, "quokkas", limit=50)) == 20  # rolled back, then redone
    assert search(store, "pelican")
    assert not M.dirty_marker(store).exists()


@pytest.mark.slow
def test_sigkill_during_a_rebuild(store: AgentStore, holon_home: Path) -> None:
    for i in range(400):
        write_brief(store, kind="result", text=f"entry {i} mentions wombats")
    code = (
        "import time\n"
        "from holon_cli.runtime.agents.lifecycle import open_agent\n"
        "from holon_cli.runtime.memory import search as M\n"
        "from holon_cli.runtime.memory import sync as MS\n"
        "real = MS.Sync.put\n"
        "def slow(self, doc, known=None):\n"
        "    time.sleep(0.002); real(self, doc, known)\n"
        "MS.Sync.put = slow\n"
        "print('go', flush=True)\n"
        "M.sync(open_agent(None), rebuild=True)\n"
    )
    env = dict(os.environ, HOLON_HOME=str(holon_home))
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "go"
    time.sleep(0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert M.dirty_marker(store).exists()
    assert len(search(store, "wombats", limit=50)) == 50
    assert M.sync(store)["documents"] == 402  # 400 briefs and the two memory files


def test_workspace_scope(store: AgentStore) -> None:
    write_memory(store, "operator", "# Operator\nThe llama budget is fixed.\n")
    store.ledger("briefs").append(
        {
            "v": 2,
            "id": "brf_x",
            "agent_id": "main",
            "at": "2026-01-01T00:00:00Z",
            "kind": "result",
            "visibility": "turn_result",
            "text": "llama notes from repo X",
            "workspace_id": "ws_other",
        }
    )
    write_brief(store, kind="result", text="llama notes from the agent home")
    here = search(store, "llama")
    assert {r["workspace_id"] for r in here} == {None, "agent_home"}
    everywhere = search(store, "llama", include_all_workspaces=True)
    assert {r["workspace_id"] for r in everywhere} == {None, "agent_home", "ws_other"}


def test_search_during_updates_never_sees_a_locked_database(store: AgentStore) -> None:
    write_memory(store, "self", "# Self\nnarwhal\n")
    search(store, "narwhal")
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            write_brief(store, kind="result", text=f"narwhal sighting {i}")
            try:
                M.sync(store, rebuild=i % 7 == 0)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            i += 1

    def reader() -> None:
        for _ in range(40):
            try:
                assert search(store, "narwhal", limit=5)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

    w = threading.Thread(target=writer)
    readers = [threading.Thread(target=reader) for _ in range(4)]
    w.start()
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    stop.set()
    w.join()
    assert errors == []


def test_bad_queries_and_missing_fts5(store: AgentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError):
        M.memory_search(store, "   ")
    for bad in (0, 51):
        with pytest.raises(UsageError) as ei:
            M.memory_search(store, "x", limit=bad)
        assert "limit" in ei.value.message
    write_memory(store, "self", 'quote " and ( parens ) AND OR NOT * ^ col:on')
    assert search(store, 'quote " AND ( NOT')  # FTS5 syntax from a caller is plain text
    assert search(store, "col:on")
    monkeypatch.setattr(MI, "fts5_available", lambda: False)
    with pytest.raises(RejectedError) as ei2:
        M.memory_search(store, "x")
    assert "FTS5" in ei2.value.message


def tool_call(store: AgentStore, name: str, **arguments: Any) -> Any:
    ctx = ToolContext(
        store=store,
        agent_id=store.agent_id,
        execution_root=store.layout.home,
        cwd=store.layout.home,
        workspace_anchor=store.layout.home,
        turn_id="turn_t",
    )
    return execute(registry()[name], ctx, ToolCall(id="c1", name=name, arguments=arguments))


def test_the_tools(store: AgentStore) -> None:
    write_memory(store, "operator", "# Operator\nUse the blue-green rollout.\n")
    r = tool_call(store, "MemorySearch", query="rollout")
    assert r.ok, r.content
    ref = r.data["results"][0]["source_ref"]
    g = tool_call(store, "MemoryGet", source_ref=ref, max_chars=10)
    assert g.ok and g.data["content"] == "# Operator" and g.data["truncated"] is True
    bad = tool_call(store, "MemoryGet", source_ref=ref, max_chars=50_001)
    assert bad.error and bad.error["kind"] == "invalid_arguments"
    assert bad.error["details"]["field"] == "max_chars"
    nf = tool_call(store, "MemoryGet", source_ref="memory/operator.md")
    assert nf.error and nf.error["kind"] == "not_found"
    lim = tool_call(store, "MemorySearch", query="x", limit=0)
    assert lim.error and lim.error["details"]["field"] == "limit"
    unknown = tool_call(store, "MemorySearch", query="x", path="/etc")
    assert unknown.error and unknown.error["kind"] == "invalid_arguments"


def test_cli(store: AgentStore) -> None:
    write_memory(store, "operator", "# Operator\n部署流程使用蓝绿发布\n")
    r = run("memory", "search", "蓝绿", "--json")
    assert r.returncode == 0, r.stderr
    ref = json.loads(r.stdout)["data"]["results"][0]["source_ref"]
    g = run("memory", "get", ref)
    assert g.returncode == 0 and g.stdout == "# Operator\n部署流程使用蓝绿发布\n\n"
    assert run("memory", "get", ref, "--max-chars", "0").returncode == 2
    assert run("memory", "get", "mem_nope").returncode == 3
    assert run("memory", "search", "x", "--limit", "0").returncode == 2
    empty = run("memory", "search", "  ")
    assert empty.returncode == 2 and "empty" in empty.stderr
    assert run("memory", "search", "x", "--agent", "ghost").returncode == 3
    rb = run("memory", "rebuild", "--json")
    assert rb.returncode == 0 and json.loads(rb.stdout)["data"]["documents"] >= 2
    none = run("memory", "search", "xylophonequartz")
    assert none.returncode == 0 and "no memory matches" in none.stderr


def test_workspace_profiles_and_workspace_scoped_records(store: AgentStore, tmp_path: Path) -> None:
    """Each attached workspace has a profile (its anchor and AGENTS.md head);
    records written while a workspace is active are found there, and from
    AgentHome only with include_all_workspaces."""
    from holon_cli.runtime.workspace.plane import detach_workspace, use_workspace

    repo = tmp_path / "billing-service"
    repo.mkdir()
    (repo / "AGENTS.md").write_text("# Billing\nInvoices are generated by the ledgerd daemon.\n")
    bound = use_workspace(store, path=str(repo), source="operator")
    wid = bound["workspace_id"]
    (hit,) = search(store, "ledgerd")
    assert hit["kind"] == "workspace_profile" and hit["workspace_id"] == wid
    assert hit["metadata"]["workspace_anchor"] == str(repo)
    write_brief(store, kind="result", text="Refund flow reviewed for the pangolin account")
    assert search(store, "pangolin")[0]["workspace_id"] == wid
    use_workspace(store, workspace_id="agent_home", source="operator")
    assert search(store, "pangolin") == []  # another workspace's record
    assert search(store, "pangolin", include_all_workspaces=True)
    detach_workspace(store, wid, source="operator")
    assert search(store, "ledgerd", include_all_workspaces=True) == []
