"""The child-agent plane: ``SpawnAgent``'s children and their supervision
through the parent's task plane (runtime spec: Agent Identity And
Visibility, Background Task Recovery, Worktree-Isolated Child Delegation).

Files (in the PARENT's home): ``.holon/tasks/<task_id>/task.json`` is the
``child_agent_task`` supervision handle (no process of its own: the command
task recovery leaves it alone); ``.holon/ledger/delegations.jsonl`` holds one
``started`` record per spawn (with the work item in focus then) and one
``completed`` record when the child's ONE ``task_result`` was admitted.
The child is an ordinary agent folder (``kind: child``, private,
parent-supervised, ``lineage_parent_agent_id``, ``supervision_task_id``).

Invariants:
- a child's terminal closure admits exactly ONE ``task_result`` into its
  parent: :func:`supervision.report_child` runs under the handle's lock,
  checks ``result_message_id`` and admits with an idempotency key derived
  from the handle, so a kill between the admission and the record write
  cannot double it; every pass (the child's turn, the parent's and the
  child's tick) may call it;
- a child is never erased while its handle lives; it is archived (stopped,
  ``archived_at``) only when its handle is missing or final;
- a child takes no operator or external ingress (``model.agent.
  is_supervised_child``: admission refuses it), sends to no other child and
  spawns no child.

Modules: ``spawn`` (SpawnAgent for both presets), ``supervision`` (the
observability snapshot, terminal detection, the ONE result, the tick
sweeps), ``handle`` (the task tools on a handle: status, output, input,
stop; active children), ``worktree`` (task-owned git worktrees).
"""
