"""The source of a small model file, for tests that write one and run ``fsm`` on it: a
counter from 0 to 3 (``inc``), its properties and any more methods given."""

from __future__ import annotations

__all__ = ["counter_model"]

_COUNTER = """
from fsm.checker import BaseModel, Property
{prelude}

class {cls}(BaseModel):
    name = {name!r}

    def init_states(self):
        return [0]

    def actions(self, s):
        return ["inc"] if s < 3 else []

    def next_state(self, s, a):
        return s + 1

    def properties(self):
        return {properties}
{methods}

MODEL = {cls}()
"""


def counter_model(
    cls: str, name: str, properties: str, *, methods: str = "", prelude: str = ""
) -> str:
    """A model file's source: class ``cls`` named ``name``, whose ``properties()``
    returns the expression ``properties``; ``methods`` (indented as a class body) follow
    it, ``prelude`` (module level) precedes the class; ``MODEL`` is its instance."""
    return _COUNTER.format(
        cls=cls, name=name, properties=properties, methods=methods, prelude=prelude
    )
