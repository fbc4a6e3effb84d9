"""ApplyPatch: the runtime patch engine against real files in a temp root."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from holon_cli.tools.base import ToolContext, ToolResult

Call = Callable[..., ToolResult]

BASE = "".join(f"line {i}\n" for i in range(1, 21))


def _write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_modify_file(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", BASE)
    patch = """--- a/a.txt
+++ b/a.txt
@@ -4,3 +4,4 @@
 line 4
-line 5
+line five
+line 5.5
 line 6
"""
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert f.read_text() == BASE.replace("line 5\n", "line five\nline 5.5\n")
    assert r.data["modified"] == ["a.txt"]
    assert r.data["files"] == [
        {"path": "a.txt", "action": "modified", "added_lines": 2, "removed_lines": 1}
    ]
    assert "M a.txt (+2 -1)" in r.content


def test_create_and_delete(call: Call, root: Path) -> None:
    old = _write(root, "old.txt", "x\ny\n")
    patch = """diff --git a/new/dir/n.py b/new/dir/n.py
new file mode 100644
--- /dev/null
+++ b/new/dir/n.py
@@ -0,0 +1,2 @@
+print("hi")
+print("there")
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-x
-y
"""
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert (root / "new/dir/n.py").read_text() == 'print("hi")\nprint("there")\n'
    assert not old.exists()
    assert r.data["added"] == ["new/dir/n.py"] and r.data["deleted"] == ["old.txt"]
    assert "A new/dir/n.py (+2)" in r.content and "D old.txt (-2)" in r.content


def test_multi_file_is_all_or_nothing(call: Call, root: Path) -> None:
    a = _write(root, "a.txt", BASE)
    b = _write(root, "b.txt", "alpha\nbeta\ngamma\n")
    patch = """--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
-line 1
+LINE 1
 line 2
--- /dev/null
+++ b/c.txt
@@ -0,0 +1 @@
+new
--- a/b.txt
+++ b/b.txt
@@ -1,3 +1,3 @@
 alpha
-BETA-NOT-THERE
+beta2
 gamma
"""
    r = call("ApplyPatch", patch=patch)
    assert not r.ok
    assert r.error and r.error["kind"] == "patch_conflict"
    assert a.read_text() == BASE, "the first file must be untouched"
    assert b.read_text() == "alpha\nbeta\ngamma\n"
    assert not (root / "c.txt").exists()


def test_conflict_envelope_details(call: Call, root: Path) -> None:
    _write(root, "a.txt", BASE)
    patch = """--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
 line 1
-line 2
+line two
@@ -10,3 +10,3 @@
 line 10
-line 11 (stale)
+line eleven
 line 12
"""
    r = call("ApplyPatch", patch=patch)
    assert r.error is not None
    d = r.error["details"]
    assert d["path"] == "a.txt"
    assert d["hunk"] == 2 and d["hunk_count"] == 2
    assert d["reason"] == "context_mismatch"
    assert d["expected_line"] == 10
    assert d["expected_context"] == ["line 10", "line 11 (stale)", "line 12"]
    nearby = {n["line"]: n["text"] for n in d["nearby_actual"]}
    assert nearby[10] == "line 10" and nearby[11] == "line 11"
    assert "sed -n" in r.error["recovery_hint"] and "a.txt" in r.error["recovery_hint"]
    assert '"hint"' in r.content and "no file was changed" in r.content
    assert (root / "a.txt").read_text() == BASE


def test_offset_fuzz_finds_unique_context(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "header 1\nheader 2\nheader 3\n" + BASE)
    patch = """--- a/a.txt
+++ b/a.txt
@@ -7,3 +7,3 @@
 line 7
-line 8
+line eight
 line 9
@@ -15,2 +15,3 @@
 line 15
+line 15.5
 line 16
"""
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    text = f.read_text()
    assert "line 7\nline eight\nline 9\n" in text
    assert "line 15\nline 15.5\nline 16\n" in text
    assert "offset +3" in r.content


def test_ambiguous_context_is_a_conflict(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "x\nsame\nx\nfiller\nx\nsame\nx\n")
    patch = """--- a/a.txt
+++ b/a.txt
@@ -40,3 +40,3 @@
 x
-same
+changed
 x
"""
    r = call("ApplyPatch", patch=patch)
    assert r.error and r.error["kind"] == "patch_conflict"
    assert r.error["details"]["reason"] == "ambiguous"
    assert r.error["details"]["candidate_lines"] == [1, 5]
    assert f.read_text() == "x\nsame\nx\nfiller\nx\nsame\nx\n"


def test_content_fuzz_is_not_allowed_but_trailing_whitespace_is(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "keep   \nold\nkeep2\n")
    ok = """--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 keep
-old
+new
 keep2
"""
    r = call("ApplyPatch", patch=ok)
    assert r.ok, r.content
    assert f.read_text() == "keep   \nnew\nkeep2\n", "context lines keep the file's own bytes"
    bad = ok.replace(" keep2", " keep3").replace("-old", "-new").replace("+new", "+newer")
    r = call("ApplyPatch", patch=bad)
    assert r.error and r.error["kind"] == "patch_conflict"


def test_no_newline_at_end_of_file(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "one\ntwo")
    patch = """--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,3 @@
 one
-two
\\ No newline at end of file
+two
+three
\\ No newline at end of file
"""
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert f.read_text() == "one\ntwo\nthree"
    # and add the final newline back
    patch2 = """--- a/a.txt
+++ b/a.txt
@@ -2,2 +2,2 @@
 two
-three
\\ No newline at end of file
+three
"""
    r = call("ApplyPatch", patch=patch2)
    assert r.ok, r.content
    assert f.read_text() == "one\ntwo\nthree\n"
    # a new file without a final newline
    r = call(
        "ApplyPatch",
        patch="--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+solo\n\\ No newline at end of file\n",
    )
    assert r.ok and (root / "n.txt").read_text() == "solo"


def test_append_to_file_without_final_newline(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "one\ntwo")
    r = call("ApplyPatch", patch="--- a/a.txt\n+++ b/a.txt\n@@ -2,0 +3 @@\n+three\n")
    assert r.ok, r.content
    assert f.read_text() == "one\ntwo\nthree\n"


def test_crlf_files_keep_their_line_endings(call: Call, root: Path) -> None:
    f = root / "w.txt"
    f.write_bytes(b"a\r\nb\r\nc\r\n")
    r = call("ApplyPatch", patch="--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    assert r.ok, r.content
    assert f.read_bytes() == b"a\r\nB\r\nc\r\n"


def test_path_escapes_are_rejected(call: Call, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    for path in ("../outside.txt", str(outside)):
        r = call("ApplyPatch", patch=f"--- {path}\n+++ {path}\n@@ -1 +1 @@\n-secret\n+owned\n")
        assert r.error and r.error["kind"] == "execution_root_violation", r.content
    r = call("ApplyPatch", patch="--- /dev/null\n+++ b/../../evil.txt\n@@ -0,0 +1 @@\n+x\n")
    assert r.error and r.error["kind"] == "execution_root_violation"
    assert outside.read_text() == "secret\n"
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path.parent / "evil.txt").exists()


def test_absolute_path_inside_root_is_fine(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "x\n")
    p = str(f.resolve())
    r = call("ApplyPatch", patch=f"--- {p}\n+++ {p}\n@@ -1 +1 @@\n-x\n+y\n")
    assert r.ok, r.content and f.read_text() == "y\n"


def test_runtime_area_is_protected(call: Call, ctx: ToolContext, root: Path) -> None:
    home = ctx.store.layout.home
    ctx.execution_root = home
    ctx.cwd = home
    r = call(
        "ApplyPatch", patch="--- /dev/null\n+++ b/.holon/state/evil.json\n@@ -0,0 +1 @@\n+{}\n"
    )
    assert r.error and r.error["kind"] == "protected_path"
    assert not (home / ".holon/state/evil.json").exists()


def test_create_existing_and_modify_missing(call: Call, root: Path) -> None:
    _write(root, "a.txt", "x\n")
    r = call("ApplyPatch", patch="--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+y\n")
    assert r.error and r.error["kind"] == "file_exists" and r.error["recovery_hint"]
    r = call("ApplyPatch", patch="--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-x\n+y\n")
    assert r.error and r.error["kind"] == "file_not_found"
    r = call("ApplyPatch", patch="--- a/missing.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    assert r.error and r.error["kind"] == "file_not_found" and "delete" in r.error["message"]
    assert (root / "a.txt").read_text() == "x\n"


def test_delete_must_match_content(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "x\ny\n")
    r = call("ApplyPatch", patch="--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    assert r.error and r.error["kind"] == "patch_conflict"
    assert f.exists()


@pytest.mark.parametrize(
    "patch",
    [
        "just some text\n",
        "@@ -1 +1 @@\n-a\n+b\n",
        "--- a/x\n+++ b/x\n",
        "*** Begin Patch\n*** Frobnicate: x\n*** End Patch\n",
    ],
)
def test_invalid_patches(call: Call, patch: str) -> None:
    r = call("ApplyPatch", patch=patch)
    assert r.error and r.error["kind"] == "invalid_patch", r.content
    assert r.error["recovery_hint"]


def test_wrong_hunk_counts_use_the_body(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", BASE)
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,9 +1,9 @@\n line 1\n-line 2\n+line two\n line 3\n--- "
        "a/a.txt\n+++ b/a.txt\n@@ -5 +5 @@\n-line 5\n+line five\n"
    )
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert f.read_text() == BASE.replace("line 2\n", "line two\n").replace(
        "line 5\n", "line five\n"
    )
    assert any(w["kind"] == "hunk_counts_mismatch" for w in r.warnings)


def test_blank_context_lines_without_leading_space_and_fences(call: Call, root: Path) -> None:
    f = _write(root, "a.py", "def f():\n\n    return 1\n")
    patch = (
        "```diff\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n def f():\n\n-    return 1\n+    "
        "return 2\n```\n"
    )
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert f.read_text() == "def f():\n\n    return 2\n"


def test_preserves_file_mode(call: Call, root: Path) -> None:
    f = _write(root, "run.sh", "#!/bin/sh\necho a\n")
    f.chmod(0o755)
    r = call("ApplyPatch", patch="--- a/run.sh\n+++ b/run.sh\n@@ -2 +2 @@\n-echo a\n+echo b\n")
    assert r.ok
    assert os.stat(f).st_mode & 0o777 == 0o755


def test_git_rename(call: Call, root: Path) -> None:
    _write(root, "old.txt", "a\nb\n")
    patch = (
        "diff --git a/old.txt b/new.txt\nsimilarity index 100%\nrename from old.txt\nrename to "
        "new.txt\n"
    )
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert not (root / "old.txt").exists() and (root / "new.txt").read_text() == "a\nb\n"
    assert r.data["moved"] == ["new.txt"]


def test_codex_envelope(call: Call, root: Path) -> None:
    _write(
        root,
        "src/app.py",
        "import os\n\n\ndef main():\n    print('a')\n    return 0\n\n\ndef other():\n    "
        "print('a')\n",
    )
    _write(root, "gone.txt", "bye\n")
    patch = """*** Begin Patch
*** Add File: docs/readme.md
+# Title
+body
*** Update File: src/app.py
@@ def other():
-    print('a')
+    print('b')
*** Delete File: gone.txt
*** Update File: src/app.py
*** Move to: src/main.py
@@
 import os
+import sys
*** End Patch
"""
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert (root / "docs/readme.md").read_text() == "# Title\nbody\n"
    assert not (root / "gone.txt").exists()
    assert not (root / "src/app.py").exists()
    text = (root / "src/main.py").read_text()
    assert text.startswith("import os\nimport sys\n")
    assert "def main():\n    print('a')" in text, "the anchor picks the second print"
    assert text.endswith("def other():\n    print('b')\n")


def test_codex_conflict_reports_details(call: Call, root: Path) -> None:
    _write(root, "a.txt", "one\ntwo\n")
    r = call(
        "ApplyPatch",
        patch="*** Begin Patch\n*** Update File: a.txt\n@@\n-three\n+four\n*** End Patch\n",
    )
    assert r.error and r.error["kind"] == "patch_conflict"
    assert r.error["details"]["expected_context"] == ["three"]
    assert (root / "a.txt").read_text() == "one\ntwo\n"


def test_relative_to_cwd(call: Call, ctx: ToolContext, root: Path) -> None:
    f = _write(root, "pkg/mod.txt", "x\n")
    ctx.cwd = root / "pkg"
    r = call("ApplyPatch", patch="--- a/mod.txt\n+++ b/mod.txt\n@@ -1 +1 @@\n-x\n+y\n")
    assert r.ok, r.content
    assert f.read_text() == "y\n"


def test_removed_line_that_looks_like_a_file_header(call: Call, root: Path) -> None:
    f = _write(root, "q.sql", "select 1;\n-- a note\n+ plus\nselect 2;\n")
    patch = (
        "--- a/q.sql\n+++ b/q.sql\n@@ -1,4 +1,3 @@\n select 1;\n--- a note\n+++ plus\n-+ "
        "plus\n select 2;\n"
    )
    r = call("ApplyPatch", patch=patch)
    assert r.ok, r.content
    assert f.read_text() == "select 1;\n++ plus\nselect 2;\n"


def test_write_failure_restores_files_already_written(
    call: Call, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holon_cli.tools import apply_patch as ap

    a = _write(root, "a.txt", "a\n")
    b = _write(root, "b.txt", "b\n")
    real = ap._atomic_write
    calls: list[Path] = []

    def flaky(path: Path, data: bytes, mode: int | None, check: object = None) -> None:
        calls.append(path)
        if len(calls) == 3:  # a, new/c.txt written; b fails
            raise OSError(28, "No space left on device", str(path))
        real(path, data, mode, check)  # type: ignore[arg-type]

    monkeypatch.setattr(ap.plan, "_atomic_write", flaky)  # commit() lives in .plan
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
        "--- /dev/null\n+++ b/new/c.txt\n@@ -0,0 +1 @@\n+c\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n"
    )
    r = call("ApplyPatch", patch=patch)
    assert r.error and r.error["kind"] == "write_failed" and r.error["retryable"] is True
    assert a.read_text() == "a\n" and b.read_text() == "b\n"
    assert not (root / "new").exists(), "folders made for the patch are removed again"


def test_same_file_twice_and_binary_files(call: Call, root: Path) -> None:
    f = _write(root, "a.txt", "one\ntwo\n")
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n"
        "--- a/a.txt\n+++ b/a.txt\n@@ -2 +2 @@\n-two\n+TWO\n"
    )
    assert call("ApplyPatch", patch=patch).ok
    assert f.read_text() == "ONE\nTWO\n"
    (root / "bin.dat").write_bytes(b"\x00\x01\x02\n")
    r = call("ApplyPatch", patch="--- a/bin.dat\n+++ b/bin.dat\n@@ -1 +1 @@\n-x\n+y\n")
    assert r.error and r.error["kind"] == "unsupported_file"


def test_move_onto_existing_file_is_refused(call: Call, root: Path) -> None:
    _write(root, "a.txt", "a\n")
    _write(root, "b.txt", "b\n")
    r = call(
        "ApplyPatch",
        patch="*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-a\n+A\n*** End "
        "Patch\n",
    )
    assert r.error and r.error["kind"] == "file_exists"
    assert (root / "a.txt").read_text() == "a\n" and (root / "b.txt").read_text() == "b\n"
