"""Child profiles from files, as Claude Code users define subagents in
``.claude/agents/*.md`` (control-plane RFC: Agent Profile Model, Fresh
versus forked; issue 37 item 3).

A profile is one Markdown file named ``<name>.md``: YAML frontmatter, then
the body, which becomes the child's instructions (appended to its
``AGENTS.md``). ``SpawnAgent`` names it with ``preset``; it always makes a
supervised ``private_child`` (the two built-in presets keep their names).

Where they are found, the workspace's first (as a project's own
``.claude/agents`` wins over the user's):

1. ``<workspace anchor>/.agents/profiles/<name>.md`` (the spawning agent's
   active workspace);
2. ``$HOLON_HOME/profiles/<name>.md``.

Frontmatter keys (every one optional; anything else is an error naming the
file and the key):

- ``name``: the file's name without ``.md`` (checked when given);
- ``description``: one line for ``holon agent profiles``;
- ``model``: a model ref for the child, or ``inherit`` (the default: the
  parent's model override);
- ``tools``: the tools the child is offered, a list or a comma-separated
  string of tool names (``mcp__<server>__<tool>`` names pass through);
- ``budgets``: ``tokens_per_day``, ``cost_usd_per_day``, ``turns_per_hour``,
  ``tokens_per_work_item``: limits of the child's own, which can only
  tighten what ``config.yaml`` sets for it (runtime/budgets/spend.py);
- ``workspace_mode``: ``inherit`` | ``worktree`` | ``explicit_root``;
- ``workspace_root``: the directory of ``explicit_root`` (a workspace
  profile's relative path is taken from its workspace);
- ``context``: ``fork`` | ``fresh`` (runtime/children/context.py).

``SpawnAgent``'s own ``workspace_mode``, ``workspace_root`` and ``context``
win over the profile's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict

from holon_cli.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    from holon_cli.model.provider import ToolCall, ToolSpec
    from holon_cli.model.tool import Toolbox, ToolContext, ToolResult
    from holon_cli.model.typed import Json, JsonObject

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
BUILTIN_PRESETS = ("private_child", "public_named")
KEYS = (
    "name",
    "description",
    "model",
    "tools",
    "budgets",
    "workspace_mode",
    "workspace_root",
    "context",
)
WORKSPACE_MODES = ("inherit", "worktree", "explicit_root")
CONTEXT_MODES = ("fork", "fresh")
MAX_BYTES = 64 * 1024
WORKSPACE_DIR = Path(".agents") / "profiles"
MCP_PREFIX = "mcp__"


class ProfileError(ConfigError):
    """A profile file that cannot be used (exit 2): the message names the
    file, and the frontmatter key when one is at fault."""


class ProfileRow(TypedDict):
    """A row of ``holon agent profiles``: a valid profile's fields, or a
    broken one's ``error``; ``shadowed_by``: the file of the same name that
    is found first."""

    name: str
    source: str
    path: str
    description: NotRequired[str | None]
    model: NotRequired[str]
    tools: NotRequired[list[str] | None]
    budgets: NotRequired[dict[str, float]]
    workspace_mode: NotRequired[str | None]
    workspace_root: NotRequired[str | None]
    context: NotRequired[str | None]
    instructions_chars: NotRequired[int]
    valid: NotRequired[bool]
    error: NotRequired[str | None]
    shadowed_by: NotRequired[str | None]


class ChildProfile(NamedTuple):
    name: str
    source: str  # workspace | home
    path: Path
    description: str | None = None
    model: str | None = None  # None: inherit
    tools: tuple[str, ...] | None = None  # None: every tool
    budgets: dict[str, float] = {}
    workspace_mode: str | None = None
    workspace_root: str | None = None
    context: str | None = None
    instructions: str = ""

    def identity(self) -> JsonObject:
        """What the child's identity records of its profile (``profile``)."""
        tools: list[Json] | None = list(self.tools) if self.tools is not None else None
        budgets: dict[str, Json] = dict(self.budgets)
        return {
            "name": self.name,
            "source": self.source,
            "path": str(self.path),
            "model": self.model,
            "tools": tools,
            "budgets": budgets,
        }

    def summary(self) -> ProfileRow:
        """A row of ``holon agent profiles``."""
        return {
            "name": self.name,
            "source": self.source,
            "path": str(self.path),
            "description": self.description,
            "model": self.model or "inherit",
            "tools": list(self.tools) if self.tools is not None else None,
            "budgets": dict(self.budgets),
            "workspace_mode": self.workspace_mode,
            "workspace_root": self.workspace_root,
            "context": self.context,
            "instructions_chars": len(self.instructions),
        }


def home_dir() -> Path:
    from holon_cli.store.layout import home_root

    return home_root() / "profiles"


def dirs(anchor: Path | None) -> list[tuple[str, Path]]:
    """Where profiles are looked for, first match wins."""
    out = []
    if anchor is not None:
        out.append(("workspace", anchor / WORKSPACE_DIR))
    out.append(("home", home_dir()))
    return out


# ------------------------------------------------------------------ parsing


def _bad(path: Path, what: str, key: str | None = None) -> ProfileError:
    where = f"{path}: key `{key}`" if key else str(path)
    details: dict[str, object] = {"path": str(path)}
    if key:
        details["key"] = key
    return ProfileError(
        f"{where}: {what}",
        hint=f"fix or remove {path}; `holon agent profiles` checks every profile",
        details=details,
    )


def _split(path: Path, text: str) -> tuple[dict[object, object], str]:
    """(frontmatter, body). No frontmatter: the whole file is the body."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for i, ln in enumerate(lines[1:], 1):
        if ln.strip() == "---":
            head, body = "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
            break
    else:
        raise _bad(path, "the frontmatter opened by `---` on line 1 is never closed")
    import yaml

    try:
        meta = yaml.safe_load(head) if head.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 2})" if mark is not None else ""
        raise _bad(path, f"the frontmatter is not valid YAML{line}: {exc}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise _bad(path, f"the frontmatter must be a mapping of keys, not {type(meta).__name__}")
    return meta, body


def _str(path: Path, meta: Mapping[object, object], key: str) -> str | None:
    v = meta.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip():
        raise _bad(path, f"must be a non-empty string, got {v!r}", key)
    return v.strip()


def _choice(
    path: Path, meta: Mapping[object, object], key: str, allowed: tuple[str, ...]
) -> str | None:
    v = _str(path, meta, key)
    if v is not None and v not in allowed:
        raise _bad(path, f"must be one of {', '.join(allowed)}, got {v!r}", key)
    return v


def _tools(
    path: Path, meta: Mapping[object, object], known: Collection[str] | None
) -> tuple[str, ...] | None:
    v = meta.get("tools")
    if v is None:
        return None
    if isinstance(v, str):
        names = [t.strip() for t in v.split(",") if t.strip()]
    elif isinstance(v, list) and all(isinstance(t, str) for t in v):
        names = [t.strip() for t in v if t.strip()]
    else:
        raise _bad(
            path, f"must be a list of tool names or a comma-separated string, got {v!r}", "tools"
        )
    if known is not None:
        unknown = [t for t in names if t not in known and not t.startswith(MCP_PREFIX)]
        if unknown:
            raise _bad(
                path,
                f"unknown tool(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})",
                "tools",
            )
    return tuple(dict.fromkeys(names))


def _budgets(path: Path, meta: Mapping[object, object]) -> dict[str, float]:
    from holon_cli.model.budget import BUDGET_NAMES

    v = meta.get("budgets")
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _bad(
            path, f"must be a mapping such as {{tokens_per_day: 200000}}, got {v!r}", "budgets"
        )
    out: dict[str, float] = {}
    for k, n in v.items():
        key = f"budgets.{k}"
        if k not in BUDGET_NAMES:
            raise _bad(path, f"unknown budget (known: {', '.join(BUDGET_NAMES)})", key)
        if isinstance(n, bool) or not isinstance(n, int | float) or n < 0:
            raise _bad(path, f"must be a number >= 0, got {n!r}", key)
        if k != "cost_usd_per_day" and not float(n).is_integer():
            raise _bad(path, f"must be a whole number, got {n!r}", key)
        out[str(k)] = float(n) if k == "cost_usd_per_day" else int(n)
    return out


def _model(path: Path, meta: Mapping[object, object]) -> str | None:
    v = _str(path, meta, "model")
    if v is None or v == "inherit":
        return None
    from holon_cli.errors import UsageError
    from holon_cli.runtime.agents.models import normalize_model_ref

    try:
        return normalize_model_ref(v)
    except UsageError as exc:
        raise _bad(path, exc.message, "model") from None


def parse(path: Path, source: str, *, known_tools: Collection[str] | None = None) -> ChildProfile:
    """One profile file, checked (:class:`ProfileError` naming file and key)."""
    name = path.name[: -len(".md")] if path.name.endswith(".md") else path.name
    if not NAME_RE.match(name):
        raise _bad(path, "a profile's file name is <name>.md with name of a-z, 0-9, - and _")
    if name in BUILTIN_PRESETS:
        raise _bad(path, f"{name!r} is a built-in preset; name the profile otherwise")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _bad(path, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise _bad(path, f"is {len(raw)} bytes; a profile holds at most {MAX_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(path, "is not UTF-8 text") from None
    meta, body = _split(path, text.replace("\r\n", "\n"))
    for k in meta:
        if k not in KEYS:
            raise _bad(path, f"unknown key (known: {', '.join(KEYS)})", str(k))
    given = _str(path, meta, "name")
    if given is not None and given != name:
        raise _bad(path, f"is {given!r} but the file is named {name}.md", "name")
    mode = _choice(path, meta, "workspace_mode", WORKSPACE_MODES)
    root = _str(path, meta, "workspace_root")
    if root is not None and mode != "explicit_root":
        # the file's own key names (the profile's words, not a tool's)
        raise _bad(path, "is only for workspace_mode explicit_root", "workspace_root")
    if root is not None:
        rp = Path(root).expanduser()
        if source == "workspace":
            rp = path.parent.parent.parent / rp  # <anchor>/.agents/profiles/<name>.md
        elif not rp.is_absolute():
            raise _bad(path, "must be an absolute path in a home profile", "workspace_root")
        root = str(rp)
    return ChildProfile(
        name=name,
        source=source,
        path=path,
        description=_str(path, meta, "description"),
        model=_model(path, meta),
        tools=_tools(path, meta, known_tools),
        budgets=_budgets(path, meta),
        workspace_mode=mode,
        workspace_root=root,
        context=_choice(path, meta, "context", CONTEXT_MODES),
        instructions=body.strip(),
    )


# ------------------------------------------------------------------ finding


def find(
    name: str, anchor: Path | None, *, known_tools: Collection[str] | None = None
) -> ChildProfile:
    """The profile ``name`` for an agent working in ``anchor`` (NotFoundError
    naming where it looked)."""
    if not NAME_RE.match(name):
        raise NotFoundError(
            f"no profile {name!r}: a profile name is a-z, 0-9, - and _",
            hint="`holon agent profiles` lists the profiles; the built-in presets are "
            + ", ".join(BUILTIN_PRESETS),
            details={"field": "preset"},
        )
    looked = []
    for source, d in dirs(anchor):
        p = d / f"{name}.md"
        looked.append(str(p))
        if p.is_file():
            return parse(p, source, known_tools=known_tools)
    raise NotFoundError(
        f"no profile {name!r} (looked for {' and '.join(looked)})",
        hint="`holon agent profiles` lists the profiles; the built-in presets are "
        + ", ".join(BUILTIN_PRESETS),
        details={"field": "preset"},
    )


def list_profiles(
    anchor: Path | None, *, known_tools: Collection[str] | None = None
) -> list[ProfileRow]:
    """Every profile file where :func:`find` looks, in lookup order: valid
    ones with their fields, broken ones with ``error``; a profile hidden by
    one of the same name found first has ``shadowed_by``."""
    rows: list[ProfileRow] = []
    seen: dict[str, str] = {}
    for source, d in dirs(anchor):
        try:
            files = sorted(p for p in d.iterdir() if p.name.endswith(".md"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for p in files:
            name = p.name[: -len(".md")]
            try:
                row = parse(p, source, known_tools=known_tools).summary()
                row["valid"], row["error"] = True, None
            except ProfileError as exc:
                row = {"name": name, "source": source, "path": str(p), "valid": False}
                row["error"] = exc.message
            row["shadowed_by"] = seen.get(name)
            seen.setdefault(name, str(p))
            rows.append(row)
    return rows


# ------------------------------------------------------------------ tools


class ToolSubset:
    """A turn's tools cut down to a profile's ``tools`` (a :class:`Toolbox`):
    the model is offered only those, and a call of any other is an error
    result naming the profile (never run)."""

    def __init__(self, base: Toolbox, names: Collection[str], profile: str) -> None:
        self.base = base
        self.names = frozenset(names)
        self.profile = profile

    def __getattr__(self, name: str) -> Any:
        # anything else a toolbox carries (an MCP catalog's sources, problems)
        return getattr(self.base, name)

    @property
    def specs(self) -> list[ToolSpec]:
        return [s for s in self.base.specs if s.name in self.names]

    @property
    def guidance(self) -> dict[str, str]:
        return {k: v for k, v in self.base.guidance.items() if k in self.names}

    def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        if call.name in self.names:
            return self.base.execute(ctx, call)
        from holon_cli.model.tool import ToolResult, render_error

        env: Any = {
            "kind": "unknown_tool",
            "message": f"{call.name} is not one of the tools of profile {self.profile!r}",
            "recovery_hint": "use one of: " + ", ".join(sorted(self.names)),
            "retryable": False,
            "details": None,
        }
        return ToolResult(False, render_error(call.name, env), error=env)


def narrow(catalog: Toolbox, identity: Mapping[str, Any]) -> Toolbox:
    """The tools an agent is offered: a profiled child's own list, else all."""
    prof = identity.get("profile")
    if not isinstance(prof, Mapping) or prof.get("tools") is None:
        return catalog
    return ToolSubset(catalog, [str(t) for t in prof["tools"]], str(prof.get("name")))
