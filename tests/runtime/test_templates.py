"""Templates and skills: builtin seeding with a managed marker, the
holon-developer template, GitHub selectors fetched with real git through an
``insteadOf`` mirror (never the network), ``holon skills install/list``,
and the default agent's deleted AGENTS.md restored from holon-default."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from holon_cli.errors import RejectedError
from holon_cli.runtime.agents import lifecycle as A
from holon_cli.runtime.agents import templates as T
from tests.inprocess_cli import bind_runner, run  # noqa: F401

needs_git = pytest.mark.skipif(
    shutil.which("git") is None, reason="git not installed (Debian package: git)"
)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def mirror_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The repository behind the mirror, built once per module (the tests
    only fetch from it): its work tree and the mirror root."""
    base = tmp_path_factory.mktemp("mirror")
    root = base / "mirror"
    work = base / "src"
    (work / "templates" / "ops").mkdir(parents=True)
    (work / "templates" / "ops" / "AGENTS.md").write_text("# Ops agent\n\nKeep prod green.\n")
    (work / "templates" / "ops" / "skills.json").write_text(
        json.dumps({"skill_refs": ["builtin:verify-before-done", "local-one"]})
    )
    (work / "templates" / "ops" / "skills" / "local-one").mkdir(parents=True)
    (work / "templates" / "ops" / "skills" / "local-one" / "SKILL.md").write_text(
        "---\nname: local-one\ndescription: a template-local skill\n---\n"
    )
    (work / "templates" / "no-agents-md").mkdir()
    (work / "templates" / "no-agents-md" / "README.md").write_text("x\n")
    (work / "skills" / "triage").mkdir(parents=True)
    (work / "skills" / "triage" / "SKILL.md").write_text(
        "---\nname: triage\ndescription: Sort incoming issues\n---\nSteps.\n"
    )
    (work / "skills" / "triage" / "scripts").mkdir()
    (work / "skills" / "triage" / "scripts" / "run.sh").write_text("echo hi\n")
    (work / "skills" / "linked").mkdir()
    (work / "skills" / "linked" / "SKILL.md").symlink_to("/etc/hostname")
    (work / "README.md").write_text("repo\n")
    with pytest.MonkeyPatch.context() as mp:
        # before any test's HOME: no user or system git config
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        git("init", "-q", "-b", "main", cwd=work)
        git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A", cwd=work)
        git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one", cwd=work)
        git("tag", "v1", cwd=work)
        git("branch", "feature/x", cwd=work)
        (root / "acme").mkdir(parents=True)
        bare = root / "acme" / "agents.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
        # a repository that is one skill, on a default branch named trunk
        one = base / "one"
        one.mkdir()
        (one / "SKILL.md").write_text("---\nname: release-notes\ndescription: Notes\n---\n")
        git("init", "-q", "-b", "trunk", cwd=one)
        git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A", cwd=one)
        git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one", cwd=one)
        bare_one = root / "acme" / "release-notes.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(one), str(bare_one)], check=True)
    return work, root


@pytest.fixture
def mirror(mirror_repo: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``https://github.com/acme/agents`` served from a local bare repository
    through the user's git config (``url.<mirror>.insteadOf``), as a user with
    a mirror would set it up. Any other github.com URL maps to a missing
    folder, so nothing here can reach the network."""
    work, root = mirror_repo
    cfg = tmp_path / "gitconfig"
    cfg.write_text(f'[url "file://{root}/"]\n\tinsteadOf = https://github.com/\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOLON_TEMPLATES_DIR", str(tmp_path / "templates"))
    return work


def agent_dirs(holon_home: Path) -> list[str]:
    d = holon_home / "agents"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


# ------------------------------------------------------------------ seeding


def test_seeding_creates_refreshes_and_never_overwrites_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "templates"
    first = {r["template_id"]: r["status"] for r in T.seed_builtin_templates(target)}
    assert first == {"holon-default": "created", "holon-developer": "created"}
    dev = target / "holon-developer"
    assert "software-development agent" in (dev / "AGENTS.md").read_text()
    assert json.loads((dev / T.MARKER).read_text())["digest"] == T.tree_digest(dev)
    again = {r["template_id"]: r["status"] for r in T.seed_builtin_templates(target)}
    assert again == {"holon-default": "unchanged", "holon-developer": "unchanged"}

    # a newer holon ships a changed holon-developer: the untouched copy is refreshed
    newer = tmp_path / "newer-dev"
    shutil.copytree(T.bundled_template_dir("holon-developer"), newer)
    (newer / "AGENTS.md").write_text("# Developer v2\n")
    real = T.bundled_template_dir

    def bundled(tid: str = "holon-default") -> Path:
        return newer if tid == "holon-developer" else real(tid)

    monkeypatch.setattr(T, "bundled_template_dir", bundled)
    out = {r["template_id"]: r["status"] for r in T.seed_builtin_templates(target)}
    assert out["holon-developer"] == "refreshed"
    assert (dev / "AGENTS.md").read_text() == "# Developer v2\n"
    assert not [
        p for p in target.iterdir() if p.name.startswith(".") and p.name != T.SEED_LOCK
    ]  # no staging left

    # the user edits it: a later refresh leaves it alone
    (dev / "AGENTS.md").write_text("# mine\n")
    (newer / "AGENTS.md").write_text("# Developer v3\n")
    out = {r["template_id"]: r["status"] for r in T.seed_builtin_templates(target)}
    assert out["holon-developer"] == "diverged"
    assert (dev / "AGENTS.md").read_text() == "# mine\n"


def test_a_folder_without_marker_is_the_users_own(tmp_path: Path) -> None:
    target = tmp_path / "templates"
    (target / "holon-default").mkdir(parents=True)
    (target / "holon-default" / "AGENTS.md").write_text("# my own default\n")
    out = {r["template_id"]: r["status"] for r in T.seed_builtin_templates(target)}
    assert out["holon-default"] == "unmanaged"
    assert (target / "holon-default" / "AGENTS.md").read_text() == "# my own default\n"


def test_home_init_seeds_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLON_TEMPLATES_DIR", str(tmp_path / "tpl"))
    r = run("home", "init", "--json")
    assert r.returncode == 0, r.stderr
    seeded = json.loads(r.stdout)["data"]["templates"]
    assert [(t["template_id"], t["status"]) for t in seeded] == [
        ("holon-default", "created"),
        ("holon-developer", "created"),
    ]
    (tmp_path / "tpl" / "holon-developer" / "AGENTS.md").write_text("# edited\n")
    r = run("home", "init")
    assert "template holon-developer: diverged" in r.stdout and "left as is" in r.stdout


# ------------------------------------------------------- builtin templates


def test_agent_create_from_holon_developer(holon_home: Path) -> None:
    r = run("agent", "create", "dev", "--template", "holon-developer", "--json")
    assert r.returncode == 0, r.stderr
    home = holon_home / "agents" / "dev"
    assert "software-development agent" in (home / "AGENTS.md").read_text()
    assert "holon: agent-home guidance" in (home / "AGENTS.md").read_text()
    assert (home / "skills" / "verify-before-done" / "SKILL.md").is_file()
    assert (home / "skills" / "review-own-diff" / "SKILL.md").is_file()
    assert not (home / "skills.json").exists()
    prov = json.loads((home / ".holon" / "state" / "template.json").read_text())
    assert prov["kind"] == "builtin" and prov["selector"] == "holon-developer"
    assert prov["skills"] == ["builtin:verify-before-done", "builtin:review-own-diff"]
    listed = json.loads(run("skills", "list", "--agent", "dev", "--json").stdout)["data"]
    assert {s["name"] for s in listed["skills"]} >= {"verify-before-done", "review-own-diff"}
    assert "builtin:verify-before-done" in listed["builtin"]


def test_a_seeded_copy_the_user_edited_is_what_create_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLON_TEMPLATES_DIR", str(tmp_path / "tpl"))
    T.seed_builtin_templates()
    (tmp_path / "tpl" / "holon-developer" / "AGENTS.md").write_text("# house rules\n")
    store = A.create_agent("dev2", template="holon-developer")
    assert (store.layout.home / "AGENTS.md").read_text().startswith("# house rules")
    assert not (store.layout.home / T.MARKER).exists()


def test_unknown_builtin_skill_ref_fails_closed(tmp_path: Path, holon_home: Path) -> None:
    tpl = tmp_path / "t"
    tpl.mkdir()
    (tpl / "AGENTS.md").write_text("# t\n")
    (tpl / "skills.json").write_text(json.dumps({"skill_refs": ["builtin:nope"]}))
    with pytest.raises(RejectedError) as ei:
        A.create_agent("x", template=str(tpl))
    assert "unknown builtin skill" in ei.value.message
    assert "builtin:verify-before-done" in (ei.value.hint or "")
    assert agent_dirs(holon_home) == []


def test_default_agents_md_is_restored_never_overwritten(holon_home: Path) -> None:
    store = A.open_agent(None)
    md = store.layout.home / "AGENTS.md"
    md.unlink()
    A.open_agent(None)
    assert "holon: agent-home guidance" in md.read_text()
    md.write_text("# operator's own\n")
    A.open_agent(None)
    assert md.read_text() == "# operator's own\n"
    other = A.create_agent("named")
    (other.layout.home / "AGENTS.md").unlink()
    A.open_agent("named")
    assert not (other.layout.home / "AGENTS.md").exists()  # only the default agent


# ------------------------------------------------------------------ GitHub


@needs_git
@pytest.mark.parametrize(
    "ref", ["main", "v1", "feature/x", "COMMIT"], ids=["branch", "tag", "slash-branch", "commit"]
)
def test_github_template_through_git(mirror: Path, holon_home: Path, ref: str) -> None:
    if ref == "COMMIT":
        ref = git("rev-parse", "HEAD", cwd=mirror)
    url = f"https://github.com/acme/agents/tree/{ref}/templates/ops"
    r = run("agent", "create", "ops", "--template", url, "--json")
    assert r.returncode == 0, r.stderr
    home = holon_home / "agents" / "ops"
    assert (home / "AGENTS.md").read_text().startswith("# Ops agent")
    assert (home / "skills" / "verify-before-done" / "SKILL.md").is_file()
    assert (home / "skills" / "local-one" / "SKILL.md").is_file()
    prov = json.loads((home / ".holon" / "state" / "template.json").read_text())
    assert prov["kind"] == "github" and prov["ref"] == ref and prov["path"] == "templates/ops"
    assert prov["commit"] == git("rev-parse", "HEAD", cwd=mirror)


@needs_git
@pytest.mark.parametrize(
    ("url", "code", "needle"),
    [
        ("https://github.com/acme/nothere/tree/main/t", 3, "cannot read repository"),
        ("https://github.com/acme/agents/tree/nobranch/templates/ops", 3, "no branch or tag"),
        ("https://github.com/acme/agents/tree/main/templates/missing", 3, "has no folder"),
        ("https://github.com/acme/agents/tree/main/templates/no-agents-md", 4, "no AGENTS.md"),
        ("https://github.com/acme/agents/tree/main/README.md", 4, "names a file"),
        # a repository's root (the default branch's, or a ref's) is a folder too
        ("https://github.com/acme/agents/tree/main", 4, "symbolic link"),
        ("https://github.com/acme/agents", 4, "symbolic link"),
        ("https://github.com/acme/agents/blob/main/x", 4, "does not name a repository"),
        ("https://github.com/acme", 4, "does not name a repository"),
        ("https://github.com/acme/agents/tree/main/../../etc", 4, "not allowed"),
        ("http://github.com/acme/agents/tree/main/templates/ops", 4, "https only"),
    ],
)
def test_bad_github_templates_exit_3_or_4_and_leave_nothing(
    mirror: Path, holon_home: Path, url: str, code: int, needle: str
) -> None:
    r = run("agent", "create", "ops", "--template", url)
    assert r.returncode == code, r.stderr
    assert needle in r.stderr
    assert agent_dirs(holon_home) == []


@needs_git
def test_skills_install_remote_and_list(mirror: Path, holon_home: Path) -> None:
    url = "https://github.com/acme/agents/tree/v1/skills/triage"
    r = run("skills", "install", "--remote", url, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["data"]
    assert d["agent_id"] == "main" and d["name"] == "triage" and d["ref"] == "v1"
    home = holon_home / "agents" / "main"
    assert (home / "skills" / "triage" / "scripts" / "run.sh").read_text() == "echo hi\n"
    listed = json.loads(run("skills", "list", "--json").stdout)["data"]["skills"]
    triage = next(s for s in listed if s["name"] == "triage")
    assert triage["source"] == url and triage["scope"] == "agent"
    assert triage["description"] == "Sort incoming issues"
    again = run("skills", "install", "--remote", url)
    assert again.returncode == 4 and "already has a skill" in again.stderr
    beside = run("skills", "install", "--remote", url, "--name", "triage2")
    assert beside.returncode == 0, beside.stderr
    assert (home / "skills" / "triage2" / "SKILL.md").is_file()


@needs_git
def test_skills_install_into_a_named_agent_and_refusals(mirror: Path, holon_home: Path) -> None:
    A.create_agent("rev")
    ok = run("skills", "install", "builtin:review-own-diff", "--agent", "rev")
    assert ok.returncode == 0, ok.stderr
    assert (holon_home / "agents" / "rev" / "skills" / "review-own-diff" / "SKILL.md").is_file()
    cases = [
        (["--remote", "https://github.com/acme/agents/tree/main/skills/none"], 3),
        (["--remote", "https://github.com/acme/agents/tree/main/templates/ops"], 4),  # no SKILL.md
        (["--remote", "https://github.com/acme/agents/tree/main/skills/linked"], 4),  # a link
        (["--remote", "https://gitlab.com/x/y"], 4),
        (["builtin:nope"], 3),
        (["relative/path"], 2),
        ([], 2),
        (["builtin:review-own-diff", "--remote", "https://github.com/a/b/tree/m/s"], 2),
        (["builtin:verify-before-done", "--name", "../x"], 2),
    ]
    for args, code in cases:
        r = run("skills", "install", *args, "--agent", "rev")
        assert r.returncode == code, (args, r.stderr)
    left = sorted(p.name for p in (holon_home / "agents" / "rev" / "skills").iterdir())
    assert left == [".keep", "review-own-diff"]
    assert run("skills", "list", "--agent", "ghost").returncode == 3


@needs_git
def test_a_repository_url_installs_its_root_and_skills_rm_removes_it(
    mirror: Path, holon_home: Path
) -> None:
    """Issue 36 §6: a repository's own address (no /tree/<ref>/<path>) is the
    root of its default branch, named after the repository; `holon skills
    rm` removes it (folder and record); a missing one is exit 3."""
    url = "https://github.com/acme/release-notes"
    r = run("skills", "install", "--remote", url, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["data"]
    assert d["name"] == "release-notes" and d["ref"] == "trunk"
    skills = holon_home / "agents" / "main" / "skills"
    assert (skills / "release-notes" / "SKILL.md").is_file()
    assert not (skills / "release-notes" / ".git").exists()
    r = run("skills", "install", "--remote", url + ".git/", "--name", "again")
    assert r.returncode == 0, r.stderr
    r = run("skills", "rm", "release-notes")
    assert r.returncode == 0, r.stderr
    assert "removed release-notes from main" in r.stdout
    assert not (skills / "release-notes").exists()
    assert not [p for p in skills.iterdir() if p.name.startswith(".removing")]
    installed = json.loads(
        (holon_home / "agents/main/.holon/state/installed_skills.json").read_text()
    )
    assert set(installed["skills"]) == {"again"}
    listed = json.loads(run("skills", "list", "--json").stdout)["data"]["skills"]
    assert [s["path"] for s in listed if s["scope"] == "agent"] == [
        str(skills / "again" / "SKILL.md")
    ]
    gone = run("skills", "rm", "release-notes")
    assert gone.returncode == 3 and "has no skill 'release-notes'" in gone.stderr
    assert "again" in gone.stderr  # the ones it has
    assert run("skills", "rm", "../x").returncode == 2
    assert run("skills", "rm", "again", "--agent", "ghost").returncode == 3
    assert (skills / "again" / "SKILL.md").is_file()


@needs_git
def test_a_missing_repository_says_what_git_said(mirror: Path, holon_home: Path) -> None:
    r = run("skills", "install", "--remote", "https://github.com/acme/nothere")
    assert r.returncode == 3
    assert "git said:" in r.stderr and "does not appear to be a git repository" in r.stderr
    assert "and the repository exists." in r.stderr  # git's message whole, not its last line


def test_remote_git_refuses_when_git_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from holon_cli.runtime.agents import remote_git

    monkeypatch.setattr(remote_git.shutil, "which", lambda name: None)
    with pytest.raises(RejectedError) as ei:
        with remote_git.fetch_tree("https://github.com/a/b/tree/main/x"):
            pass
    assert "git is not installed" in ei.value.message


def test_two_seeders_at_once_leave_one_whole_copy(tmp_path: Path) -> None:
    import threading

    target = tmp_path / "templates"
    errors: list[BaseException] = []

    def seed() -> None:
        try:
            T.seed_builtin_templates(target)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=seed) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    names = sorted(p.name for p in target.iterdir())
    assert names == [T.SEED_LOCK, "holon-default", "holon-developer"]  # no staging left
    for tid in ("holon-default", "holon-developer"):
        folder = target / tid
        assert json.loads((folder / T.MARKER).read_text())["digest"] == T.tree_digest(folder)


def test_concurrent_skill_installs_of_one_name(holon_home: Path) -> None:
    import threading

    from holon_cli.runtime.agents.skills import install_skill

    store = A.open_agent(None)
    results: list[str] = []

    def install() -> None:
        try:
            install_skill(store, "builtin:verify-before-done")
            results.append("ok")
        except RejectedError as exc:
            results.append(exc.message)

    threads = [threading.Thread(target=install) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 1
    assert all("already has a skill" in r for r in results if r != "ok")
    left = sorted(p.name for p in (store.layout.home / "skills").iterdir())
    assert left == [".keep", "verify-before-done"]
