"""The call spine's fallback cause (``fsm/machines/call.py``), pinned where ``make mutate``
found it unpinned: a call whose own instance ends failed without a recorded cause still
ends once, with a typed error that names the call and the trigger.

The shipped eras always record a cause before they end a call, so only the product's
own ``kill`` with no cause reaches this; a new era that forgot one would."""

from __future__ import annotations

from fsm.actions import Fail
from fsm.errors import InteractionFailed
from fsm.mrtr.call import MrtrCall


def test_a_call_ended_without_a_cause_fails_naming_the_call_and_its_trigger() -> None:
    call = MrtrCall("c", clock=lambda: 0.0)
    call._run.kill(call._own, "reject", None)
    (fail,) = call._flush()
    assert isinstance(fail, Fail) and fail.interaction == "c"
    assert type(fail.error) is InteractionFailed
    assert str(fail.error) == "c reject"
    assert fail.error.key is None and fail.error.evidence == () and fail.error.reason == "failed"
    assert fail.error.stream == "c"
    assert call._flush() == ()  # ended once
