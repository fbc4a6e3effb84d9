"""The spend plane: what each agent spent, the budgets that bound it, and the
no-progress guard.

- :mod:`.spend`  the spend ledger, its roll-up along the lineage, budget checks
- :mod:`.guard`  the no-progress guard
"""
