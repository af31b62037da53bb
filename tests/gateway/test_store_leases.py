"""Claims held under a lease keep the contract of :mod:`fsm.gateway.store`.

A replica that claims a server request holds the claim as its ``owner`` for ``lease_s``
and renews it while the request awaits its answer; a replica that lost the claim watches
it with ``claim_status`` and ends the call when the lease lapses with no answer stored.
The suite runs on :class:`MemoryStore` (its injected clock moved) and on
:class:`RedisStore` against a real ``redis-server`` on 127.0.0.1, where time is moved by
shortening the keys' TTLs in Redis ("as if that long had passed") and, once, by letting
Redis's own clock expire a short lease (polled, never slept on). Then what only Redis
has: the lease key's TTL, round trips, and failing closed.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio
import pytest
from shared_state import Clock, Shared

from fsm.gateway.redis_store import RedisStore
from fsm.gateway.store import (
    DEFAULT_LEASE_S,
    MAX_OPEN_CLAIMS,
    ClaimLapsedError,
    ClaimStatus,
    Cursor,
    MemoryStore,
    StoreUnavailableError,
)
from support.redis_server import RedisServer, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LEASE_S = 10.0
"""The lease of the conformance tests: time moves in whole seconds around it."""


@pytest.fixture(params=["memory", "redis"])
async def shared(request: pytest.FixtureRequest) -> AsyncIterator[Shared]:
    url = None if request.param == "memory" else str(request.getfixturevalue("server").url)
    state = Shared(url)
    yield state
    await state.aclose()


def status(
    *,
    claimed: bool = True,
    owner: str | None = "a",
    lapsed: bool = False,
    answer: Any = None,
    submitted: bool = False,
    lease_lapsed: bool | None = None,
) -> ClaimStatus:
    """A claim's expected status; its lease lapsed as ``lapsed`` says unless told."""
    return ClaimStatus(
        claimed=claimed,
        owner=owner,
        lapsed=lapsed,
        answer=answer,
        submitted=submitted,
        lease_lapsed=lapsed if lease_lapsed is None else lease_lapsed,
    )


# ------------------------------------------------------------------ conformance


async def one_of_fifty_wins(
    replicas: list[Any],
    request_id: Any,
    race: Callable[[Any, Any, str], Awaitable[bool]],
) -> None:
    """Fifty owners (``r0``..``r49``) race for ``request_id`` of session ``s`` on two
    replicas, each through ``race(store, request_id, owner)``: exactly one wins, the
    claim's status names it, and it alone renews the lease."""
    won = await asyncio.gather(*(race(replicas[n % 2], request_id, f"r{n}") for n in range(50)))
    assert won.count(True) == 1, (request_id, won)
    winner = f"r{won.index(True)}"
    assert await replicas[1].claim_status("s", request_id) == status(owner=winner)
    renewed = await asyncio.gather(
        *(replicas[n % 2].renew("s", request_id, f"r{n}", LEASE_S) for n in range(50))
    )
    assert renewed == [f"r{n}" == winner for n in range(50)]


async def test_a_claim_won_with_a_lease_is_held_by_its_owner(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    assert await two.claim_status("s", 1) == status()
    assert await two.claim("s", 1, owner="b", lease_s=LEASE_S) is False  # changes no lease
    assert await one.claim_status("s", 1) == status()
    assert await two.renew("s", 1, "b", LEASE_S) is False
    assert await two.claim_status("s", "1") == status(claimed=False, owner=None)
    with_cursor = await two.claim(
        "s", 2, stream="get", cursor=Cursor(3, "ev3"), owner="b", lease_s=LEASE_S
    )
    assert with_cursor is True
    assert await one.claim_status("s", 2) == status(owner="b")
    assert await one.cursor_of("s", "get") == Cursor(3, "ev3")


async def test_the_owner_renews_its_lease_and_no_one_else_does(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await shared.advance(8)
    assert await two.renew("s", 1, "b", LEASE_S) is False  # another owner
    assert await two.renew("s", 2, "a", LEASE_S) is False  # no claim
    assert await one.renew("s", 1, "a", LEASE_S) is True
    await shared.advance(8)  # 16 s after the claim, 8 after the renewal
    assert await two.claim_status("s", 1) == status()
    assert await one.renew("s", 1, "a", LEASE_S) is True
    await shared.advance(9)
    assert await two.claim_status("s", 1) == status()
    await shared.advance(2)  # 11 s after the last renewal
    assert await two.claim_status("s", 1) == status(lapsed=True)


async def test_a_lease_not_renewed_lapses_for_good(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await shared.advance(9)
    assert (await two.claim_status("s", 1)).lapsed is False
    await shared.advance(2)
    assert await two.claim_status("s", 1) == status(lapsed=True)
    assert await one.renew("s", 1, "a", LEASE_S) is False  # a lapsed lease is not revived
    assert await two.claim("s", 1, owner="b", lease_s=LEASE_S) is False  # never presented again
    assert await one.claim("s", 1) is False
    assert await two.claim_status("s", 1) == status(lapsed=True)


async def test_an_answer_stored_settles_the_claim(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept", "content": {"n": 1}}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    assert await one.claim("s", 2, owner="a", lease_s=LEASE_S) is True
    await one.save_answer("s", 1, answer)  # answered in time, then the owner died
    await shared.advance(LEASE_S + 1)
    assert await two.claim_status("s", 1) == status(answer=answer, lease_lapsed=True)
    assert await two.claim_status("s", 2) == status(lapsed=True)
    await two.save_answer("s", 2, answer)  # an answer that comes late still settles it
    assert await two.claim_status("s", 2) == status(answer=answer, lease_lapsed=True)


async def test_a_submission_marked_settles_the_claim_for_every_replica(shared: Shared) -> None:
    """``mark_submitted``: any replica reads the mark, with the answer, whether the
    holder's lease holds or lapsed (``lease_lapsed`` says which: a watcher of an
    unmarked answer submits it only once the holder is gone). A mark settles the claim
    as an answer does (``lapsed`` stays ``False``: the submission went, even with no
    answer kept ahead); it is idempotent, never revives a lease, and the claim still
    never presents again."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept"}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    assert await one.claim("s", 2, owner="a", lease_s=LEASE_S) is True
    await one.save_answer("s", 1, answer)
    assert await two.claim_status("s", 1) == status(answer=answer)  # not yet marked
    assert await one.mark_submitted("s", 1) is True
    assert await two.claim_status("s", 1) == status(answer=answer, submitted=True)
    assert await two.mark_submitted("s", 1) is True  # idempotent, by any replica
    assert await one.mark_submitted("s", 2) is True  # submitted, its answer not kept ahead
    await shared.advance(LEASE_S + 1)  # the holder stopped renewing: its lease lapsed
    got = await two.claim_status("s", 1)
    assert got == status(answer=answer, submitted=True, lease_lapsed=True)
    assert await two.claim_status("s", 2) == status(submitted=True, lease_lapsed=True)
    assert await one.renew("s", 1, "a", LEASE_S) is False  # a mark revives no lease
    assert await two.claim("s", 1, owner="b", lease_s=LEASE_S) is False
    assert await two.claim_status("s", "1") == status(claimed=False, owner=None)  # str:1


async def test_a_mark_on_a_request_never_claimed_writes_nothing(shared: Shared) -> None:
    """A mark stands for a claim's submission: for a request with no claim (never
    claimed, or its claim expired) ``mark_submitted`` is ``False`` and records nothing,
    so a claim won later (the server asks that id after all) is not born submitted and
    its stored answer is still submitted by a survivor."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.mark_submitted("s", 1) is False
    assert await one.mark_submitted("other session", 1) is False
    assert await two.claim("s", 1, owner="b", lease_s=LEASE_S) is True
    assert await one.claim_status("s", 1) == status(owner="b")


async def test_a_mark_lives_as_its_claim_does(shared: Shared) -> None:
    """The mark is written with the claim's TTL, and refreshes it: the two expire
    together, ``ttl_s`` (an hour by default) after the mark, not before."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await shared.advance(3000)
    assert await two.mark_submitted("s", 1) is True  # 3000 s after the claim
    await shared.advance(3000)  # the claim alone would have expired 2400 s ago
    assert await two.claim_status("s", 1) == status(submitted=True, lease_lapsed=True)
    await shared.advance(601)
    assert await two.claim_status("s", 1) == status(claimed=False, owner=None)
    assert await two.mark_submitted("s", 1) is False  # expired with its claim


async def test_a_mark_lives_on_with_the_claim_its_holder_renews(shared: Shared) -> None:
    """A holder whose prompt another replica answered and marked goes on renewing its
    lease until the call ends: each renewal keeps the mark with the claim, however long
    past ``ttl_s`` after the mark, so the claim never reads lapsed and unmarked."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1, owner="a", lease_s=1000) is True
    assert await two.mark_submitted("s", 1) is True
    for _ in range(5):  # 4500 s in all: past the hour the mark was written with
        await shared.advance(900)
        assert await one.renew("s", 1, "a", 1000) is True
    assert await two.claim_status("s", 1) == status(owner="a", submitted=True)


async def test_a_lapsed_unmarked_claim_is_taken_over_by_one_new_owner(shared: Shared) -> None:
    """``take_over``: a claim whose holder stopped (lease lapsed, not marked) gets a new
    owner under a new lease, once: a second taker finds the lease live again and gets
    ``False``. The new owner renews it as a claimer does (the old owner no longer can),
    its answer stays stored, and when the new owner stops too the next survivor takes it
    over in turn. The request is never presented again."""
    one, two, three = shared.replica(), shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept"}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await one.save_answer("s", 1, answer)
    await shared.advance(LEASE_S + 1)  # the holder died after the 202
    assert await two.claim_status("s", 1) == status(answer=answer, lease_lapsed=True)
    assert await two.take_over("s", 1, "b", LEASE_S) is True
    assert await three.claim_status("s", 1) == status(owner="b", answer=answer)
    assert await three.take_over("s", 1, "c", LEASE_S) is False  # b's lease holds
    assert await one.renew("s", 1, "a", LEASE_S) is False  # the old owner's is gone
    await shared.advance(8)
    assert await two.renew("s", 1, "b", LEASE_S) is True
    await shared.advance(8)  # 16 s after the take-over, 8 after the renewal
    assert await three.take_over("s", 1, "c", LEASE_S) is False
    assert await three.claim_status("s", 1) == status(owner="b", answer=answer)
    await shared.advance(LEASE_S + 1)  # b died too, mid-submission
    assert await three.take_over("s", 1, "c", LEASE_S) is True
    assert await one.claim_status("s", 1) == status(owner="c", answer=answer)
    assert await two.renew("s", 1, "b", LEASE_S) is False
    assert await three.mark_submitted("s", 1) is True
    got = await one.claim_status("s", 1)
    assert got == status(owner="c", answer=answer, submitted=True)
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is False


async def test_a_take_over_is_refused_unless_the_lease_lapsed_unmarked(shared: Shared) -> None:
    """``take_over`` is ``False`` and changes nothing for a claim whose lease holds, one
    marked submitted (lapsed or not), one won without a lease, one never claimed (another
    id, ``"1"`` for ``1``, another session) and one expired with its TTL."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    assert await one.claim("s", 2, owner="a", lease_s=LEASE_S) is True
    assert await one.claim("s", 3) is True  # no lease: never lapses, never taken over
    assert await one.claim("s", 4, owner="a", lease_s=LEASE_S) is True
    assert await one.mark_submitted("s", 2) is True
    assert await two.take_over("s", 1, "b", LEASE_S) is False  # its holder lives
    assert await two.take_over("s", 2, "b", LEASE_S) is False
    await shared.advance(LEASE_S + 1)
    assert await one.mark_submitted("s", 4) is True  # marked after the lapse: settled too
    for request_id in (2, 3, 4, "1", 5):
        before = await two.claim_status("s", request_id)
        assert await two.take_over("s", request_id, "b", LEASE_S) is False, request_id
        assert await two.claim_status("s", request_id) == before
    assert await two.take_over("other session", 1, "b", LEASE_S) is False
    assert await two.claim_status("s", 2) == status(submitted=True, lease_lapsed=True)
    await shared.advance(3600)  # the claim expired
    assert await two.take_over("s", 1, "b", LEASE_S) is False
    assert await two.claim_status("s", 1) == status(claimed=False, owner=None)


async def test_concurrent_takers_of_a_dead_holders_claim_one_wins(shared: Shared) -> None:
    """Every survivor that finds the dead holder's answer tries ``take_over`` at once:
    exactly one wins and owns the claim; only the winner can renew it."""
    replicas = [shared.replica(), shared.replica()]
    await replicas[0].begin_session("s")
    for request_id in (1, "1", "req-2"):
        assert await replicas[0].claim("s", request_id, owner="dead", lease_s=LEASE_S)
    await shared.advance(LEASE_S + 1)
    for request_id in (1, "1", "req-2"):
        await one_of_fifty_wins(
            replicas,
            request_id,
            lambda store, rid, owner: store.take_over("s", rid, owner, LEASE_S),
        )


async def test_a_take_over_keeps_the_answer_as_long_as_the_claim(shared: Shared) -> None:
    """A take-over is a write of the claim (its TTL anew), of the stored answer's TTL and
    of the session record's: the new holder, and one after it, still find the answer to
    submit an hour later; the session's claims do not fail closed meanwhile."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept"}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await one.save_answer("s", 1, answer)
    await shared.advance(3000)  # the answer and the claim have 600 s left
    assert await two.take_over("s", 1, "b", LEASE_S) is True
    await shared.advance(3000)  # each would have expired 2400 s ago
    assert await two.claim_status("s", 1) == status(owner="b", answer=answer, lease_lapsed=True)
    assert await one.take_over("s", 1, "c", LEASE_S) is True
    assert await two.claim("s", 2) is True  # the session's record was kept too


async def test_an_answer_held_by_its_submitter_is_under_its_lease(shared: Shared) -> None:
    """``hold_answer``: a replica that takes the client's answer to a request another
    replica holds (alive) stores it and takes the claim's lease in one step: from then
    the holder's renewals are refused, no watcher can take the claim over while the
    submitter renews its lease, and its mark settles it. A submitter that dies leaves
    the stored answer under a lease that lapses: one survivor then takes it over, the
    old holder among the candidates."""
    one, two, three = shared.replica(), shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept"}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    assert await two.hold_answer("s", 1, answer, "b", LEASE_S) is True  # a lives
    assert await three.claim_status("s", 1) == status(owner="b", answer=answer)
    assert await one.renew("s", 1, "a", LEASE_S) is False  # answered elsewhere
    assert await three.take_over("s", 1, "c", LEASE_S) is False  # b submits it
    await shared.advance(8)
    assert await two.renew("s", 1, "b", LEASE_S) is True
    await shared.advance(8)  # 16 s after the hold, 8 after the renewal
    assert await three.take_over("s", 1, "c", LEASE_S) is False
    assert await one.take_over("s", 1, "a", LEASE_S) is False
    assert await three.claim_status("s", 1) == status(owner="b", answer=answer)
    await shared.advance(LEASE_S + 1)  # b died mid-submission
    assert await three.claim_status("s", 1) == status(owner="b", answer=answer, lease_lapsed=True)
    assert await two.renew("s", 1, "b", LEASE_S) is False  # lapsed: final for b
    assert await one.take_over("s", 1, "a", LEASE_S) is True  # the old holder sends it
    assert await three.take_over("s", 1, "c", LEASE_S) is False
    assert await one.mark_submitted("s", 1) is True
    got = await three.claim_status("s", 1)
    assert got == status(owner="a", answer=answer, submitted=True)
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is False  # never again


async def test_an_answer_held_after_the_holder_lapsed_takes_the_claim(shared: Shared) -> None:
    """``hold_answer`` on a claim whose holder's lease lapsed (no answer yet: the holder
    died with the prompt, and a replay brought it to the submitter) makes the submitter
    its holder as ``take_over`` would: a watcher's ``take_over`` is refused while the
    submitter's lease holds. Its TTLs are refreshed as a take-over's are."""
    one, two, three = shared.replica(), shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept"}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await shared.advance(3000)  # the lease lapsed; the claim has 600 s left
    assert await three.claim_status("s", 1) == status(lapsed=True)
    assert await two.hold_answer("s", 1, answer, "b", LEASE_S) is True
    assert await three.claim_status("s", 1) == status(owner="b", answer=answer)
    assert await three.take_over("s", 1, "c", LEASE_S) is False
    assert await one.renew("s", 1, "a", LEASE_S) is False
    await shared.advance(3000)  # each entry would have expired 2400 s ago
    got = await three.claim_status("s", 1)
    assert got == status(owner="b", answer=answer, lease_lapsed=True)
    assert await three.claim("s", 2) is True  # the session's record was kept too


async def test_an_answer_held_without_a_leased_unmarked_claim_is_kept_only(
    shared: Shared,
) -> None:
    """``hold_answer`` is ``False`` and gives no lease for a claim marked submitted (its
    lease live or lapsed), one won without a lease, one never claimed (another id,
    ``"1"`` for ``1``, another session) and one expired: the answer is kept all the same,
    as ``save_answer`` keeps it, and the claim's status is otherwise unchanged. A
    submitter that holds the claim already holds it again (its lease renewed). Bad lease
    terms and an answer that is not JSON are refused before anything is written."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    answer = {"action": "accept"}
    assert await one.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    assert await one.claim("s", 2, owner="a", lease_s=LEASE_S) is True
    assert await one.claim("s", 3) is True
    assert await one.mark_submitted("s", 1) is True
    await shared.advance(LEASE_S + 1)
    assert await one.claim("s", 4, owner="a", lease_s=LEASE_S) is True
    assert await one.mark_submitted("s", 2) is True  # marked after the lapse
    for request_id in (1, 2, 3, "1", 5):
        before = await two.claim_status("s", request_id)
        assert await two.hold_answer("s", request_id, answer, "b", LEASE_S) is False
        assert await two.claim_status("s", request_id) == replace(before, answer=answer)
    assert await two.hold_answer("other session", 4, answer, "b", LEASE_S) is False
    assert await one.answer_of("other session", 4) == answer
    for bad in ((answer, "", LEASE_S), (answer, "b", 0.0), (answer, "b", math.inf)):
        with pytest.raises(ValueError):
            await two.hold_answer("s", 4, *bad)
    if not isinstance(two, MemoryStore):  # the memory store keeps any object
        with pytest.raises(TypeError):
            await two.hold_answer("s", 4, {"x": object()}, "b", LEASE_S)
    assert await two.claim_status("s", 4) == status()
    assert await two.hold_answer("s", 4, answer, "b", LEASE_S) is True
    assert await two.hold_answer("s", 4, answer, "b", LEASE_S) is True  # held: again
    assert await one.claim_status("s", 4) == status(owner="b", answer=answer)
    await shared.advance(3600)  # the claim expired
    assert await two.hold_answer("s", 4, answer, "b", LEASE_S) is False
    got = await two.claim_status("s", 4)
    assert got == status(claimed=False, owner=None, answer=answer)


async def test_concurrent_submitters_holding_an_answer_one_holds_last(shared: Shared) -> None:
    """``hold_answer`` is one atomic step: of concurrent submitters each holds the claim
    in turn and the last one keeps it; only it renews the lease, and the status names it
    with the answer stored."""
    replicas = [shared.replica(), shared.replica()]
    await replicas[0].begin_session("s")
    assert await replicas[0].claim("s", 1, owner="holder", lease_s=LEASE_S)
    held = await asyncio.gather(
        *(replicas[n % 2].hold_answer("s", 1, {"n": n}, f"r{n}", LEASE_S) for n in range(20))
    )
    assert held == [True] * 20
    got = await replicas[1].claim_status("s", 1)
    assert got.owner is not None and got.answer == {"n": int(got.owner[1:])}
    renewed = await asyncio.gather(
        *(replicas[n % 2].renew("s", 1, f"r{n}", LEASE_S) for n in range(20))
    )
    assert renewed == [f"r{n}" == got.owner for n in range(20)]


async def test_a_claim_without_a_lease_never_lapses(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 1) is True
    assert await one.claim("s", 2, owner="a") is True  # an owner without a lease: no lease
    await shared.advance(3000)  # within the hour an entry lives
    for request_id in (1, 2):
        assert await two.claim_status("s", request_id) == status(owner=None)
        assert await one.renew("s", request_id, "a", LEASE_S) is False
    assert await two.claim_status("s", 3) == status(claimed=False, owner=None)


async def test_concurrent_claimers_one_wins_and_owns(shared: Shared) -> None:
    replicas = [shared.replica(), shared.replica()]
    await replicas[0].begin_session("s")
    for request_id in (1, "1", "req-2"):
        await one_of_fifty_wins(
            replicas,
            request_id,
            lambda store, rid, owner: store.claim("s", rid, owner=owner, lease_s=LEASE_S),
        )


async def test_bad_leases_are_refused_before_any_io(shared: Shared) -> None:
    store = shared.replica()
    await store.begin_session("s")
    for lease_s in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            await store.claim("s", 1, owner="a", lease_s=lease_s)
        with pytest.raises(ValueError):
            await store.renew("s", 1, "a", lease_s)
        with pytest.raises(ValueError):
            await store.take_over("s", 1, "a", lease_s)
    with pytest.raises(ValueError, match="owner"):
        await store.claim("s", 1, lease_s=LEASE_S)
    with pytest.raises(ValueError, match="owner"):
        await store.renew("s", 1, "", LEASE_S)
    with pytest.raises(ValueError, match="owner"):
        await store.take_over("s", 1, "", LEASE_S)
    assert await store.claim_status("s", 1) == status(claimed=False, owner=None)
    assert await store.claim("s", 1, owner="a", lease_s=LEASE_S) is True


async def test_lease_owners_are_any_text(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    for n, owner in enumerate(["1", "lease a", "ä \ud800", "a" * 200]):
        assert await one.claim("s", n, owner=owner, lease_s=LEASE_S) is True
        assert await two.claim_status("s", n) == status(owner=owner)
        assert await two.renew("s", n, owner, LEASE_S) is True
        assert await two.renew("s", n, owner + " ", LEASE_S) is False


def test_the_lapsed_error_and_the_default_lease() -> None:
    error = ClaimLapsedError("gone", key=("s", 1), stream="post:1")
    assert error.reason == "claim-lapsed" == error.to_json()["reason"]
    assert DEFAULT_LEASE_S == 30.0


# ------------------------------------------------------------------ memory


async def test_memory_leases_stay_within_max_entries() -> None:
    clock = Clock()
    store = MemoryStore(max_entries=8, clock=clock)
    await store.begin_session("s")
    for n in range(100):
        assert await store.claim("s", n, owner="a", lease_s=LEASE_S) is True
        assert await store.renew("s", n, "a", LEASE_S) is True
        assert len(store) <= 8
    assert (await store.claim_status("s", 99)).owner == "a"


async def test_memory_renewal_keeps_the_claim_and_the_session_alive() -> None:
    """A renewal is a write: the claim and the session's record live ``ttl_s`` after it
    (a prompt awaiting its answer longer than the TTL is not claimable again)."""
    clock = Clock()
    store = MemoryStore(ttl_s=100, clock=clock)
    await store.begin_session("s")
    assert await store.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    for _ in range(30):  # 270 s, renewed every 9
        clock.now += 9
        assert await store.renew("s", 1, "a", LEASE_S) is True
    assert await store.claim("s", 1) is False
    assert await store.claim_status("s", 1) == status()


# ------------------------------------------------------------------ redis


async def test_redis_expires_a_lease_on_its_own_clock(server: RedisServer) -> None:
    """A short lease, not renewed, lapses in Redis by itself; polled until it does."""
    one = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    two = RedisStore.from_url(server.url, prefix=one.prefix)
    try:
        await one.begin_session("s")
        assert await one.claim("s", 1, owner="a", lease_s=0.2) is True
        assert await one.claim("s", 2, owner="a", lease_s=0.2) is True
        with anyio.fail_after(20):
            while not (got := await two.claim_status("s", 1)).lapsed:
                await anyio.sleep(0.05)
        assert got == status(lapsed=True)
        assert await two.claim_status("s", 2) == status(lapsed=True)
        assert await one.renew("s", 1, "a", 30) is False
    finally:
        await one.aclose()
        await two.aclose()


async def test_redis_lease_keys_carry_the_lease_and_renewal_refreshes_ttls(
    server: RedisServer,
) -> None:
    store = RedisStore.from_url(server.url, ttl_s=300, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.begin_session("s")
        assert await store.claim("s", 1, owner="replica-a", lease_s=LEASE_S) is True
        claim, lease, record = (
            store.key("s", "claim", "int:1"),
            store.key("s", "lease", "int:1"),
            store.key("s", "session"),
        )
        found = await store.client.keys(f"{store.prefix}*")
        assert sorted(found) == sorted(k.encode() for k in (claim, lease, record))
        assert await store.client.get(claim) == b"lease replica-a"
        assert await store.client.get(lease) == b"replica-a"
        assert 9_000 < await store.client.pttl(lease) <= 10_000
        assert 299_000 < await store.client.pttl(claim) <= 300_000
        for key in (claim, lease, record):
            await store.client.pexpire(key, 1000)
        assert await store.renew("s", 1, "replica-a", 20) is True
        assert 19_000 < await store.client.pttl(lease) <= 20_000
        assert await store.client.pttl(claim) > 299_000
        assert await store.client.pttl(record) > 299_000
        assert await store.claim("s", 2, owner="x") is True  # no lease: no lease key
        assert await store.client.get(store.key("s", "claim", "int:2")) == b"1"
        assert await store.client.exists(store.key("s", "lease", "int:2")) == 0
    finally:
        await store.aclose()


async def test_redis_marks_a_submission_under_its_own_key_with_the_claims_ttl(
    server: RedisServer,
) -> None:
    """The mark is ``P{S}:submitted:<type>:<id>``, ``1``, with the entries' TTL, set with
    the claim's TTL refreshed (one script: the claim checked in Redis); nothing is
    written for a request with no claim."""
    store = RedisStore.from_url(server.url, ttl_s=300, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.begin_session("s")
        assert await store.claim("s", 1, owner="replica-a", lease_s=LEASE_S) is True
        claim, mark = store.key("s", "claim", "int:1"), store.key("s", "submitted", "int:1")
        await store.client.pexpire(claim, 1000)
        assert await store.mark_submitted("s", 1) is True
        assert await store.client.get(mark) == b"1"
        assert 299_000 < await store.client.pttl(mark) <= 300_000
        assert 299_000 < await store.client.pttl(claim) <= 300_000
        before = set(await store.client.keys(f"{store.prefix}*"))
        assert await store.mark_submitted("s", 2) is False
        assert await store.mark_submitted("s", "1") is False
        assert set(await store.client.keys(f"{store.prefix}*")) == before
    finally:
        await store.aclose()


async def test_redis_take_over_rewrites_the_claim_and_lease_keys_and_refreshes_ttls(
    server: RedisServer,
) -> None:
    """A take-over, in Redis: the claim ``lease <new owner>`` with the entries' TTL anew,
    the lease key holding the new owner for the lease, the answer's and the session
    record's TTLs refreshed (neither made where absent), no mark written; a refused one
    writes nothing."""
    store = RedisStore.from_url(server.url, ttl_s=300, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.begin_session("s")
        assert await store.claim("s", 1, owner="replica-a", lease_s=LEASE_S) is True
        assert await store.claim("s", 2, owner="replica-a", lease_s=LEASE_S) is True
        await store.save_answer("s", 1, {"action": "accept"})
        claim, lease, answer, record = (
            store.key("s", "claim", "int:1"),
            store.key("s", "lease", "int:1"),
            store.key("s", "answer", "int:1"),
            store.key("s", "session"),
        )
        await store.client.delete(lease, store.key("s", "lease", "int:2"))  # lapsed
        for key in (claim, answer, record):
            await store.client.pexpire(key, 1000)
        before = set(await store.client.keys(f"{store.prefix}*"))
        assert await store.take_over("s", 1, "replica-b", 20) is True
        assert await store.client.get(claim) == b"lease replica-b"
        assert await store.client.get(lease) == b"replica-b"
        assert 19_000 < await store.client.pttl(lease) <= 20_000
        for key in (claim, answer, record):
            assert 299_000 < await store.client.pttl(key) <= 300_000, key
        assert set(await store.client.keys(f"{store.prefix}*")) == before | {lease.encode()}
        assert await store.take_over("s", 2, "replica-b", 20) is True  # no answer: none made
        assert await store.client.exists(store.key("s", "answer", "int:2")) == 0
        assert await store.client.exists(store.key("s", "submitted", "int:1")) == 0
        before = set(await store.client.keys(f"{store.prefix}*"))
        ttls = {key: await store.client.pttl(key) for key in before}
        assert await store.take_over("s", 1, "replica-c", 20) is False
        assert await store.client.get(claim) == b"lease replica-b"
        assert set(await store.client.keys(f"{store.prefix}*")) == before
        for key, left in ttls.items():
            assert await store.client.pttl(key) <= left, key  # none refreshed
    finally:
        await store.aclose()


@pytest.fixture
async def store(server: RedisServer) -> AsyncIterator[RedisStore]:
    """A store on the module's Redis, under a key prefix of its own, session ``s`` begun."""
    store = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.begin_session("s")
        yield store
    finally:
        await store.aclose()


async def test_redis_lease_operations_are_one_round_trip(store: RedisStore) -> None:
    await store.client.script_flush()
    await store.connect()  # one script serves every operation
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.claim("s", 1, owner="a", lease_s=LEASE_S),
        lambda: store.claim("s", 2, stream="g", cursor=Cursor(1, "e"), owner="a", lease_s=1),
        lambda: store.renew("s", 1, "a", LEASE_S),
        lambda: store.renew("s", 1, "b", LEASE_S),
        lambda: store.claim_status("s", 1),
        lambda: store.mark_submitted("s", 1),
        lambda: store.mark_submitted("s", 99),
        lambda: store.take_over("s", 1, "b", LEASE_S),
        lambda: store.take_over("s", 99, "b", LEASE_S),
        lambda: store.open_claims("s", "g"),
    ]
    for call in calls:
        before = store.round_trips
        await call()
        assert store.round_trips - before == 1
    await store.client.script_flush()  # as after a Redis restart: EVALSHA, then EVAL
    before = store.round_trips
    assert (await store.claim_status("s", 1)).owner == "a"
    assert store.round_trips - before == 2


async def test_a_status_with_an_answer_that_is_not_ours_fails_closed(store: RedisStore) -> None:
    assert await store.claim("s", 1, owner="a", lease_s=LEASE_S) is True
    await store.client.set(store.key("s", "answer", "int:1"), b"[1]")
    with pytest.raises(StoreUnavailableError, match="not a JSON object"):
        await store.claim_status("s", 1)


@pytest.mark.parametrize("fault", ["stopped", "frozen"])
async def test_an_unavailable_redis_fails_lease_operations_closed(fault: str) -> None:
    with redis_server() as running:
        store = RedisStore.from_url(running.url, timeout_s=0.2)
        try:
            await store.begin_session("s")
            assert await store.claim("s", 1, owner="a", lease_s=LEASE_S) is True
            running.stop() if fault == "stopped" else running.pause()
            try:
                calls: dict[str, Callable[[], Awaitable[object]]] = {
                    "claim": lambda: store.claim("s", 2, owner="a", lease_s=LEASE_S),
                    "renew": lambda: store.renew("s", 1, "a", LEASE_S),
                    "claim_status": lambda: store.claim_status("s", 1),
                    "mark_submitted": lambda: store.mark_submitted("s", 1),
                    "take_over": lambda: store.take_over("s", 1, "b", LEASE_S),
                    "open_claims": lambda: store.open_claims("s", "get"),
                }
                for name, call in calls.items():
                    with anyio.fail_after(20):  # a bound against hanging, not a measure
                        with pytest.raises(
                            StoreUnavailableError, match=f"redis store: {name} failed"
                        ) as got:
                            await call()
                    assert got.value.reason == "store-unavailable"
            finally:
                if fault == "frozen":
                    running.resume()
        finally:
            await store.aclose()


async def test_a_streams_open_claims_are_the_leased_claims_won_on_it(shared: Shared) -> None:
    """``open_claims`` lists what a replica taking a stream over must watch: claims won
    under a lease with that stream given, in order, ids keeping their JSON type; a lost
    claim, a claim without a lease or on another stream is not among them; at most
    ``MAX_OPEN_CLAIMS`` (the newest)."""
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    at = Cursor(1, "e1")
    assert await one.open_claims("s", "post:7") == []
    await one.claim("s", 1, stream="post:7", cursor=at, owner="a", lease_s=LEASE_S)
    await two.claim("s", 1, stream="post:7", cursor=at, owner="b", lease_s=LEASE_S)  # lost
    await one.claim("s", "2", stream="post:7", cursor=at, owner="a", lease_s=LEASE_S)
    await one.claim("s", 3, stream="post:7", cursor=at)  # no lease: never lapses
    await one.claim("s", 4, stream="get", cursor=at, owner="a", lease_s=LEASE_S)
    assert await two.open_claims("s", "post:7") == [1, "2"]
    assert await two.open_claims("s", "get") == [4]
    for rid in range(10, 10 + MAX_OPEN_CLAIMS):
        await one.claim("s", rid, stream="get", cursor=at, owner="a", lease_s=LEASE_S)
    kept = await two.open_claims("s", "get")
    assert kept == list(range(10, 10 + MAX_OPEN_CLAIMS))


async def test_a_misspelt_claim_keyword_is_a_type_error_before_any_io(shared: Shared) -> None:
    """``**terms`` takes any keyword: one that is not a claim term (``lease=`` for
    ``lease_s=``) is refused, not dropped (a claim won without the lease it meant would
    never lapse)."""
    store = shared.replica()
    await store.begin_session("s")
    bad: Any = {"owner": "a", "lease": 0.01}
    with pytest.raises(TypeError, match="lease"):
        await store.claim("s", 1, **bad)
    assert await store.claim_status("s", 1) == status(claimed=False, owner=None)
    assert await store.claim("s", 1, owner="a", lease_s=LEASE_S) is True
