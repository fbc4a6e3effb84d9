"""The spend plane: what each agent spent, the budgets that bound it, and the
no-progress guard.

- :mod:`.spend`    the spend ledgers (each agent's, rolled up the lineage, and
                   the home's record), the configured limits, what was used
- :mod:`.check`    the scopes a request is checked against (agent and
                   ancestors, a run's bound, ``budgets.home``), the output
                   cap, holds (:func:`.check.holds`), the brief's words
- :mod:`.reserve`  reservations of requests in flight (crash-safe)
- :mod:`.runs`     ``holon run --max-tokens / --max-cost`` bounds
- :mod:`.guard`    the no-progress guard
"""
