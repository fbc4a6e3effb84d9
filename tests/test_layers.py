"""The package's layers, read from the source: every import (module level,
inside functions, under ``TYPE_CHECKING``, and the lazy ``importlib`` maps)
runs downward, and no two modules import each other, directly or round a
longer loop.

Layers, lowest first: ``errors``/``kinds``/``clock``/``digest``; ``model``; ``store``;
``providers``; ``runtime``; ``tools`` (model-facing adapters onto the runtime
planes: tools import runtime, the runtime never imports tools; the turn gets
the catalog as an argument); ``serve``; ``cli``. Providers and tools do not
import each other.
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
    "holon_cli.kinds": BASE,
    "holon_cli.umask": BASE,
    "holon_cli.__main__": "cli",
}

# Deliberate exceptions, each with its reason (none for the layer order). An
# entry that no longer matches fails the test, so a fixed one leaves the list.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


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
