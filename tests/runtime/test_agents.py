"""Agent creation (templates, fail-closed), resolution, listing and lifecycle."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.runtime.agents import lifecycle as A
from holon_cli.store.fsio import read_snapshot
from holon_cli.store.layout import HomeLayout


def agents_dir_names() -> list[str]:
    d = HomeLayout.current().agents_dir
    return sorted(os.listdir(d)) if d.exists() else []


def make_template(
    root: Path,
    *,
    agents_md: str | None = "# Reviewer\nBe terse.\n",
    skills_json: object = None,
    skills: tuple[str, ...] = (),
) -> Path:
    root.mkdir(parents=True)
    if agents_md is not None:
        (root / "AGENTS.md").write_text(agents_md)
    (root / "notes").mkdir()
    (root / "notes" / "hello.md").write_text("note\n")
    for name in skills:
        (root / "skills" / name).mkdir(parents=True)
        (root / "skills" / name / "SKILL.md").write_text(f"# {name}\n")
    if skills_json is not None:
        (root / "skills.json").write_text(
            skills_json if isinstance(skills_json, str) else json.dumps(skills_json)
        )
    return root


def assert_agent_home(home: Path) -> None:
    for d in (
        "memory",
        "notes",
        "work",
        "skills",
        "work-items",
        ".holon/state",
        ".holon/ledger",
        ".holon/inbox/new",
    ):
        assert (home / d).is_dir(), d
    assert (home / "memory" / "self.md").is_file() and (home / "memory" / "operator.md").is_file()
    assert "holon: agent-home guidance" in (home / "AGENTS.md").read_text()


def test_create_from_bundled_template(holon_home: Path) -> None:
    store = A.create_agent("reviewer")
    home = holon_home / "agents" / "reviewer"
    assert store.layout.home == home
    assert_agent_home(home)
    rec = store.read_record()
    assert rec["identity"] == {
        "agent_id": "reviewer",
        "kind": "named",
        "visibility": "public",
        "ownership": "self_owned",
        "profile_preset": "public_named",
        "lineage_parent_agent_id": None,
        "created_at": rec["identity"]["created_at"],
        "template": rec["identity"]["template"],
    }
    assert rec["identity"]["template"]["kind"] == "builtin"
    assert rec["state"]["status"] == "awake_idle"
    prov = read_snapshot(store.layout.template_file)
    assert prov is not None and prov["selector"] == "holon-default"
    assert (holon_home / "home.json").is_file()
    ev = store.events.records()
    assert [e["kind"] for e in ev] == ["agent_created"] and ev[0]["event_seq"] == 1
    assert agents_dir_names() == ["reviewer"]  # no staging folder left behind


def test_create_from_template_id_under_home(tmp_path: Path) -> None:
    tpl = make_template(
        tmp_path / "user-home" / ".agents" / "templates" / "rev",
        skills_json={"skill_refs": ["lint"]},
        skills=("lint",),
    )
    store = A.create_agent("r1", template="rev")
    home = store.layout.home
    assert_agent_home(home)
    assert (home / "AGENTS.md").read_text().startswith("# Reviewer\nBe terse.")
    assert (home / "notes" / "hello.md").read_text() == "note\n"
    assert (home / "skills" / "lint" / "SKILL.md").is_file()
    assert not (home / "skills.json").exists()
    prov = store.read_record()["identity"]["template"]
    assert prov == {"kind": "template_id", "selector": "rev", "path": str(tpl)}


def test_create_from_absolute_path_with_absolute_skill_ref(tmp_path: Path) -> None:
    skill = tmp_path / "shared-skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# deploy\n")
    tpl = make_template(tmp_path / "tpl", skills_json={"skill_refs": [str(skill)]})
    store = A.create_agent("r2", template=str(tpl), model="openai/gpt-4.1")
    assert (store.layout.home / "skills" / "deploy" / "SKILL.md").is_file()
    rec = store.read_record()
    assert rec["identity"]["template"]["kind"] == "path"
    assert rec["state"]["model_override"] == "openai/gpt-4.1"


def test_existing_agents_md_guidance_not_duplicated(tmp_path: Path) -> None:
    tpl = make_template(tmp_path / "tpl", agents_md="# X\n" + A.AGENTS_GUIDANCE)
    store = A.create_agent("r3", template=str(tpl))
    assert (store.layout.home / "AGENTS.md").read_text().count("holon: agent-home guidance") == 1


@pytest.mark.parametrize(
    ("case", "exc", "needle"),
    [
        ("no_agents_md", RejectedError, "no AGENTS.md"),
        ("bad_skills_json", RejectedError, "skills.json"),
        ("skills_json_not_object", RejectedError, "skill_refs"),
        ("missing_skill_ref", RejectedError, "has no SKILL.md"),
        ("non_string_skill_ref", RejectedError, "not a string"),
        ("remote_skill_ref", RejectedError, "is not a GitHub repository or tree URL"),
        ("missing_template", NotFoundError, "template not found"),
        ("relative_path", UsageError, "neither a template id nor an absolute path"),
        ("remote_template", RejectedError, "remote template"),
    ],
)
def test_bad_templates_fail_closed(
    tmp_path: Path, case: str, exc: type[Exception], needle: str
) -> None:
    tpl: Path | str
    if case == "no_agents_md":
        tpl = make_template(tmp_path / "tpl", agents_md=None)
    elif case == "bad_skills_json":
        tpl = make_template(tmp_path / "tpl", skills_json="{not json")
    elif case == "skills_json_not_object":
        tpl = make_template(tmp_path / "tpl", skills_json=["a"])
    elif case == "missing_skill_ref":
        tpl = make_template(tmp_path / "tpl", skills_json={"skill_refs": ["ghost"]})
    elif case == "non_string_skill_ref":
        tpl = make_template(tmp_path / "tpl", skills_json={"skill_refs": [42]})
    elif case == "remote_skill_ref":
        tpl = make_template(
            tmp_path / "tpl", skills_json={"skill_refs": ["https://example.invalid/o/r/s"]}
        )
    elif case == "missing_template":
        tpl = str(tmp_path / "nope")
    elif case == "relative_path":
        tpl = "some/dir"
    else:
        tpl = "https://gitlab.invalid/o/r/-/tree/main/tpl"
    with pytest.raises(exc) as ei:  # type: ignore[call-overload]
        A.create_agent("broken", template=str(tpl))
    assert needle in ei.value.message
    assert agents_dir_names() == []  # nothing half-made, no staging folder
    with pytest.raises(NotFoundError):
        A.open_agent("broken")


def test_duplicate_agent_id_is_rejected() -> None:
    A.create_agent("dup")
    with pytest.raises(RejectedError) as ei:
        A.create_agent("dup")
    assert "already exists" in ei.value.message and ei.value.exit_code == 4
    assert len(A.open_agent("dup").events.records()) == 1


@pytest.mark.parametrize("bad", ["../evil", "a/b", ".x", "", "a\nb", "x" * 65])
def test_invalid_agent_id_creates_nothing(bad: str, holon_home: Path) -> None:
    with pytest.raises(UsageError):
        A.create_agent(bad)
    with pytest.raises(UsageError):
        A.open_agent(bad)
    assert not holon_home.exists() or agents_dir_names() == []


def test_invalid_model_creates_nothing() -> None:
    with pytest.raises(UsageError):
        A.create_agent("m", model="no-slash-here")
    assert agents_dir_names() == []


def test_default_agent_is_created_on_first_use() -> None:
    store = A.open_agent(None)
    assert store.agent_id == "main"
    assert store.read_record()["identity"]["kind"] == "default"
    assert A.open_agent("main").layout == store.layout  # explicit default id: same agent
    assert len(store.events.records()) == 1  # created once


def test_holon_agent_id_overrides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLON_AGENT_ID", "ops")
    store = A.open_agent(None)
    assert store.agent_id == "ops" and store.read_record()["identity"]["kind"] == "default"
    with pytest.raises(NotFoundError):
        A.open_agent("main")  # no longer the default: not auto-created
    assert agents_dir_names() == ["ops"]


def test_explicit_non_default_agent_is_not_auto_created() -> None:
    with pytest.raises(NotFoundError) as ei:
        A.open_agent("reviewer")
    assert ei.value.exit_code == 3 and "holon agent create reviewer" in (ei.value.hint or "")
    assert agents_dir_names() == []


def test_list_agents_hides_private(holon_home: Path) -> None:
    assert A.list_agents() == []
    A.open_agent(None)
    A.create_agent("pub")
    A.create_agent(
        "kid",
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id="main",
    )
    (holon_home / "agents" / ".creating-x-1").mkdir()  # a crashed creation is invisible
    (holon_home / "agents" / "README.txt").write_text("a stray file")  # so is a stray file
    assert [a.agent_id for a in A.list_agents()] == ["main", "pub"]
    assert [a.agent_id for a in A.list_agents(include_private=True)] == ["kid", "main", "pub"]
    entry = A.list_agents()[0].to_dict()
    assert entry == {
        "agent_id": "main",
        "kind": "default",
        "visibility": "public",
        "status": "awake_idle",
        "agent_home": str(holon_home / "agents" / "main"),
    }


def test_stop_and_start() -> None:
    A.create_agent("w")
    res = A.set_lifecycle("w", "stop")
    assert res == {
        "agent_id": "w",
        "previous": "awake_idle",
        "status": "stopped",
        "changed": True,
        "lifecycle_hint": res["lifecycle_hint"],
    }
    assert "holon agent start" in res["lifecycle_hint"]
    assert A.set_lifecycle("w", "stop")["changed"] is False
    res = A.set_lifecycle("w", "start")
    assert (
        res["status"] == "awake_idle" and res["changed"] is True and res["lifecycle_hint"] is None
    )
    assert A.set_lifecycle("w", "start")["changed"] is False
    changes = [e for e in A.open_agent("w").events.records() if e["kind"] == "agent_state_changed"]
    assert [(e["data"]["from"], e["data"]["to"]) for e in changes] == [
        ("awake_idle", "stopped"),
        ("stopped", "awake_idle"),
    ]


def test_lifecycle_of_unknown_agent() -> None:
    with pytest.raises(NotFoundError):
        A.set_lifecycle("ghost", "stop")


def test_ensure_home_is_idempotent(holon_home: Path) -> None:
    A.ensure_home()
    marker = (holon_home / "home.json").read_text()
    A.ensure_home()
    assert (holon_home / "home.json").read_text() == marker
    assert (holon_home / "agents").is_dir() and (holon_home / "run").is_dir()


def test_threads_creating_the_default_agent_at_once_all_get_it(
    holon_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads of one process (serve's workers; an in-process command and
    a call thread) creating the same agent at once: both get it. They used
    to share one staging folder (``.creating-<id>-<pid>``): the second one
    removed the first one's half-made copy, whose rename then failed with
    "agent 'main' already exists" (exit 4) although nothing existed yet."""
    import threading

    real = A._materialize
    both_in = threading.Barrier(2, timeout=20)

    def materialize(*args: object, **kw: object) -> None:
        real(*args, **kw)  # type: ignore[arg-type]
        try:
            both_in.wait()  # both copies made before either is renamed
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(A, "_materialize", materialize)
    start = threading.Barrier(2, timeout=20)
    got: list[object] = []

    def create() -> None:
        start.wait()
        try:
            got.append(A.open_agent().agent_id)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            got.append(exc)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == ["main", "main"], got
    assert agents_dir_names() == ["main"]  # no staging folder left behind
