"""The kept final responses (:mod:`fsm.gateway.kept`): bounded per session and in bytes
over every session, taken back from whoever holds the most, an owner's pieces going with
it."""

from __future__ import annotations

import gc
import weakref

from fsm.gateway.kept import KeptResults


class Owner:
    """A session stand-in: compared by identity, as the gateway's sessions are."""


def test_each_owner_keeps_its_newest_per_session_pieces() -> None:
    kept, a, b = KeptResults(per_session=2, max_bytes=100), Owner(), Owner()
    for stream in ("s1", "s2", "s3"):
        kept.keep(a, stream, b"aa")
    kept.keep(b, "s1", b"bbb")
    assert (kept.get(a, "s1"), kept.get(a, "s2"), kept.get(a, "s3")) == (None, b"aa", b"aa")
    assert (a, "s3") in kept and (b, "s3") not in kept
    assert (kept.count(a), kept.count(b), kept.size) == (2, 1, 7)


def test_past_max_bytes_the_owner_holding_most_loses_its_oldest_first() -> None:
    kept, a, b = KeptResults(per_session=8, max_bytes=10), Owner(), Owner()
    kept.keep(a, "s1", b"1")  # a's one small result is the oldest kept
    for stream, piece in (("s1", b"234"), ("s2", b"567"), ("s3", b"89")):
        kept.keep(b, stream, piece)
    assert kept.size == 9
    kept.keep(b, "s4", b"xy")  # 11 bytes: b holds 10 of them, so b's oldest goes
    assert kept.get(a, "s1") == b"1" and kept.get(b, "s1") is None and kept.size == 8
    kept.keep(a, "s2", b"abcd")  # 12 bytes: b still holds most (7 to a's 5)
    assert (kept.count(a), kept.count(b), kept.size) == (2, 2, 9)
    assert [kept.get(b, "s3"), kept.get(b, "s4")] == [b"89", b"xy"]


def test_of_owners_holding_alike_the_one_unchanged_longest_gives_first() -> None:
    kept, a, b, c = KeptResults(per_session=8, max_bytes=10), Owner(), Owner(), Owner()
    kept.keep(a, "s1", b"123")
    kept.keep(b, "s1", b"456")
    kept.keep(c, "s1", b"789")
    kept.keep(c, "s2", b"0")  # 10 bytes; c now holds most
    kept.keep(b, "s2", b"x")  # 11: b and c hold 4 each; c changed longer ago
    assert kept.get(c, "s1") is None and kept.get(b, "s1") == b"456" and kept.size == 8


def test_owners_changing_often_keep_the_bookkeeping_bounded() -> None:
    kept, owners = KeptResults(per_session=2, max_bytes=50), [Owner() for _ in range(3)]
    for n in range(5_000):
        kept.keep(owners[n % 3], f"s{n % 4}", b"x" * (1 + n % 7))
        assert kept.size <= 50 and len(kept._largest) <= 2 * 3 + 64 + 1
    assert kept.size == sum(len(piece) for o in owners for piece in kept.of(o).values())


def test_a_piece_larger_than_everything_is_not_kept_and_evicts_nothing() -> None:
    kept, a = KeptResults(per_session=8, max_bytes=10), Owner()
    kept.keep(a, "s1", b"12345")
    kept.keep(a, "s2", b"x" * 11)
    assert kept.get(a, "s2") is None and kept.get(a, "s1") == b"12345" and kept.size == 5


def test_keeping_a_stream_again_replaces_its_piece() -> None:
    kept, a = KeptResults(per_session=1, max_bytes=10), Owner()
    kept.keep(a, "s1", b"12345")
    kept.keep(a, "s1", b"67")
    assert kept.get(a, "s1") == b"67" and (kept.count(a), kept.size) == (1, 2)


def test_forgetting_an_owner_lets_its_pieces_go_and_no_one_elses() -> None:
    kept, a, b = KeptResults(per_session=8, max_bytes=100), Owner(), Owner()
    kept.keep(a, "s1", b"12")
    kept.keep(a, "s2", b"345")
    kept.keep(b, "s1", b"6")
    kept.forget(a)
    kept.forget(Owner())  # one that kept nothing
    assert (kept.count(a), kept.count(b), kept.size) == (0, 1, 1)
    assert kept.get(a, "s1") is None and kept.get(b, "s1") == b"6"


def test_an_owners_pieces_read_back_by_stream_oldest_first() -> None:
    kept, a = KeptResults(per_session=8, max_bytes=100), Owner()
    kept.keep(a, "s2", b"2")
    kept.keep(a, "s1", b"1")
    assert list(kept.of(a).items()) == [("s2", b"2"), ("s1", b"1")]
    assert kept.of(Owner()) == {}


def test_a_forgotten_owner_is_not_kept_alive() -> None:
    """A closed session's guard and engine go with it: nothing here still refers to an
    owner once its pieces went, however they went."""
    kept, owners = KeptResults(per_session=1, max_bytes=4), [Owner() for _ in range(4)]
    for owner in owners:
        kept.keep(owner, "s1", b"xx")  # the third and fourth push the first two out
    refs = [weakref.ref(owner) for owner in owners]
    for owner in owners:
        kept.forget(owner)
    del owners, owner
    gc.collect()
    assert [ref() for ref in refs] == [None] * 4 and kept.size == 0
