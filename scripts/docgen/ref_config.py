"""``docs/reference/config.md``: every key of ``$HOLON_HOME/config.yaml``
with its type, default, description and an example, from the schema
(``holon_cli/model/config.py``: one TypedDict per section, each key's
``Annotated[..., Rule(doc=..., default=..., example=...)]``)."""

from __future__ import annotations

from typing import Any, get_args, get_origin

from .md import cell, code, code_cell, note, page, prose, table

SOURCE = "holon_cli/model/config.py"


def _section_of(tp: Any) -> tuple[type | None, bool]:
    """The section TypedDict a key holds, and whether it is a mapping of
    names to sections (``providers.<name>``)."""
    from holon_cli.model.typed import is_typeddict, optional_of, strip

    tp = strip(optional_of(strip(tp))[1])
    if is_typeddict(tp):
        return tp, False
    if get_origin(tp) is dict:
        value = strip(get_args(tp)[1])
        if is_typeddict(value):
            return value, True
    return None, False


def _type_text(tp: Any) -> str:
    from holon_cli.store.config_schema import _type_name

    return _type_name(tp)


def _yaml(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=1000, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def _keys(cls: type) -> list[tuple[str, Any, dict[str, Any]]]:
    """Every key of ``cls``: (key, type, metadata: doc, default, example, required)."""
    from holon_cli.model.typed import rule_of, typeddict_keys

    hints, required = typeddict_keys(cls)
    out = []
    for key, tp in hints.items():
        rule = rule_of(tp)
        meta: dict[str, Any] = {}
        if rule is not None:
            meta["doc"] = rule.doc
            if rule.default is not None:
                meta["default"] = rule.default
            if rule.example is not None:
                meta["example"] = rule.example
        if key in required:
            meta["required"] = True
        out.append((key, tp, meta))
    return out


def sections() -> list[tuple[type, list[str]]]:
    """Each section TypedDict once, in the order met from the top, with the
    key paths it appears at."""
    from holon_cli.model.config import HolonConfig

    found: list[tuple[str, type]] = [("", HolonConfig)]  # every occurrence, depth first

    def walk(cls: type, prefix: str) -> None:
        for key, tp, _meta in _keys(cls):
            sub, mapping = _section_of(tp)
            if sub is None:
                continue
            path = f"{prefix}.{key}" if prefix else key
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
    return [(k, tp, meta) for k, tp, meta in _keys(cls) if _section_of(tp)[0] is None]


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
        subs = []
        for key, tp, meta in _keys(cls):
            sub, mapping = _section_of(tp)
            if sub is not None:
                path_of = next(p for c, p in secs if c is sub)
                subs.append(
                    f"- {code(key + ('.<name>' if mapping else ''))}: "
                    f"{prose(meta.get('doc') or '')} "
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
                    cell(meta.get("doc") or ""),
                    code_cell(f"{key}: {_yaml(example)}") if example is not None else "",
                ]
            )
        if rows:
            lines += table(["key", "type", "default", "description", "example"], rows)
        if subs:
            lines += ["Sections inside it:", "", *subs, ""]
    return page(lines)
