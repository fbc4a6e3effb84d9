"""ApplyPatch containment at write time, the plan-file exception, and clear
errors for paths that cannot be files; plus a property test: any patch text
ends in the project's own error types."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from property_budget import examples

from holon_cli.tools import apply_patch as ap
from holon_cli.tools.base import ToolContext, ToolError, ToolResult

Call = Callable[..., ToolResult]

PATCH_IN = "--- a/in.txt\n+++ b/in.txt\n@@ -1 +1 @@\n-old\n+patched\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    return d


def _after_planning(monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
    """Run ``hook`` between the plan (paths checked) and the commit (files written)."""
    real = ap.plan_patch

    def plan_then_hook(*a: Any, **kw: Any) -> Any:
        out = real(*a, **kw)
        hook()
        return out

    monkeypatch.setattr(ap, "plan_patch", plan_then_hook)


def test_planted_symlink_at_the_old_temp_name_does_not_redirect_the_write(
    call: Call, root: Path, outside: Path
) -> None:
    """Issue 13 item 3: a command run earlier in the turn plants
    ``ln -s /outside/x .in.txt.holon-patch.$PPID``; the patch must still land
    in ``in.txt`` and nothing may appear outside."""
    (root / "in.txt").write_text("old\n")
    victim = outside / "x"
    r = call("ExecCommand", cmd=f"ln -s {victim} .in.txt.holon-patch.$PPID")
    assert r.ok, r.content
    # and the exact name the old code used, whatever $PPID was in that shell
    pid_name = root / f".in.txt.holon-patch.{os.getpid()}"
    if not pid_name.is_symlink():
        pid_name.symlink_to(victim)
    r = call("ApplyPatch", patch=PATCH_IN)
    assert r.ok, r.content
    assert not victim.exists(), "patched content landed outside the workspace"
    assert os.listdir(outside) == []
    assert not (root / "in.txt").is_symlink()
    assert (root / "in.txt").read_text() == "patched\n"
    leftovers = [n for n in os.listdir(root) if n not in ("in.txt",)]
    assert all((root / n).is_symlink() for n in leftovers), "no temp file is left behind"


def test_folder_swapped_for_a_symlink_after_planning_is_refused(
    call: Call, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = root / "sub"
    sub.mkdir()
    (sub / "a.txt").write_text("old\n")
    (root / "b.txt").write_text("old\n")
    (outside / "a.txt").write_text("old\n")

    def swap() -> None:
        shutil.rmtree(sub)
        sub.symlink_to(outside)

    _after_planning(monkeypatch, swap)
    patch = (
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-old\n+new\n"
        "--- a/sub/a.txt\n+++ b/sub/a.txt\n@@ -1 +1 @@\n-old\n+owned\n"
    )
    r = call("ApplyPatch", patch=patch)
    assert r.error and r.error["kind"] == "execution_root_violation", r.content
    assert (outside / "a.txt").read_text() == "old\n"
    assert sorted(os.listdir(outside)) == ["a.txt"], "no temp file outside either"
    assert (root / "b.txt").read_text() == "old\n", "files already written are restored"


def test_delete_through_a_swapped_folder_is_refused(
    call: Call, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = root / "sub"
    sub.mkdir()
    (sub / "a.txt").write_text("x\n")
    (outside / "a.txt").write_text("x\n")

    def swap() -> None:
        shutil.rmtree(sub)
        sub.symlink_to(outside)

    _after_planning(monkeypatch, swap)
    r = call("ApplyPatch", patch="--- a/sub/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    assert r.error and r.error["kind"] == "execution_root_violation", r.content
    assert (outside / "a.txt").read_text() == "x\n"


def test_target_replaced_by_a_symlink_after_planning_is_refused(
    call: Call, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = root / "in.txt"
    target.write_text("old\n")
    victim = outside / "x"
    victim.write_text("old\n")

    def plant() -> None:
        target.unlink()
        target.symlink_to(victim)

    _after_planning(monkeypatch, plant)
    r = call("ApplyPatch", patch=PATCH_IN)
    assert r.error and r.error["kind"] == "unsafe_path", r.content
    assert victim.read_text() == "old\n"
    assert sorted(os.listdir(outside)) == ["x"]


# ------------------------------------------------- the current plan.md


def _focus(ctx: ToolContext, wid: str) -> Path:
    def set_focus(state: dict[str, Any]) -> None:
        state["current_work_item_id"] = wid

    ctx.store.update_state(set_focus)
    plan = ctx.store.layout.work_items_dir / wid / "plan.md"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text("# Plan\n\n- step one\n")
    return plan


def test_current_plan_is_editable_with_a_bound_workspace(
    call: Call, ctx: ToolContext, root: Path
) -> None:
    """Issue 8 item 17: the RFC makes the plan path editable regardless of workspace."""
    plan = _focus(ctx, "wi_1")
    other = _focus(ctx, "wi_0")
    _focus(ctx, "wi_1")
    assert root not in plan.resolve().parents  # the workspace is elsewhere
    p = str(plan)
    r = call("ApplyPatch", patch=f"--- {p}\n+++ {p}\n@@ -3 +3 @@\n-- step one\n+- step 1\n")
    assert r.ok, r.content
    assert plan.read_text() == "# Plan\n\n- step 1\n"
    # only the current item's plan, nothing else in the agent home
    o = str(other)
    r = call("ApplyPatch", patch=f"--- {o}\n+++ {o}\n@@ -3 +3 @@\n-- step one\n+- x\n")
    assert r.error and r.error["kind"] == "execution_root_violation"
    self_md = ctx.store.layout.home / "memory" / "self.md"
    s = str(self_md)
    r = call("ApplyPatch", patch=f"--- /dev/null\n+++ {s}.new\n@@ -0,0 +1 @@\n+x\n")
    assert r.error and r.error["kind"] == "execution_root_violation"


def test_plan_exception_does_not_follow_a_symlinked_plan(
    call: Call, ctx: ToolContext, outside: Path
) -> None:
    plan = _focus(ctx, "wi_1")
    victim = outside / "victim.md"
    victim.write_text("# Plan\n\n- step one\n")
    plan.unlink()
    plan.symlink_to(victim)
    p = str(plan)
    r = call("ApplyPatch", patch=f"--- {p}\n+++ {p}\n@@ -3 +3 @@\n-- step one\n+- x\n")
    assert r.error and r.error["kind"] == "execution_root_violation", r.content
    assert victim.read_text() == "# Plan\n\n- step one\n"


# ------------------------------------------------ file where a folder is


def test_adding_below_a_file_is_a_clear_tool_error(call: Call, root: Path) -> None:
    """Issue 14 item 11: not NotADirectoryError / tool_internal_error."""
    (root / "file.txt").write_text("x\n")
    r = call("ApplyPatch", patch="--- /dev/null\n+++ b/file.txt/x\n@@ -0,0 +1 @@\n+c\n")
    assert r.error and r.error["kind"] == "not_a_directory", r.content
    assert "file.txt" in r.error["message"] and r.error["recovery_hint"]
    assert (root / "file.txt").read_text() == "x\n"
    r = call("ApplyPatch", patch="--- /dev/null\n+++ b/file.txt/deep/er/x\n@@ -0,0 +1 @@\n+c\n")
    assert r.error and r.error["kind"] == "not_a_directory"
    # a file added earlier in the same patch blocks a folder of the same name too
    r = call(
        "ApplyPatch",
        patch="--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+a\n--- /dev/null\n+++ b/n/x\n@@ -0,0 +1 "
        "@@\n+b\n",
    )
    assert r.error and r.error["kind"] == "not_a_directory"
    assert not (root / "n").exists()


# ------------------------------------------------------ property test


def test_any_patch_text_ends_in_the_projects_own_errors(ctx: ToolContext, root: Path) -> None:
    """Issue 13 item 5: parser and applier never raise anything but ToolError."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    (root / "a.txt").write_text("line 1\nline 2\nline 3\n")
    (root / "d").mkdir(exist_ok=True)
    line = st.one_of(
        st.sampled_from(
            [
                "--- a/a.txt",
                "+++ b/a.txt",
                "--- /dev/null",
                "+++ b/new.txt",
                "+++ b/a.txt/x",
                "+++ b/d",
                "--- a/../x",
                "@@ -1,3 +1,3 @@",
                "@@ -0,0 +1 @@",
                "@@ -99 +99 @@",
                "@@",
                "@@ line 2",
                " line 1",
                "-line 2",
                "+LINE",
                "\\ No newline at end of file",
                "*** Begin Patch",
                "*** Add File: b.txt",
                "*** Update File: a.txt",
                "*** Delete File: a.txt",
                "*** Move to: d/m.txt",
                "*** End of File",
                "*** End Patch",
                "diff --git a/a.txt b/a.txt",
                "rename from a.txt",
                "rename to d",
                "new file mode 100644",
                "```",
                "",
            ]
        ),
        st.text(max_size=20),
    )

    @settings(
        max_examples=examples(150),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(line, max_size=14), st.booleans())
    def run(lines: list[str], crlf: bool) -> None:
        text = ("\r\n" if crlf else "\n").join(lines)
        try:
            files, _ = ap.parse_patch(text)
            ops, _ = ap.plan_patch(ctx, files)
            ap.commit(ops)
        except ToolError:
            return
        assert (root / "d").is_dir() or not (root / "d").exists()

    run()
