"""One module per runtime step. Steps never print: they return result values
that ``cli/``, ``holon serve`` and the model's tools all share."""
