"""The operator console ``holon tui``: session.py (what it knows, no Textual), script.py
(``--script``), views.py (overlay text), app.py (the Textual app, the ``tui`` extra)."""
