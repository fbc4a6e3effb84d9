"""``holon serve --engine dbos``: workers coordinated by DBOS Transact on
Postgres.

- :mod:`.engine`  the scheduler: DBOS workflows, queues and wakes
- :mod:`.workers` the workers' heartbeat table, the dead ones' recovery
- :mod:`.database` the database URL, how it is shown, the check before start
- :mod:`.steps`   the step records of a pass (each round, tool call, turn end)
- :mod:`.compat`  every use of a DBOS private name (the one seam)

Imports nothing heavy itself; ``dbos`` is imported by the modules below.
"""
