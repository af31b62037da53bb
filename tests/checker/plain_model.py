"""A model with no bounds (not a world): what ``fsm check --set`` refuses."""

from fsm.checker import BaseModel, Property


class Plain(BaseModel[int, str]):
    """One state, no move, one invariant."""

    def init_states(self) -> list[int]:
        return [0]

    def actions(self, state: int) -> list[str]:
        return []

    def properties(self) -> list[Property[int]]:
        return [Property.always("P", lambda s: True)]


MODEL = Plain()
