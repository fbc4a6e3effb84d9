"""holon-cli: a headless, event-driven runtime for long-lived LLM agents.

Layers (imports only go downward; ``tests/test_layers.py`` checks it):
``errors``/``kinds``/``clock`` -> ``model`` (pure values) -> ``store`` (the only
code touching the home) -> ``providers`` -> ``runtime`` (the planes and one
module per step) -> ``tools`` (model-facing adapters onto the planes; the turn
is handed the catalog) -> ``serve`` -> ``cli`` (click + rendering only).
"""

__version__ = "0.1.0"
