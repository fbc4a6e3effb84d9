"""``$HOLON_HOME/config.yaml``: load and validate.

Precedence is flag > environment > config > built-in default; this module
only reads the file. An unknown key is an error that names it.
"""

from __future__ import annotations

from typing import Any

from holon_cli.errors import ConfigError
from holon_cli.store.layout import HomeLayout

TOP_KEYS = {"model", "fallback_models", "providers", "runtime", "http_addr", "control_token"}
PROVIDER_KEYS = {
    "transport",
    "base_url",
    "api_key_env",
    "headers",
    "timeout_s",
    "max_output_tokens",
    "stream",
}
TRANSPORTS = ("openai_chat_completions", "openai_responses", "anthropic_messages")
RUNTIME_KEYS = {
    "default_tool_output_tokens",
    "max_tool_output_tokens",
    "max_provider_rounds",
    "exec_timeout_ms",
    "provider_timeout_s",
    "max_output_tokens",
    "work_item_stale_reminder_rounds",
    "work_item_stale_reminder_cooldown_rounds",
    "work_item_stale_reminder_max_tokens",
    "default_recheck_after_ms",
    # task plane (commands and command tasks)
    "exec_env_passthrough",
    "exec_yield_time_ms",
    "task_output_max_bytes",
    "outputs_max_age_days",
    "outputs_max_bytes",
}

_cache: dict[str, tuple[float, dict[str, Any]]] = {}


def load_config(layout: HomeLayout | None = None) -> dict[str, Any]:
    layout = layout or HomeLayout.current()
    path = layout.config
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    key = str(path)
    hit = _cache.get(key)
    if hit and hit[0] == st.st_mtime:
        return hit[1]
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path}: invalid YAML ({exc})", hint="fix the syntax in config.yaml"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    validate_config(data, str(path))
    _cache[key] = (st.st_mtime, data)
    return data


def validate_config(data: dict[str, Any], where: str = "config.yaml") -> None:
    for k in data:
        if k not in TOP_KEYS:
            raise ConfigError(
                f"{where}: unknown key {k!r}", hint=f"known keys: {', '.join(sorted(TOP_KEYS))}"
            )
    fb = data.get("fallback_models")
    if fb is not None and not (isinstance(fb, list) and all(isinstance(x, str) for x in fb)):
        raise ConfigError(f"{where}: fallback_models must be a list of model refs")
    if "model" in data and not isinstance(data["model"], str):
        raise ConfigError(f"{where}: model must be a string model ref")
    provs = data.get("providers") or {}
    if not isinstance(provs, dict):
        raise ConfigError(f"{where}: providers must be a mapping of name -> settings")
    for name, spec in provs.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: providers.{name} must be a mapping")
        for k in spec:
            if k not in PROVIDER_KEYS:
                raise ConfigError(
                    f"{where}: unknown key 'providers.{name}.{k}'",
                    hint=f"known keys: {', '.join(sorted(PROVIDER_KEYS))}",
                )
        if spec.get("transport") not in TRANSPORTS:
            raise ConfigError(
                f"{where}: providers.{name}.transport must be one of {', '.join(TRANSPORTS)}"
            )
        if not isinstance(spec.get("base_url"), str):
            raise ConfigError(f"{where}: providers.{name}.base_url is required")
    rt = data.get("runtime") or {}
    if not isinstance(rt, dict):
        raise ConfigError(f"{where}: runtime must be a mapping")
    for k in rt:
        if k not in RUNTIME_KEYS:
            raise ConfigError(
                f"{where}: unknown key 'runtime.{k}'",
                hint=f"known keys: {', '.join(sorted(RUNTIME_KEYS))}",
            )
    passthrough = rt.get("exec_env_passthrough")
    if passthrough is not None and not (
        isinstance(passthrough, list) and all(isinstance(x, str) for x in passthrough)
    ):
        raise ConfigError(
            f"{where}: runtime.exec_env_passthrough must be a list of variable names",
            hint="e.g. exec_env_passthrough: [GITHUB_TOKEN]",
        )
