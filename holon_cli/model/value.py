"""The base of the plain value classes on the start-up paths.

``holon run``, ``enqueue``, ``status`` and ``workitem list`` import no
``dataclasses`` (ARCHITECTURE, "Start-up"): ``@dataclass`` generates each
class's methods with ``exec`` when the module is imported, about 0.4 ms a
class, and the module itself brings ``inspect`` and ``ast``. A value class
there writes its ``__init__`` and derives from :class:`Value`, which gives it
what ``@dataclass`` would have: equality (same class, same fields) and a
``repr`` naming the fields. Fields are the attributes ``__init__`` sets, in
that order. Like a mutable dataclass, a value is not hashable. An immutable
value is a ``NamedTuple`` instead.
"""

from __future__ import annotations


class Value:
    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # mutable: as @dataclass(eq=True)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__qualname__}({fields})"
