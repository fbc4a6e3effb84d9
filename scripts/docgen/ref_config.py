"""``docs/reference/config.md``: every key of ``$HOLON_HOME/config.yaml``
with its type, default, description and an example, from the schema
(``holon_cli/store/config_schema.py``: the dataclass sections, their field
types and metadata)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, get_args, get_origin

from .md import cell, code, code_cell, note, page, prose, table

SOURCE = "holon_cli/store/config_schema.py"


def _inner(tp: Any) -> Any:
    """``X | None`` -> ``X`` (the schema's optional keys)."""
    args = [a for a in get_args(tp) if a is not type(None)]
    if get_origin(tp) in (typing.Union, __import__("types").UnionType) and len(args) == 1:
        return args[0]
    return tp


def _section_of(tp: Any) -> tuple[type | None, bool]:
    """The section dataclass a field holds, and whether it is a mapping of
    names to sections (``providers.<name>``)."""
    tp = _inner(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return tp, False
    if get_origin(tp) is dict and dataclasses.is_dataclass(get_args(tp)[1]):
        return get_args(tp)[1], True
    return None, False


def _type_text(tp: Any) -> str:
    from holon_cli.store.config_schema import _type_name

    return _type_name(tp)


def _yaml(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=1000, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def sections() -> list[tuple[type, list[str]]]:
    """Each section dataclass once, in the order met from the top, with the
    key paths it appears at."""
    from holon_cli.store.config_schema import HolonConfig, _key

    found: list[tuple[str, type]] = [("", HolonConfig)]  # every occurrence, depth first

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            sub, mapping = _section_of(hints[f.name])
            if sub is None:
                continue
            path = f"{prefix}.{_key(f)}" if prefix else _key(f)
            path = f"{path}.<name>" if mapping else path
            found.append((path, sub))
            walk(sub, path)

    walk(HolonConfig, "")
    seen: dict[type, list[str]] = {}
    for path, cls in found:
        seen.setdefault(cls, []).append(path)
    for paths in seen.values():  # the shortest path first: `execution`, then the agent's
        paths.sort(key=lambda p: p.count("."))
    rank = {path: i for i, (path, _) in enumerate(found)}
    order = sorted(seen, key=lambda c: rank[seen[c][0]])
    return [(cls, seen[cls]) for cls in order]


def leaves(cls: type) -> list[tuple[str, Any, dict[str, Any]]]:
    """The keys of ``cls`` that hold a value: (key, type, metadata)."""
    from holon_cli.store.config_schema import _key

    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if _section_of(hints[f.name])[0] is None:
            out.append((_key(f), hints[f.name], dict(f.metadata)))
    return out


def _anchor(paths: list[str]) -> str:
    return paths[0].replace(".<name>", "-name").replace(".", "-") or "top-level-keys"


def render() -> str:
    lines = [
        note(SOURCE),
        "",
        "# Configuration",
        "",
        "`$HOLON_HOME/config.yaml` (`holon home path` prints the home). Every key is "
        "optional; a key not set keeps its default. An unknown key, a wrong type or a "
        "value out of range is an error naming the key path (exit 2, `config_error`): "
        "`holon home check` checks the file without running anything. Precedence: "
        "flag > environment > `config.yaml` > built-in default. Sections marked "
        "`<name>` are mappings of names you choose (a provider, an agent id, a "
        "webhook source, an MCP server).",
        "",
    ]
    secs = sections()
    index = []
    for cls, paths in secs:
        label = ", ".join(code(p) for p in paths if p) or "top level"
        index.append([f"[{label}](#{_anchor(paths)})", cell((cls.__doc__ or "").split("\n\n")[0])])
    lines += table(["section", "what it holds"], index)
    for cls, paths in secs:
        title = ", ".join(code(p) for p in paths if p) or "Top-level keys"
        lines += [f"## {title} {{#{_anchor(paths)}}}", ""]
        doc = " ".join((cls.__doc__ or "").split())
        if doc:
            lines += [prose(doc), ""]
        hints = typing.get_type_hints(cls)
        from holon_cli.store.config_schema import _key

        subs = []
        for f in dataclasses.fields(cls):
            sub, mapping = _section_of(hints[f.name])
            if sub is not None:
                path_of = next(p for c, p in secs if c is sub)
                subs.append(
                    f"- {code(_key(f) + ('.<name>' if mapping else ''))}: "
                    f"{prose(f.metadata.get('doc', ''))} "
                    f"([keys](#{_anchor(path_of)}))"
                )
        rows = []
        for key, tp, meta in leaves(cls):
            required = meta.get("required")
            default = "required" if required else meta.get("default", "")
            example = meta.get("example")
            rows.append(
                [
                    code(key),
                    cell(_type_text(tp)),
                    cell(default),
                    cell(meta.get("doc", "")),
                    code_cell(f"{key}: {_yaml(example)}") if example is not None else "",
                ]
            )
        if rows:
            lines += table(["key", "type", "default", "description", "example"], rows)
        if subs:
            lines += ["Sections inside it:", "", *subs, ""]
    return page(lines)
