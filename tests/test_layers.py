"""The package's layers, read from the source: every import (module level,
inside functions, under ``TYPE_CHECKING``, and the lazy ``importlib`` maps)
runs downward, and no two modules import each other, directly or round a
longer loop.

Layers, lowest first: ``errors``/``kinds``/``clock``/``digest``/``cpython_seam``;
``model``; ``store``; ``providers``; ``runtime``; ``tools`` (model-facing adapters onto the runtime
planes: tools import runtime, the runtime never imports tools; the turn gets
the catalog as an argument); ``serve``; ``cli``. Providers and tools do not
import each other.

Two more rules, read from the same source:

- ceilings: a module is at most 600 lines, a class 400, a function 100
  (:data:`OVER_CEILING` lists the exceptions, each with its reason and who
  is on it);
- named seams: a private name of another package (``from x._y import``,
  ``import x._y``, ``from x import _y``, ``getattr(o, "_y")`` or ``o._y``
  where no module of ours outside the seams defines ``_y``) is used only in
  that package's seam module (:data:`SEAMS`, the same table as
  ARCHITECTURE.md's "Seams onto other libraries"), each with its contract
  test.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "holon_cli"

BASE = "base"
LAYERS: dict[str, frozenset[str]] = {
    # layer -> the layers its modules may import (their own included)
    BASE: frozenset({BASE}),
    "model": frozenset({BASE, "model"}),
    "store": frozenset({BASE, "model", "store"}),
    "providers": frozenset({BASE, "model", "store", "providers"}),
    "runtime": frozenset({BASE, "model", "store", "providers", "runtime"}),
    "tools": frozenset({BASE, "model", "store", "runtime", "tools"}),
    "serve": frozenset({BASE, "model", "store", "providers", "runtime", "tools", "serve"}),
    "cli": frozenset({BASE, "model", "store", "providers", "runtime", "tools", "serve", "cli"}),
}
TOP_LEVEL = {
    "holon_cli": BASE,
    "holon_cli.errors": BASE,
    "holon_cli.clock": BASE,
    "holon_cli.digest": BASE,
    "holon_cli.cpython_seam": BASE,
    "holon_cli.kinds": BASE,
    "holon_cli.umask": BASE,
    "holon_cli.__main__": "cli",
}

# Deliberate exceptions, each with its reason (none for the layer order). An
# entry that no longer matches fails the test, so a fixed one leaves the list.
KNOWN_CYCLES: dict[frozenset[str], str] = {}

MODULE_MAX, CLASS_MAX, FUNCTION_MAX = 600, 400, 100
SPLIT = "not split yet (issue 43 item 3 follow-up, unassigned)"
# path (a module) or path::Qualified.name (a class or function) -> why it is
# over its ceiling and who is on it. An entry back under its ceiling fails
# the test (remove it), so the list only shrinks.
OVER_CEILING: dict[str, str] = {
    "holon_cli/store/ledger.py": "the Ledger split (writer / reader / segments) waits for the "
    "ledger edits of helpers `typed` and `perf-serve` to land (issue 43 item 3)",
    "holon_cli/store/ledger.py::Ledger": "as its module: split after `typed` and `perf-serve` "
    "land (issue 43 item 3)",
    "holon_cli/store/workitem_index.py": SPLIT + "; grown past the ceiling by helper "
    "`perf-bench` (the head snapshot and archive), merged just before this list",
    "holon_cli/store/memory_index.py": SPLIT + "; grown past the ceiling by helper `memsearch` "
    "(the recent window, kept connections), merged just before this list",
    "holon_cli/store/memory_index.py::MemoryIndex": "as its module (helper `memsearch`, merged)",
}

# The seams onto other libraries' private names: the seam module -> the
# packages whose private names it may use (top-level import names; "_" is
# CPython's own private modules and names) and its contract test. The same
# table, with each name, why, and the pin, is in ARCHITECTURE.md.
SEAMS: dict[str, tuple[frozenset[str], str]] = {
    "holon_cli.cpython_seam": (frozenset({"_", "atexit"}), "tests/test_cpython_seam.py"),
    "holon_cli.providers.httpx2_seam": (
        frozenset({"httpx2", "httpcore2"}),
        "tests/providers/test_httpx2_seam.py",
    ),
    "holon_cli.cli.click_seam": (frozenset({"click"}), "tests/cli/test_click_seam.py"),
    "holon_cli.serve.dbos.compat": (frozenset({"dbos"}), "tests/serve/test_dbos_compat.py"),
    "holon_cli.serve.http.uvicorn_seam": (
        frozenset({"uvicorn"}),
        "tests/serve/test_uvicorn_seam.py",
    ),
}
# Underscore names that are public API: os._exit, namedtuple's methods, the
# documented low-level ``_thread`` module.
PUBLIC_UNDERSCORE = frozenset({"_exit", "_replace", "_asdict", "_fields", "_make", "_thread"})
# (module, what it touches) -> reason and owner; an entry that no longer
# matches fails the test.
KNOWN_PRIVATE: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str:
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    return module.split(".")[1]


def _resolve(name: str) -> str | None:
    """The most specific module of ours that ``name`` names (a name imported
    from a module resolves to that module)."""
    modules = _modules()
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported_names(module: str, tree: ast.Module) -> Iterator[str]:
    is_package = _modules()[module].name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            for alias in node.names:
                # ``from package import submodule`` names the submodule
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in _modules() else base
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # a lazy import map (``importlib.import_module(MAP[name])``)
            target = node.value.partition(":")[0]
            if target.startswith("holon_cli.") and target in _modules():
                yield target


@cache
def _graph() -> dict[str, frozenset[str]]:
    graph: dict[str, frozenset[str]] = {}
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets = {_resolve(name) for name in _imported_names(module, tree)}
        graph[module] = frozenset(t for t in targets if t and t != module)
    return graph


def _cycles(graph: dict[str, frozenset[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_function_level_and_lazy_imports() -> None:
    graph = _graph()
    assert "holon_cli.cli.fast" in graph["holon_cli.cli"]  # inside a function
    assert "holon_cli.kinds" in graph["holon_cli.errors"]  # under TYPE_CHECKING
    assert "holon_cli.cli.cmd_enqueue" in graph["holon_cli.cli.commands"]  # by name, in a map
    assert "holon_cli.runtime.workitems.mutations" in graph["holon_cli.runtime.workitems"]


def test_imports_run_downward() -> None:
    upward = sorted(
        f"{module} ({_layer(module)}) imports {target} ({_layer(target)})"
        for module, targets in _graph().items()
        for target in targets
        if _layer(target) not in LAYERS[_layer(module)]
    )
    assert upward == []


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    unexpected = sorted(sorted(c) for c in cycles if c not in KNOWN_CYCLES)
    assert unexpected == []


def test_known_cycles_still_exist() -> None:
    """A deliberate exception listed above that is gone must leave the list
    (today there is none: every import runs one way)."""
    cycles = _cycles(_graph())
    fixed = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert fixed == [], f"{fixed} are fixed: remove them from KNOWN_CYCLES"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@cache
def _trees() -> dict[str, ast.Module]:
    return {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in _modules().items()}


@cache
def _our_names() -> frozenset[str]:
    """Every name a module of ours (the seams left out) defines: functions,
    classes, assigned names and attributes, parameters, import aliases,
    ``__slots__`` entries. ``o._y`` with any other ``_y`` reaches into
    another package."""
    names: set[str] = set()
    for module, tree in _trees().items():
        if module in SEAMS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                names.update(
                    c.value
                    for c in ast.walk(node.value)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
    return frozenset(names)


def _private_uses(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(the package, or "" when unknown, and what is used) for each private
    name of another package the module uses."""
    ours = _our_names()

    def package(dotted: str) -> str:
        top = dotted.split(".")[0]
        return "_" if _private(top) else top

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == "holon_cli":
                continue
            names = [a.name for a in node.names]
            parts = node.module.split(".")
            if any(_private(p) and p not in PUBLIC_UNDERSCORE for p in parts) or any(
                _private(n) for n in names
            ):
                yield package(node.module), f"from {node.module} import {', '.join(names)}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "holon_cli" and any(
                    _private(p) and p not in PUBLIC_UNDERSCORE for p in parts
                ):
                    yield package(alias.name), f"import {alias.name}"
        elif isinstance(node, ast.Attribute):
            if _private(node.attr) and node.attr not in ours | PUBLIC_UNDERSCORE:
                yield "", f".{node.attr}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in ours | PUBLIC_UNDERSCORE
        ):
            yield "", f"{node.func.id}({node.args[1].value!r})"


def test_private_names_of_other_packages_only_in_their_seams() -> None:
    stray = []
    for module, tree in _trees().items():
        for pkg, use in _private_uses(tree):
            if (module, use) in KNOWN_PRIVATE:
                continue
            if module in SEAMS and (not pkg or pkg in SEAMS[module][0]):
                continue
            stray.append(f"{module}: {use}")
    assert stray == [], "a private name of another package belongs in its seam module (SEAMS)"


def test_the_private_name_check_sees_each_form() -> None:
    tree = ast.parse(
        "from dbos._dbos import x\nimport watchfiles._rust_notify\nfrom click import _y\n"
        "o._not_ours_anywhere\ngetattr(o, '_nor_this')\nos._exit(0)\nt._replace(a=1)\n"
    )
    assert sorted(_private_uses(tree)) == [
        ("", "._not_ours_anywhere"),
        ("", "getattr('_nor_this')"),
        ("click", "from click import _y"),
        ("dbos", "from dbos._dbos import x"),
        ("watchfiles", "import watchfiles._rust_notify"),
    ]


def test_each_seam_has_its_contract_test_and_still_reaches_in() -> None:
    trees = _trees()
    for module, (_packages, contract) in SEAMS.items():
        assert module in trees, f"seam {module} is gone: remove it from SEAMS"
        assert (ROOT / contract).is_file(), f"{module}: contract test {contract} missing"
        assert any(True for _ in _private_uses(trees[module])) or module.endswith(
            "uvicorn_seam"  # subclasses uvicorn's protocol: its names are its own methods
        ), f"{module} uses no private name: remove it from SEAMS"
    architecture = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for module in SEAMS:
        path = module.replace(".", "/").removeprefix("holon_cli/") + ".py"
        assert path in architecture, f"ARCHITECTURE.md's seams table does not name {path}"


def test_known_private_uses_still_exist() -> None:
    trees = _trees()
    gone = [
        key
        for key in KNOWN_PRIVATE
        if key[0] not in trees or key[1] not in {use for _, use in _private_uses(trees[key[0]])}
    ]
    assert gone == [], f"{gone} are gone: remove them from KNOWN_PRIVATE"


def _sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    for module, path in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        tree = _trees()[module]
        sizes[rel] = len(path.read_text(encoding="utf-8").splitlines())

        def visit(node: ast.AST, prefix: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    # from the ``def``/``class`` line (decorators left out) to the end
                    sizes[f"{rel}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                    visit(child, f"{name}.", rel)
                else:
                    visit(child, prefix, rel)

        visit(tree, "")
    return sizes


def _ceiling(key: str) -> int:
    if "::" not in key:
        return MODULE_MAX
    rel, _, qualname = key.partition("::")
    node: ast.AST = _trees()[_module_name(ROOT / rel)]
    for part in qualname.split("."):
        node = next(
            c
            for c in ast.walk(node)
            if isinstance(c, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and c.name == part
        )
    return CLASS_MAX if isinstance(node, ast.ClassDef) else FUNCTION_MAX


def test_modules_classes_and_functions_stay_under_their_ceilings() -> None:
    over = sorted(
        f"{key}: {size} lines (ceiling {_ceiling(key)})"
        for key, size in _sizes().items()
        if size > _ceiling(key) and key not in OVER_CEILING
    )
    assert over == []


def test_ceiling_exceptions_are_still_over() -> None:
    sizes = _sizes()
    back = sorted(k for k in OVER_CEILING if k not in sizes or sizes[k] <= _ceiling(k))
    assert back == [], f"{back} are under their ceiling now: remove them from OVER_CEILING"
