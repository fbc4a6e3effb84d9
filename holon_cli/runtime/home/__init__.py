"""Home maintenance: the steps behind ``holon home``.

- :mod:`.checks`  ``holon home check`` (read-only findings)
- :mod:`.repair`  ``holon home check --repair``
- :mod:`.audit`   ``holon home audit`` (the liveness audit)
- :mod:`.gc`      ``holon home gc`` (retention; serve runs it daily)
"""
