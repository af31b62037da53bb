"""Where a gateway keeps what its replicas must agree on: the state-store interface and the
in-memory store.

A guarding gateway (:mod:`fsm.gateway`) runs one guard per MCP session in each replica.
Most of a guard's state is local and cheap (stream cursors' histories, budgets, timers);
what two replicas behind one load balancer must agree on is kept here, per session:

* **claims**: a server request's presentation. :meth:`StateStore.claim` is a
  compare-and-set: for one ``(session, request id)`` it returns ``True`` exactly once
  across every replica sharing the store (until the entry's TTL). A replica forwards a
  request to its client only after winning the claim; a replayed copy that reaches
  another replica loses it and is blanked. A claim also stands for every later state of
  the request (answered, dead): a key once claimed is never presented again. Given the
  stream and the cursor of the event that carried the request, the claim also advances
  that stream's cursor in the same atomic step (one round trip for a remote store).
* **leases**: a claim won with ``lease_s`` is held by its ``owner`` (a replica id) for
  that long, and renewed by the owner (:meth:`StateStore.renew`) while its request awaits
  the client's answer and while its submission of the answer is under way. A replica
  that lost the claim watches it (:meth:`StateStore.claim_status`): a stored answer it
  submits only if the owner died before its submission ended (below); when the lease
  lapses with no answer stored (the owner died with the prompt), the call ends with
  :class:`ClaimLapsedError`, never with a second presentation. A lapsed lease is final
  for its owner: it cannot renew it any more.
* **take-overs**: a stored answer whose holder died before its submission ended (lease
  lapsed, not marked) is sent by a survivor that first takes the claim over
  (:meth:`StateStore.take_over`: a compare-and-set, so of every replica watching the
  claim exactly one wins). The winner holds the claim under a lease of its own, renews it
  while its submission is under way, and marks it; the others see a live lease again and
  go on watching (and take it over in turn should the winner die too).
* **submissions**: :meth:`StateStore.mark_submitted` records that the submission of a
  claimed request's answer ended (accepted, or failed for good), so that a replica
  watching the claim does not submit the stored answer again. A watcher submits a stored
  answer only while it is not marked and the holder's lease has lapsed (the holder died
  before its submission ended), and only once it took the claim over: no watcher sends
  an answer a live holder is submitting, and of several watchers one sends it; one is
  sent again only when a replica dies between its POST and its mark.
* **answers**: the answer a client gave to a claimed request, so that a replica that sees
  the server ask again can resubmit it instead of asking the person.
* **submitter leases**: a replica that takes the client's answer to a request another
  replica holds (a replay brought the prompt there, its claim lost) stores it and takes
  the claim's lease in one step (:meth:`StateStore.hold_answer`), whether the holder lives
  or not: it submits the answer under a lease of its own, renewed while its submission is
  under way, so no watcher takes the claim over while it lives; should it die, its lease
  lapses and a survivor takes over and submits the stored answer.
* **cursors**: per stream, the newest event the gateway passed on, as a
  :class:`Cursor` (the upstream event id and the stream's position), so that a resume
  landing on another replica is sent upstream from the newest event, not from a stale
  ``Last-Event-ID``. :meth:`StateStore.save_cursor` never moves a cursor back.
* **ended sessions**: a session the server said is gone (404), answered ``404`` by every
  replica without traffic.
* **begun sessions**: :meth:`StateStore.begin_session` records a session when a replica
  sees it begin (its ``initialize``); a claim in a session the store has no record of
  raises :class:`StoreStateLostError`. A store that lost its state (Redis restarted
  without persistence, a gateway process restarted on a :class:`MemoryStore`) or a
  session idle past the TTL therefore fails closed: whether that session's requests were
  presented is unknown, so none is presented.

Contract for implementations: every method is a coroutine; every entry expires
``ttl_s`` seconds after its last write (memory stays bounded by the live sessions); a
store that cannot answer raises :class:`StoreUnavailableError` and never guesses (the
gateway then fails closed: it never presents a request it could not claim, and the
interaction fails with that typed error). :class:`MemoryStore` is for one replica;
:class:`fsm.gateway.redis_store.RedisStore` shares state across replicas.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

from fsm.durable.redis_link import check_lease
from fsm.errors import InteractionFailed

__all__ = [
    "DEFAULT_LEASE_S",
    "DEFAULT_TTL_S",
    "MAX_OPEN_CLAIMS",
    "Answer",
    "ClaimLapsedError",
    "ClaimStatus",
    "ClaimTerms",
    "Cursor",
    "MemoryStore",
    "RequestId",
    "StateStore",
    "StoreStateLostError",
    "StoreUnavailableError",
    "check_lease",
    "claim_cursor",
    "claim_terms",
    "request_key",
]

DEFAULT_TTL_S = 3600.0
"""Seconds an entry lives after its last write unless the store is told otherwise."""

MAX_OPEN_CLAIMS = 64
"""Leased claims :meth:`StateStore.open_claims` keeps per stream (the newest)."""

DEFAULT_LEASE_S = 30.0
"""Seconds a claim's lease lasts unless its owner renews it: the longest a call waits for
the prompt of a replica that died before the client's answer was stored (another replica
watching the claim sees the lease lapse and ends the call with :class:`ClaimLapsedError`).
The owner is expected to renew it (:meth:`StateStore.renew`) every third of it
(10 s) while the request awaits its answer, so that two missed renewals in a row still
leave the lease held."""

RequestId = int | str
"""A JSON-RPC request id as the server sent it (``1`` and ``"1"`` are different keys)."""

Answer = Mapping[str, Any]
"""A client's answer to a server request as the store keeps it: the JSON-RPC ``result``
object (``{"action": "accept", "content": {...}}``)."""


def request_key(request_id: RequestId) -> str:
    """``request_id`` as a store key that keeps its JSON type: ``1`` is ``"int:1"``,
    ``"1"`` is ``"str:1"`` (different JSON-RPC ids stay different keys)."""
    return f"{type(request_id).__name__}:{request_id}"


class StoreUnavailableError(InteractionFailed):
    """The gateway's state store could not be reached or did not answer in time. The
    gateway fails closed: the request it could not claim is not presented and its
    interaction ends with this error (``reason = "store-unavailable"``).

    Its message is told to clients (a ``503`` before any credential is checked, a call's
    ending error), so a store makes it fixed text naming the operation: the cause (which
    may name the store's address) goes to the log and to ``__cause__``, never here."""

    reason = "store-unavailable"


class StoreStateLostError(StoreUnavailableError):
    """The store has no record of the session a claim is for: it lost its state (a
    restart without persistence) or the session outlived the TTL. Failing closed as for an
    unreachable store (``reason = "store-state-lost"``)."""

    reason = "store-state-lost"


class ClaimLapsedError(InteractionFailed):
    """The replica that claimed (and so presented) a request stopped renewing its lease
    before the client's answer reached the store: it died with the prompt. The request is
    not presented again; the call ends with this error (``reason = "claim-lapsed"``)."""

    reason = "claim-lapsed"


@dataclass(frozen=True)
class ClaimStatus:
    """What the store holds for one request's claim (:meth:`StateStore.claim_status`).

    ``claimed``: some replica won the claim (and it has not expired). ``owner``: the
    replica that holds it under a lease (``None`` without a claim, or for a claim won
    without a lease). ``lapsed``: the claim was won under a lease that expired without
    renewal and neither an answer is stored nor its submission marked (the owner died with
    the prompt); a stored answer or a mark settles the claim, so ``lapsed`` is then
    ``False``. ``answer``: the client's answer kept in the store
    (:meth:`StateStore.save_answer`), or ``None``. ``submitted``: a replica marked the
    submission of the answer ended (:meth:`StateStore.mark_submitted`): nobody submits
    it again. ``lease_lapsed``: the claim was won under a lease that expired without
    renewal, whatever is stored (its holder stopped: a stored answer it has not marked
    submitted is then a survivor's to submit, once it took the claim over:
    :meth:`StateStore.take_over`)."""

    claimed: bool
    owner: str | None
    lapsed: bool
    answer: Mapping[str, Any] | None
    submitted: bool = False
    lease_lapsed: bool = False


@dataclass(frozen=True, order=True)
class Cursor:
    """The newest event a gateway passed on for one stream: ``position`` counts the
    stream's events as the gateway numbered them (1, 2, ...), ``event_id`` is the upstream
    server's id of that event. Cursors order by position."""

    position: int
    event_id: str


@runtime_checkable
class StateStore(Protocol):
    """What a gateway's replicas share (see the module docstring for the contract)."""

    async def begin_session(self, session: str) -> None:
        """Record that ``session`` began (a replica saw its ``initialize`` answered)."""
        ...

    async def keep_session(self, session: str) -> None:
        """``session`` is in use: its record lives ``ttl_s`` from now, if the store still
        has it. A record the store lost (or let expire) stays lost: the session's claims
        still fail closed."""
        ...

    async def claim(
        self,
        session: str,
        request_id: RequestId,
        *,
        stream: str | None = None,
        cursor: Cursor | None = None,
        owner: str = "",
        lease_s: float | None = None,
    ) -> bool:
        """Claim the presentation of ``request_id`` in ``session``: ``True`` the first time
        for this key across all replicas, ``False`` ever after (until the TTL). Given
        ``stream`` and ``cursor`` (both or neither, else :class:`ValueError`), also record
        the cursor as :meth:`save_cursor` would, in the same atomic step, whatever the
        claim's result. Raises :class:`StoreStateLostError` (changing nothing) when the
        session has no record (:meth:`begin_session`); refreshes the record's TTL.

        Given ``lease_s`` (> 0, with a non-empty ``owner``, else :class:`ValueError`), a
        won claim is held by ``owner`` under a lease that lapses ``lease_s`` seconds later
        unless :meth:`renew` extends it; ``None`` (the default): no lease, the claim never
        lapses. A lost claim changes no lease."""
        ...

    async def renew(self, session: str, request_id: RequestId, owner: str, lease_s: float) -> bool:
        """Extend the lease of ``owner``'s claim of ``request_id`` to ``lease_s`` seconds
        from now, and refresh the TTL of the claim and the session's record: ``True``.
        ``False``, changing nothing, when there is no claim, another owner holds it, it
        was won without a lease, or its lease already lapsed (a lapsed lease is final for
        its owner; only :meth:`take_over` gives the claim a live lease again)."""
        ...

    async def take_over(
        self, session: str, request_id: RequestId, owner: str, lease_s: float
    ) -> bool:
        """Take over the claim of ``request_id`` from a holder that stopped: only while the
        claim stands, was won under a lease, that lease lapsed, and its answer's
        submission is not marked (:meth:`mark_submitted`), make ``owner`` its holder under
        a new lease of ``lease_s`` seconds (renewed with :meth:`renew`, as a claimer's
        is), refresh the TTLs of the claim, its stored answer and the session's record:
        ``True``. Otherwise ``False``, changing nothing: another replica took it over
        first (its lease holds again), it was marked, it was never claimed (or expired),
        or it was won without a lease. A compare-and-set, atomic with its checks: of any
        number of replicas that find the same dead holder's answer, exactly one takes the
        claim over, and only that one submits the answer. The request stays claimed (never
        presented again); whether an answer is stored is not checked (the gateway takes
        over only to submit one). ``lease_s`` > 0 with a non-empty ``owner``, else
        :class:`ValueError` before any IO."""
        ...

    async def claim_status(self, session: str, request_id: RequestId) -> ClaimStatus:
        """The claim of ``request_id``, its owner, whether its lease lapsed, and the stored
        answer, read in one atomic step (:class:`ClaimStatus`). Writes nothing."""
        ...

    async def mark_submitted(self, session: str, request_id: RequestId) -> bool:
        """Record that the submission of the answer to ``request_id`` ended (the upstream
        accepted it, or it failed for good): a replica watching the claim never submits
        the stored answer once it reads :attr:`ClaimStatus.submitted`. Marked by the
        replica whose submission ended, never before it ended (one that dies mid-way
        leaves it unmarked, and a survivor submits). ``True``; ``False``, writing nothing,
        when the request has no claim (never claimed, or expired): a mark stands for a
        claim's submission only, so none waits for a claim made later. Atomic with the
        claim's check; the mark lives as the claim does (``ttl_s`` from this write, the
        claim's TTL refreshed with it). Idempotent."""
        ...

    async def open_claims(self, session: str, stream: str) -> list[RequestId]:
        """The requests claimed under a lease with ``stream`` given (the claims a replica
        that takes the stream over must watch: their prompts were passed on and the
        stream's cursor moved past them), oldest first; settled ones included (their
        :meth:`claim_status` says so). Writes nothing."""
        ...

    async def save_answer(
        self, session: str, request_id: RequestId, answer: Mapping[str, Any]
    ) -> None:
        """Keep the client's answer (a JSON object) to a claimed request."""
        ...

    async def hold_answer(
        self, session: str, request_id: RequestId, answer: Answer, owner: str, lease_s: float
    ) -> bool:
        """Keep ``answer`` as :meth:`save_answer` does and, in the same atomic step, make
        ``owner`` the holder of ``request_id``'s claim under a new lease of ``lease_s``
        seconds, whoever held it and whether or not that lease lapsed: only while the
        claim stands, was won under a lease, and its answer's submission is not marked
        (:meth:`mark_submitted`); the TTLs of the claim, the answer and the session's
        record refreshed: ``True``. Otherwise ``False``: the answer kept all the same,
        the claim unchanged (no claim, one won without a lease, or marked).

        For a replica that took the client's answer to a request another replica holds
        (its guard was replayed the request; its claim lost) and will submit it: from
        this step on, its submission is under a lease of its own, which it renews
        (:meth:`renew`) while the submission is under way and marks when it ended. The
        previous holder's renewals fail from then (its prompt was answered elsewhere); a
        watcher finds a live lease, never a stored answer whose holder's lease lapsed
        while its submitter lives, so :meth:`take_over` refuses until the submitter dies
        (its lease lapses: a survivor then takes over and submits the stored answer).
        ``lease_s`` > 0 with a non-empty ``owner``, else :class:`ValueError`, and an
        ``answer`` the store cannot keep (one that is not JSON, for a store that keeps
        JSON) :class:`TypeError`, both before any IO."""
        ...

    async def answer_of(self, session: str, request_id: RequestId) -> Mapping[str, Any] | None:
        """The kept answer to ``request_id``, or ``None``."""
        ...

    async def save_cursor(self, session: str, stream: str, cursor: Cursor) -> None:
        """Record ``cursor`` for ``stream`` unless a cursor at or past its position is
        already recorded (atomic: concurrent writers never move it back)."""
        ...

    async def cursor_of(self, session: str, stream: str) -> Cursor | None:
        """The newest recorded cursor of ``stream``, or ``None``."""
        ...

    async def end_session(self, session: str, reason: str) -> None:
        """Record that ``session`` is gone (``reason``: why, e.g. ``"session-expired"``)."""
        ...

    async def session_ended(self, session: str) -> str | None:
        """Why ``session`` ended, or ``None`` while it is live (or unknown)."""
        ...

    async def aclose(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


class ClaimTerms(TypedDict, total=False):
    """The keywords of :meth:`StateStore.claim`, as its implementations take them
    (``**terms``): see the method for what each means; :func:`claim_terms` checks them."""

    stream: str | None
    cursor: Cursor | None
    owner: str
    lease_s: float | None


_CLAIM_KEYWORDS = ClaimTerms.__required_keys__ | ClaimTerms.__optional_keys__


@dataclass(frozen=True)
class Claim:
    """A claim's checked terms (:func:`claim_terms`): the ``(stream, cursor)`` it also
    records, or ``None``; the owner; the lease in seconds, or ``None``."""

    advance: tuple[str, Cursor] | None
    owner: str
    lease_s: float | None


def claim_terms(terms: ClaimTerms) -> Claim:
    """``terms`` checked (:func:`claim_cursor`, :func:`check_lease`: ``ValueError`` when
    they do not hold) before a store does any of the claim. A keyword that is not one of
    :class:`ClaimTerms` is a :class:`TypeError`, as for any function: ``**terms`` takes
    every keyword, so a misspelt one (``lease=`` for ``lease_s=``) would otherwise win a
    claim without the lease it meant."""
    unknown = terms.keys() - _CLAIM_KEYWORDS
    if unknown:
        raise TypeError(f"claim() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    advance = claim_cursor(terms.get("stream"), terms.get("cursor"))
    owner, lease_s = terms.get("owner", ""), terms.get("lease_s")
    check_lease(owner, lease_s)
    return Claim(advance, owner, lease_s)


def claim_cursor(stream: str | None, cursor: Cursor | None) -> tuple[str, Cursor] | None:
    """The ``(stream, cursor)`` a :meth:`StateStore.claim` also records, or ``None`` when
    it records none; :class:`ValueError` when only one of the two is given."""
    if stream is None and cursor is None:
        return None
    if stream is None or cursor is None:
        raise ValueError("claim: give both stream and cursor, or neither")
    return stream, cursor


_Key = tuple[str, str, str]
"""(kind, session, item): one entry of :class:`MemoryStore`."""


@dataclass(frozen=True)
class _Held:
    """A claim in :class:`MemoryStore`: its owner and when its lease lapses (both
    ``None`` for a claim won without a lease), and whether its answer's submission was
    marked ended (:meth:`StateStore.mark_submitted`: part of the claim's entry, so it
    lives and expires with it)."""

    owner: str | None
    lease_until: float | None
    submitted: bool = False

    def lapsed(self, now: float) -> bool:
        return self.lease_until is not None and self.lease_until <= now


class MemoryStore:
    """A :class:`StateStore` in this process's memory: one replica, no IO, never
    unavailable. Entries expire ``ttl_s`` after their last write; leases lapse on the
    same ``clock`` (injectable for tests, :func:`time.monotonic` by default; a lease is
    part of its claim's entry, renewing it is a write). At most ``max_entries`` entries
    are kept, the oldest written dropped first (a flood of sessions cannot grow memory
    without bound; a dropped claim can only matter for a session idle longer than every
    newer one)."""

    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_entries: int = 1_000_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError("ttl_s must be > 0 and max_entries >= 1")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[_Key, tuple[float, Any]] = OrderedDict()

    def __len__(self) -> int:
        """Entries held now (expired ones included until they are swept)."""
        return len(self._entries)

    def _get(self, key: _Key) -> Any:
        got = self._entries.get(key)
        if got is None:
            return None
        expires, value = got
        if expires <= self._clock():
            del self._entries[key]
            return None
        return value

    def _put(self, key: _Key, value: Any) -> None:
        self._entries[key] = (self._clock() + self.ttl_s, value)
        self._entries.move_to_end(key)
        self._sweep()

    def _sweep(self) -> None:
        now = self._clock()
        entries = self._entries
        while entries:
            key, (expires, _) = next(iter(entries.items()))
            if expires > now and len(entries) <= self.max_entries:
                break
            del entries[key]

    async def claim(self, session: str, request_id: RequestId, **terms: Unpack[ClaimTerms]) -> bool:
        claim = claim_terms(terms)
        advance, owner, lease_s = claim.advance, claim.owner, claim.lease_s
        began = ("session", session, "")
        if self._get(began) is None:
            raise StoreStateLostError(
                "memory store: no record of the session (begun before this process, or"
                " idle past the TTL)"
            )
        self._put(began, True)
        if advance is not None:
            self._advance(session, *advance)
        key = ("claim", session, request_key(request_id))
        if self._get(key) is not None:
            return False
        if lease_s is None:
            self._put(key, _Held(None, None))
        else:
            self._put(key, _Held(owner, self._clock() + lease_s))
            if advance is not None:
                opened = ("open", session, advance[0])
                held = self._get(opened) or ()
                self._put(opened, (*held, request_id)[-MAX_OPEN_CLAIMS:])
        return True

    async def open_claims(self, session: str, stream: str) -> list[RequestId]:
        return list(self._get(("open", session, stream)) or ())

    async def renew(self, session: str, request_id: RequestId, owner: str, lease_s: float) -> bool:
        check_lease(owner, lease_s)
        key = ("claim", session, request_key(request_id))
        held = self._get(key)
        now = self._clock()
        if not isinstance(held, _Held) or held.owner != owner or held.lapsed(now):
            return False
        self._put(key, _Held(owner, now + lease_s, held.submitted))
        self._refresh(("session", session, ""))
        return True

    async def take_over(
        self, session: str, request_id: RequestId, owner: str, lease_s: float
    ) -> bool:
        check_lease(owner, lease_s)
        rkey = request_key(request_id)
        key = ("claim", session, rkey)
        held = self._get(key)
        now = self._clock()
        # a claim won without a lease never lapses: lapsed() is False for it
        if not isinstance(held, _Held) or not held.lapsed(now) or held.submitted:
            return False
        self._put(key, _Held(owner, now + lease_s))
        # the new holder submits the stored answer, and one after it should it die too:
        # the answer must live as long as the claim now does
        self._refresh(("answer", session, rkey))
        self._refresh(("session", session, ""))
        return True

    def _refresh(self, key: _Key) -> None:
        """Write ``key``'s entry again (it lives ``ttl_s`` from now) if it is held; make
        none."""
        value = self._get(key)
        if value is not None:
            self._put(key, value)

    async def claim_status(self, session: str, request_id: RequestId) -> ClaimStatus:
        held = self._get(("claim", session, request_key(request_id)))
        answer = await self.answer_of(session, request_id)
        if not isinstance(held, _Held):
            return ClaimStatus(claimed=False, owner=None, lapsed=False, answer=answer)
        gone = held.lapsed(self._clock())
        return ClaimStatus(
            claimed=True,
            owner=held.owner,
            lapsed=gone and answer is None and not held.submitted,
            answer=answer,
            submitted=held.submitted,
            lease_lapsed=gone,
        )

    async def mark_submitted(self, session: str, request_id: RequestId) -> bool:
        key = ("claim", session, request_key(request_id))
        held = self._get(key)
        if not isinstance(held, _Held):
            return False
        self._put(key, replace(held, submitted=True))
        return True

    async def begin_session(self, session: str) -> None:
        self._put(("session", session, ""), True)

    async def keep_session(self, session: str) -> None:
        key = ("session", session, "")
        if self._get(key) is not None:
            self._put(key, True)

    async def save_answer(
        self, session: str, request_id: RequestId, answer: Mapping[str, Any]
    ) -> None:
        self._put(("answer", session, request_key(request_id)), dict(answer))

    async def hold_answer(
        self, session: str, request_id: RequestId, answer: Answer, owner: str, lease_s: float
    ) -> bool:
        check_lease(owner, lease_s)
        rkey = request_key(request_id)
        key = ("claim", session, rkey)
        held = self._get(key)
        self._put(("answer", session, rkey), dict(answer))
        # a claim won without a lease has no lease to hand on; a marked one is settled
        if not isinstance(held, _Held) or held.lease_until is None or held.submitted:
            return False
        self._put(key, _Held(owner, self._clock() + lease_s))
        self._refresh(("session", session, ""))
        return True

    async def answer_of(self, session: str, request_id: RequestId) -> Mapping[str, Any] | None:
        value = self._get(("answer", session, request_key(request_id)))
        return dict(value) if value is not None else None

    def _advance(self, session: str, stream: str, cursor: Cursor) -> None:
        key = ("cursor", session, stream)
        old = self._get(key)
        if old is None or cursor.position > old.position:
            self._put(key, cursor)

    async def save_cursor(self, session: str, stream: str, cursor: Cursor) -> None:
        self._advance(session, stream, cursor)

    async def cursor_of(self, session: str, stream: str) -> Cursor | None:
        value = self._get(("cursor", session, stream))
        return value if isinstance(value, Cursor) else None

    async def end_session(self, session: str, reason: str) -> None:
        self._put(("ended", session, ""), reason)

    async def session_ended(self, session: str) -> str | None:
        value = self._get(("ended", session, ""))
        return str(value) if value is not None else None

    async def aclose(self) -> None:
        """Nothing to release: the entries stay (replicas of one process may share this
        store, in tests; one replica's stop must not wipe the others' state)."""
