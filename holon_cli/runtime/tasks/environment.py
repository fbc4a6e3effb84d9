"""The environment of model-run commands: ``execution.env``, an allowlist.

One function, :func:`command_env`, builds it for every process the model's
work starts: ``ExecCommand`` and its batch, command tasks (``holon task
run``), and MCP stdio servers (their own ``env`` goes in as ``extra``).

``config.yaml``::

    execution:
      env:
        inherit: core     # core (default) | all | none
        pass: [GITHUB_TOKEN, npm_config_registry]
        set: {CI: "1"}

- ``core``: only ``PATH HOME USER LOGNAME SHELL LANG LC_* TERM TZ TMPDIR``
  of holon's environment;
- ``all``: every variable except secret-like ones (:func:`is_secret_name`,
  :func:`is_secret_value`);
- ``none``: nothing inherited;
- then each ``pass`` name holon's environment has, whatever it looks like
  (``runtime.exec_env_passthrough``, the older key, is read as more ``pass``
  names); then ``set`` (values from the config); then ``extra``.
- A provider's key (every ``providers.<name>.api_key_env``) is never passed
  or inherited, whatever the mode and even when ``pass`` names it.
- ``agents.<id>.execution.env`` overrides ``inherit``, ``pass`` and ``set``
  of the default one by one.

Standard library only (the task supervisor may import it at start-up).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from holon_cli.runtime.tasks.procs import MARKER_VAR

Inherit = Literal["core", "all", "none"]
INHERIT_MODES: tuple[Inherit, ...] = ("core", "all", "none")
CORE_NAMES = frozenset(("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR"))
CORE_PREFIXES = ("LC_",)
# a name holding one of these as a `_`-separated word (an `S` after it too:
# CREDENTIALS, COOKIES) says it holds a secret
SECRET_WORDS = frozenset(
    (
        "KEY",
        "SECRET",
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
        "PAT",
        "SESSION",
        "COOKIE",
        "DSN",
        "WEBHOOK",
        "PRIVATE",
        "NETRC",
    )
)
# ... and these anywhere in the name (the rule before execution.env:
# PGPASSWORD, APIKEY, GITHUBTOKEN); PAT or AUTH as fragments would hit PATH
# and AUTHOR, so the newer words count only as words
SECRET_FRAGMENTS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL")
# scheme://userinfo@ anywhere in the value (a list of URLs included): a user
# name alone can be a token (https://ghp_xxx@github.com/...)
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]+@")


def is_secret_name(name: str) -> bool:
    """A name that says it holds a secret: ``AWS_SECRET_ACCESS_KEY``,
    ``GH_PAT``, ``NPM_AUTH``, ``SLACK_WEBHOOK_URL``, ``SENTRY_DSN``,
    ``X_SESSION``, ``PGPASSWORD`` (not ``PATH``, ``AUTHOR``, ``PATCH_LEVEL``)."""
    upper = name.upper()
    if any(frag in upper for frag in SECRET_FRAGMENTS):
        return True
    for word in upper.split("_"):
        if word in SECRET_WORDS or (word.endswith("S") and word[:-1] in SECRET_WORDS):
            return True
    return False


def is_secret_value(value: str) -> bool:
    """A value holding a URL with userinfo (``postgres://u:p@h/db``,
    ``https://token@host/x``)."""
    return "@" in value and _URL_USERINFO.search(value) is not None


def is_core_name(name: str) -> bool:
    return name in CORE_NAMES or name.startswith(CORE_PREFIXES)


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def key_env_names(config: Any) -> set[str]:
    """Every ``api_key_env`` the config names (``providers.<name>.api_key_env``),
    whatever the variable is called: the model's credential is never a
    command's."""
    providers = _get(config, "providers")
    if not isinstance(providers, Mapping):
        return set()
    names: set[str] = set()
    for spec in providers.values():
        env = _get(spec, "api_key_env")
        if isinstance(env, str) and env:
            names.add(env)
    return names


def _names(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, Iterable):
        return [str(n) for n in raw]
    return []


def env_section(config: Any, agent_id: str | None = None) -> dict[str, object]:
    """``execution.env`` with the agent's over it key by key, and the older
    ``runtime.exec_env_passthrough`` folded into ``pass``."""
    if isinstance(config, Mapping):
        from holon_cli.model.execution_policy import execution_section

        raw = execution_section(config, agent_id).get("env")
        sect: dict[str, object] = dict(raw) if isinstance(raw, Mapping) else {}
    else:  # the typed config (store/config_schema dataclasses)
        env = _get(_get(config, "execution"), "env")
        sect = {}
        if env is not None:
            sect = {
                "inherit": _get(env, "inherit"),
                "pass": _get(env, "pass_"),
                "set": _get(env, "set"),
            }
    legacy = _names(_get(_get(config, "runtime"), "exec_env_passthrough"))
    sect["pass"] = [*_names(sect.get("pass")), *legacy]
    return sect


def inherit_mode(sect: Mapping[str, Any]) -> Inherit:
    mode = sect.get("inherit") or "core"
    return mode if mode in INHERIT_MODES else "core"


def command_env(
    config: Any,
    agent_id: str | None = None,
    *,
    extra: Mapping[str, str] | None = None,
    marker: str | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a model-run command (or MCP stdio server) gets, built
    from ``execution.env`` over ``base`` (default: holon's own environment).
    ``extra``: the caller's own variables, set last (an MCP server's ``env``);
    ``marker``: the ``HOLON_EXEC_MARKER`` value (the supervisor sets it
    otherwise)."""
    src = os.environ if base is None else base
    sect = env_section(config, agent_id)
    mode = inherit_mode(sect)
    keys = key_env_names(config)
    if mode == "core":
        env = {k: src[k] for k in src if is_core_name(k)}  # values of core names only
    elif mode == "all":
        env = {k: v for k, v in src.items() if not (is_secret_name(k) or is_secret_value(v))}
    else:
        env = {}
    passed = sect.get("pass")  # a list of names (env_section made it one)
    for name in passed if isinstance(passed, list) else []:
        if name in src:
            env[name] = src[name]
    for k in keys:
        env.pop(k, None)
    sets = sect.get("set")
    if isinstance(sets, Mapping):
        env.update({str(k): str(v) for k, v in sets.items()})
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    env.pop(MARKER_VAR, None)
    if marker:
        env[MARKER_VAR] = marker
    return env
