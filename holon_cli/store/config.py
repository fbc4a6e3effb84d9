"""``$HOLON_HOME/config.yaml``: load it and validate it against the schema.

Precedence is flag > environment > config > built-in default; this module
only reads the file. The schema (one dataclass per section) and the checks
live in :mod:`holon_cli.store.config_schema`, imported only when there is a
file to check: a home without ``config.yaml`` reads as ``{}`` for free.

A checked file is remembered in ``run/config.cache.json`` (the SHA-256 of
its bytes, the release that checked it, the mapping as JSON), so the next
process that finds the same bytes skips PyYAML and the schema (~20 ms of
imports a command). The cache is only a cache: never fsync'd, written
atomically, ignored when unreadable, stale or of another release, and
skipped for a file whose values JSON cannot carry unchanged (a YAML date).

``load_config`` returns the checked mapping as written, typed as the
schema's :class:`HolonConfig` (readers use ``cfg.get("runtime") or {}``);
``load_settings`` returns it with every number a float key names as a float.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli.errors import ConfigError
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig


CACHE_NAME = "config.cache.json"
_cache: dict[str, tuple[float, int, HolonConfig]] = {}


def load_config(layout: HomeLayout | None = None) -> HolonConfig:
    """The validated config mapping (``{}`` when there is no file)."""
    layout = layout or HomeLayout.current()
    path = layout.config
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        raise ConfigError(
            f"{layout.root} is not a folder (HOLON_HOME must name a folder)",
            hint="point HOLON_HOME at a folder, or unset it to use ~/.holon",
        ) from None
    key = str(path)
    hit = _cache.get(key)
    if hit and hit[0] == st.st_mtime and hit[1] == st.st_size:
        return hit[2]
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot be read ({exc.strerror or exc})",
            hint="config.yaml must be a readable file",
        ) from None
    data = _cached(layout, raw)
    if data is None:
        data = _parse(path, raw)
        _remember(layout, raw, data)
    _cache[key] = (st.st_mtime, st.st_size, data)
    return data


def _parse(path: Path, raw: bytes) -> HolonConfig:
    """PyYAML, then the schema: the mapping, or a ``ConfigError`` naming the problem."""
    import yaml

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid UTF-8 (byte {exc.start})", hint="save config.yaml as UTF-8"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path}: invalid YAML ({exc})", hint="fix the syntax in config.yaml"
        ) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # e.g. `2001-13-01` is a YAML timestamp with an impossible month
        raise ConfigError(
            f"{path}: a value cannot be read ({exc})",
            hint="quote values that are not numbers or dates, e.g. `key: '2001-13-01'`",
        ) from None
    if data is None:
        data = {}
    from holon_cli.store.config_schema import validate_config

    return validate_config(data, str(path))


# ------------------------------------------------- the cache of checked files


def _cache_file(layout: HomeLayout) -> Path:
    return layout.run_dir / CACHE_NAME


def _digest(raw: bytes) -> str:
    # the built-in SHA-256 (holon_cli.digest): hashlib loads OpenSSL, ~5 ms of
    # every command that reads a config.yaml
    from holon_cli import __version__
    from holon_cli.digest import sha256_hex

    return f"{__version__}:{sha256_hex(raw)}"


def _cached(layout: HomeLayout, raw: bytes) -> HolonConfig | None:
    """The mapping checked before for exactly these bytes (by this release:
    it is not checked again), or ``None``."""
    try:
        rec = json.loads(_cache_file(layout).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("digest") != _digest(raw):
        return None
    data: HolonConfig | None = rec.get("config")
    return data if isinstance(data, dict) else None


def _remember(layout: HomeLayout, raw: bytes, data: HolonConfig) -> None:
    """Best effort: a home we cannot write to (read-only, full) just skips it."""
    try:
        body = json.dumps({"digest": _digest(raw), "config": data}, allow_nan=False)
    except (TypeError, ValueError):  # a date, a set, a NaN: YAML-only values
        return
    if json.loads(body)["config"] != data:  # e.g. non-string keys: not the same mapping
        return
    target = _cache_file(layout)
    tmp = target.with_name(f".{CACHE_NAME}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # 0600 whatever the umask: the config may hold a control_token
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, 0o600)
            f.write(body.encode("utf-8"))
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def load_settings(layout: HomeLayout | None = None) -> HolonConfig:
    """The config as typed sections (unset keys are ``None``)."""
    from holon_cli.store.config_schema import HolonConfig, build

    return build(HolonConfig, load_config(layout))


def __getattr__(name: str) -> Any:
    # the schema's names (known_keys, HolonConfig, TRANSPORTS, ...) through
    # this module too, loaded on first use (never for a dunder: the import
    # system asks for ``__path__`` on every ``from ... import``)
    if name.startswith("__"):
        raise AttributeError(name)
    from holon_cli.store import config_schema

    try:
        return getattr(config_schema, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
