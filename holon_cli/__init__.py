"""holon-cli: a headless, event-driven runtime for long-lived LLM agents.

Layers (imports only go downward; ``tests/test_layers.py`` checks it):
``errors``/``kinds``/``clock`` -> ``model`` (pure values) -> ``store`` (the only
code touching the home) -> ``providers`` -> ``runtime`` (the planes and one
module per step) -> ``tools`` (model-facing adapters onto the planes; the turn
is handed the catalog) -> ``serve`` -> ``cli`` (click + rendering only).
"""

__version__ = "0.1.0"

from holon_cli.cpython_seam import cache_forward_ref_code  # noqa: E402

# before any record type is defined: each TypedDict field compiles its string
cache_forward_ref_code()
