"""The memory plane: what an agent can recall beyond its prompt.

- :mod:`.sources`  the documents the search index is derived from (the
  agent's memory files, briefs, work items with plan and completion report,
  archived context episodes), each with the ``workspace_id`` its record
  carries;
- :mod:`.search`   keeping the index in step with those sources, and the
  ``MemorySearch`` / ``MemoryGet`` semantics shared by the tools and
  ``holon memory``.

The index itself (SQLite FTS5, CJK bigrams) is :mod:`holon_cli.store.memory_index`.
"""
