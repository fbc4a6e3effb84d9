"""httpx2 and httpcore2 imported without ``importlib.metadata`` (a seam over
what the two packages run at import, not over their API).

Both packages' ``__init__`` ask ``importlib.metadata.version(<own name>)``
for their ``__version__``. The first such call imports
``importlib.metadata`` (with ``email``, ``zipfile``, ``csv`` and
``importlib.resources`` behind it) and scans every ``sys.path`` entry for
distributions: about 20 ms of CPU a ``holon run`` or ``holon turn`` pays
before its first request, for two strings.

:func:`load` imports the two packages with a small stand-in for
``importlib.metadata`` in ``sys.modules`` whose ``version(name)`` reads the
``Version:`` line of ``<name>-*.dist-info/METADATA`` beside the package
being imported, and takes the stand-in out again. Nothing is lost:

- a distribution it cannot place (no ``dist-info`` beside the package, two
  of them, no ``Version:`` line) is answered by the real
  ``importlib.metadata.version``;
- any other name asked of the stand-in (a release that imports
  ``PackageNotFoundError`` or ``distribution``) imports the real module
  and answers from it;
- another thread that imports ``importlib.metadata`` while the stand-in is
  there gets the stand-in, whose every other name is the real module's
  (asking one puts the real module in ``sys.modules`` for good, under a
  lock); once the real module is loaded, :func:`load` is a plain import.

Contract (``tests/providers/test_httpx2_import.py``, fresh interpreters):
after :func:`load`, ``importlib.metadata`` is not loaded, both packages are,
and their ``__version__`` equals what the real ``importlib.metadata`` says.
"""

from __future__ import annotations

import os
import sys
import threading
from types import ModuleType

NAME = "importlib.metadata"
_lock = threading.Lock()


def load() -> None:
    """Import ``httpcore2`` and ``httpx2`` (see the module docstring)."""
    if "httpx2" in sys.modules and "httpcore2" in sys.modules:
        return
    stand_in = place_stand_in()
    try:
        import httpcore2  # noqa: F401
        import httpx2  # noqa: F401
    finally:
        if stand_in is not None:
            with _lock:
                if sys.modules.get(NAME) is stand_in:
                    del sys.modules[NAME]


def place_stand_in() -> ModuleType | None:
    """Put the stand-in in ``sys.modules`` and return it; None (nothing
    done) when ``importlib.metadata`` is loaded already."""
    stand_in = ModuleType(NAME)
    stand_in.__dict__["version"] = version
    stand_in.__dict__["__getattr__"] = _real_attribute
    with _lock:
        return stand_in if sys.modules.setdefault(NAME, stand_in) is stand_in else None


def version(name: str) -> str:
    """The version of the distribution ``name`` whose package is being (or
    was) imported, from its ``METADATA``; else the real lookup's answer."""
    found = _dist_info_version(name)
    if found is not None:
        return found
    return str(_real().version(name))


def _dist_info_version(name: str) -> str | None:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None)
    if not origin:
        return None
    site = os.path.dirname(os.path.dirname(origin))
    prefix = name.replace("-", "_").lower() + "-"
    try:
        infos = [
            e for e in os.listdir(site) if e.lower().startswith(prefix) and e.endswith(".dist-info")
        ]
    except OSError:
        return None
    if len(infos) != 1:
        return None
    try:
        with open(os.path.join(site, infos[0], "METADATA"), encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the end of the headers
                key, sep, value = line.partition(":")
                if sep and key.strip().lower() == "version":
                    return value.strip() or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _real() -> ModuleType:
    with _lock:
        current = sys.modules.get(NAME)
        if current is not None and current.__dict__.get("version") is version:
            del sys.modules[NAME]  # the real module replaces the stand-in for good
        import importlib.metadata

        return importlib.metadata


def _real_attribute(attr: str) -> object:
    if attr.startswith("__"):
        # the import system asks a module for ``__path__`` (is it a
        # package?) on every ``from ... import``: the stand-in is a module
        raise AttributeError(attr)
    return getattr(_real(), attr)
