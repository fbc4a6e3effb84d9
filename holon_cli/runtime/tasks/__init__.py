"""The task plane (command tasks): see :mod:`holon_cli.runtime.tasks.plane`.

Submodules: ``procs`` (process identity, env rule, tree stop), ``output``
(bounded previews), ``supervisor`` (the per-command supervisor process),
``plane`` (the facade over ``records``, ``launch``, ``control``, ``recovery``)."""
