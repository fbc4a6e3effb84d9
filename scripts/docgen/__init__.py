"""The renderers behind ``scripts/gen_docs.py``: each module turns one
source in the code (the click tree, the config schema, the event model, the
HTTP route table, the error tree, the tool catalog) into Markdown pages for
``docs/reference/`` and roff for ``man/``. Every renderer is a pure function
of the code: no dates, no versions, a fixed order, so a rerun writes the
same bytes and ``tests/cli/test_docs_drift.py`` fails only when the code
changed."""
