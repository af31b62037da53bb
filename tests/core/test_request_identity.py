"""How the guard tells requests apart: idempotent methods presented on every delivery, an
id reused for something else refused, the parameters' fingerprint blind to key order and
to values JSON cannot encode, and a request that outlives its stream still ending once."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from core_support import GET, POST, SESSION, cancel, elicit, make_guard

from fsm import SubmissionResult
from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Refuse, Withdraw

K1 = (SESSION, 1)


def _request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def test_an_idempotent_request_is_presented_on_every_delivery(engine: str) -> None:
    guard = make_guard(engine)
    ping = _request(1, "ping", {"x": 1})
    for eid in ("e1", "e2"):
        assert guard.feed(ev.SseEvent(POST, ping, eid)) == (Present(K1, "ping", {"x": 1}),)
    assert guard.state_of(K1) is None  # not tracked: nothing to de-duplicate


def test_an_idempotent_request_reusing_a_tracked_id_is_refused(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    assert guard.feed(ev.SseEvent(POST, _request(1, "roots/list"), "e2")) == (
        Ignore("id-reused", f"{K1!r} redelivered with other method", key=K1),
    )


def test_a_request_without_params_is_tracked_and_deduplicated(engine: str) -> None:
    guard = make_guard(engine)
    bare = _request(1, "elicitation/create")
    assert guard.feed(ev.SseEvent(POST, bare, "e1")) == (Present(K1, "elicitation/create", None),)
    for replayed in (None, True):  # a replay asks the liveness oracle, which reads params
        (again,) = guard.feed(ev.SseEvent(POST, bare, "e2", replayed=replayed))
        assert isinstance(again, Ignore) and again.reason == "duplicate-delivery"


@pytest.mark.parametrize(
    ("first", "again"),
    [
        (
            {"message": "Delete?", "schema": {"a": 1, "b": 2}},
            {"schema": {"b": 2, "a": 1}, "message": "Delete?"},
        ),
        (
            {"message": "Pay", "amount": Decimal("1.10")},
            {"amount": Decimal("1.10"), "message": "Pay"},
        ),
    ],
    ids=["key-order", "non-json-values"],
)
def test_a_redelivery_with_the_same_params_is_a_duplicate(
    engine: str, first: dict[str, Any], again: dict[str, Any]
) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, _request(1, "elicitation/create", first), "e1"))
    (dup,) = guard.feed(ev.SseEvent(POST, _request(1, "elicitation/create", again), "e2"))
    assert isinstance(dup, Ignore) and dup.reason == "duplicate-delivery"


def test_the_capacity_error_says_how_many_and_the_limit(engine: str) -> None:
    guard = make_guard(engine, max_live_requests=1)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    (refuse,) = guard.feed(ev.SseEvent(POST, elicit(2), "e2"))
    assert isinstance(refuse, Refuse) and refuse.key == (SESSION, 2)
    assert str(refuse.error) == (
        f"1 live requests (max_live_requests=1); refusing {(SESSION, 2)!r}"
    )


def test_a_request_without_origin_ends_once_even_when_the_session_dies_later(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(GET, elicit(1), "g1"))
    guard.feed(ev.UserAnswered(K1, {"action": "accept"}))
    done = guard.feed(ev.SubmissionOutcome(K1, SubmissionResult(202)))
    assert Complete(f"{GET}#1") in done
    later = guard.feed(ev.SessionExpired())
    assert not [a for a in later if isinstance(a, (Fail, Complete)) and a.interaction == f"{GET}#1"]


def test_a_request_outliving_its_evicted_stream_still_ends_once(engine: str) -> None:
    guard = make_guard(engine, max_streams=2, streams=[("g1", None)])
    guard.feed(ev.SseEvent("g1", elicit(1)))
    guard.feed(ev.StreamLost("g1", clean=True))  # no event id: the stream dies, not the request
    guard.feed(ev.StreamOpened("g2", None))
    guard.feed(ev.StreamOpened("g3", None))  # evicts the dead g1
    assert guard.stream_state("g1") is None and guard.state_of(K1) == "presented"
    acts = guard.feed(ev.SseEvent("g2", cancel(1)))
    assert [type(a) for a in acts] == [Withdraw, Fail]
    assert acts[1].interaction == "g1#1"  # type: ignore[union-attr]
