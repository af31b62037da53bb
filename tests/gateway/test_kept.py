"""The kept final responses (:mod:`fsm.gateway.kept`): bounded per session and in bytes
over every session, the oldest going first, an owner's pieces going with it."""

from __future__ import annotations

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


def test_past_max_bytes_the_least_recently_kept_go_first_whoever_owns_them() -> None:
    kept, a, b = KeptResults(per_session=8, max_bytes=10), Owner(), Owner()
    kept.keep(a, "s1", b"1234")
    kept.keep(b, "s1", b"5678")
    kept.keep(a, "s2", b"90")
    assert kept.size == 10
    kept.keep(b, "s2", b"x")  # 11 bytes: a's first goes
    assert kept.get(a, "s1") is None and kept.size == 7
    assert [kept.get(b, "s1"), kept.get(a, "s2"), kept.get(b, "s2")] == [b"5678", b"90", b"x"]


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
