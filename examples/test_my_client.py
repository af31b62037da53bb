"""Test your client with the conformance kit: hypothesis plays server, network and user.

The kit drives any object with ``feed(event) -> actions`` (the guard's vocabulary,
fsm.events and fsm.actions) and checks P1-P7 and termination after every step. A client
with its own API gets a thin shim; this one embeds fsm.Guard and keeps its own dialogs,
so its ``feed`` is the shim.

Two tests: the client passes the kit; and a variant of it that shows every delivery of a
request, replays included, is caught (the kit raises ConformanceFailure naming the
property, after hypothesis has shrunk the program that breaks it).

Run: pytest examples/test_my_client.py   (needs the testing extra: hypothesis)
"""

import pytest
from hypothesis.stateful import run_state_machine_as_test

from fsm import Guard
from fsm import actions as act
from fsm.testing import ConformanceFailure, ConformanceTests, conformance_machine, kit_settings


class DialogClient:
    """A client that shows the guard's prompts as dialogs.

    ``show_replays=True`` is the bug under test: it also shows a request the guard
    ignored as a repeated delivery (a replay after a resume, or a duplicate).
    """

    def __init__(self, clock, show_replays=False):
        self.guard = Guard(clock=clock)  # the kit's clock: hypothesis moves it
        self.show_replays = show_replays
        self.asked = {}  # request key -> (method, params), every request ever shown
        self.dialogs = set()  # keys on screen

    def feed(self, event):
        actions = list(self.guard.feed(event))
        for action in list(actions):
            if isinstance(action, act.Present):
                self.asked[action.key] = (action.method, action.params)
                self.dialogs.add(action.key)
            elif isinstance(action, act.Withdraw):
                self.dialogs.discard(action.key)
            elif (
                self.show_replays
                and isinstance(action, act.Ignore)
                and action.reason == "duplicate-delivery"
                and action.key in self.asked
            ):
                actions.append(act.Present(action.key, *self.asked[action.key]))
        return actions  # what the client did: the kit checks it


class TestDialogClient(ConformanceTests):
    """pytest collects this: one test, ``test_conformance``, that must pass."""

    client_factory = DialogClient  # factory(clock) -> client


def test_the_kit_catches_a_client_that_shows_replays():
    machine = conformance_machine(lambda clock: DialogClient(clock, show_replays=True))
    with pytest.raises(ConformanceFailure) as failure:
        run_state_machine_as_test(machine, settings=kit_settings())
    assert failure.value.name in {"P1", "P2"}  # shown twice, or shown after it died
