"""``holon serve --engine dbos``: workers coordinated by DBOS Transact on
Postgres.

- :mod:`.engine`  the scheduler: DBOS workflows, queues and wakes
- :mod:`.steps`   the step records of a pass (each round, tool call, turn end)
- :mod:`.compat`  every use of a DBOS private name (the one seam)

Imports nothing heavy itself; ``dbos`` is imported by the modules below.
"""
