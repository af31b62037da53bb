"""The per-stream event history (fsm.history): what it answers for, exactly and by
fingerprint, its bounds, its memory report, and its snapshot.

Fingerprint lookups are tested with ids whose hash the test chooses (a ``str`` subclass),
so the byte layout of a bucket is known: a stored id must be recognised whatever its
neighbours hold, and no id may match across two neighbouring records.
"""

from __future__ import annotations

import sys
import tracemalloc

import pytest

from fsm.history import FINGERPRINT_BITS, EventHistory

# the module's layout: the hash's low 10 bits pick the bucket, its top 48 bits are stored


class Hashed(str):
    """An event id whose ``hash`` is ``h`` (to place fingerprints in a chosen bucket)."""

    h: int

    def __new__(cls, text: str, h: int) -> Hashed:
        obj = super().__new__(cls, text)
        obj.h = h
        return obj

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


def _id(text: str, record: bytes, bucket: int = 5) -> Hashed:
    """An id whose fingerprint in bucket ``bucket`` is the 6 bytes ``record``."""
    return Hashed(text, int.from_bytes(bytes([bucket, 0]) + record, "little", signed=True))


def _filled(window: int, cap: int, ids: list[str]) -> EventHistory:
    history = EventHistory(window, cap)
    for event_id in ids:
        assert history.record(event_id)  # new to the stream
    return history


def test_fingerprints_take_58_bits() -> None:
    assert FINGERPRINT_BITS == 58


def test_recent_ids_are_exact_and_old_ones_are_fingerprinted() -> None:
    ids = [f"e{n}" for n in range(10)]
    history = _filled(3, 100, ids)
    assert list(history.recent) == ids[-3:]
    assert history.count == 7 and history.full is False
    assert all(i in history for i in ids)  # every id it carried, in the window or not
    assert len(history) == 10


def test_an_id_never_carried_is_not_in_the_history() -> None:
    history = _filled(2, 1000, [f"old-{n}" for n in range(50)])
    fresh = [f"new-{n}" for n in range(2000)]
    # a fingerprint match of a new id has probability ~ 48 / 2**58 here
    assert not any(i in history for i in fresh)


def test_non_string_ids_never_match_a_fingerprint() -> None:
    carried = _id("carried", b"abc\x00\x00\x00")  # a hash an int can have
    history = _filled(1, 10, [carried, "e-next"])  # carried is a fingerprint now
    assert carried in history
    assert hash(carried.h) == carried.h and carried.h not in history  # an int, same hash
    assert None not in history


def test_a_stored_id_is_found_among_false_matches_on_both_sides() -> None:
    # bucket bytes: 000abc abcabc abcxyz: the query occurs at offsets 3, 6 and 9
    query = _id("query", b"abcabc")
    history = _filled(1, 10, [_id("a", b"\x00\x00\x00abc"), query, _id("b", b"abcxyz"), "r"])
    assert query in history


def test_a_stored_id_is_found_right_after_a_false_match() -> None:
    # bucket bytes: xxxxxa aaaaaa: the query occurs at offset 5, then at 6
    query = _id("query", b"aaaaaa")
    history = _filled(1, 10, [_id("a", b"xxxxxa"), query, "r"])
    assert query in history


def test_a_stored_id_is_found_behind_a_false_match_across_two_records() -> None:
    # bucket bytes: 000abc abcabc abcxyz: the query abcabc also occurs at offset 3
    first = _id("first", b"\x00\x00\x00abc")
    query = _id("query", b"abcabc")
    history = _filled(1, 10, [first, query, "recent"])
    assert history.count == 2
    assert query in history


def test_a_stored_id_is_found_before_a_false_match_across_two_records() -> None:
    # bucket bytes: abcabc abcxyz: the stored abcabc also occurs at offset 3, misaligned
    query = _id("query", b"abcabc")
    history = _filled(1, 10, [query, _id("next", b"abcxyz"), "recent"])
    assert history.count == 2
    assert query in history


def test_no_id_matches_the_tail_of_one_record_and_the_head_of_the_next() -> None:
    history = _filled(1, 10, [_id("a", b"\x00\x00\x00abc"), _id("b", b"abc\x09\x09\x09"), "r"])
    assert _id("never-carried", b"abcabc") not in history


def test_once_cap_fingerprints_are_stored_the_history_is_full() -> None:
    history = _filled(2, 3, [f"e{n}" for n in range(5)])  # 3 fingerprints, window full
    assert history.count == 3 and not history.full
    history.record("e5")  # e3 leaves the window with no room for its fingerprint
    assert history.full and history.count == 3
    assert "e3" not in history and "e2" in history and "e5" in history
    assert len(history) == 5


def test_a_cap_of_zero_keeps_only_the_window() -> None:
    history = _filled(2, 0, ["a", "b"])
    assert not history.full
    history.record("c")
    assert history.full and "a" not in history and len(history) == 2


def test_bounds_below_their_minimum_are_raised_to_it() -> None:
    history = EventHistory(0, -5)
    assert (history.window, history.cap) == (1, 0)
    history.record("a")
    assert not history.full
    history.record("b")
    assert history.full and "b" in history and "a" not in history


def test_freeze_and_thaw_keep_every_answer() -> None:
    ids = [f"e{n}" for n in range(40)]
    history = _filled(4, 30, ids)  # 30 fingerprints, then full
    frozen = history.freeze()
    hash(frozen)
    copy = EventHistory.thaw(4, 30, frozen)
    assert [i in copy for i in ids] == [i in history for i in ids]
    assert (copy.count, copy.full, list(copy.recent)) == (30, True, ids[-4:])
    assert copy.freeze() == frozen
    copy.record("e-new")  # the copy is independent of the original
    assert "e-new" not in history


def test_freeze_is_equal_for_equal_histories() -> None:
    ids = [f"e{n}" for n in range(20)]
    assert _filled(3, 100, ids).freeze() == _filled(3, 100, ids).freeze()
    assert _filled(3, 100, ids).freeze() != _filled(3, 100, ids[:-1]).freeze()


def test_nbytes_reports_the_memory_the_history_holds() -> None:
    def build() -> EventHistory:
        history = EventHistory(500, 100_000)
        for n in range(5_000):
            history.record(f"event-{n:06d}-" + "x" * 40)
        return history

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        history = build()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert history.count == 4_500
    # 500 ids of ~100 bytes, 4,500 fingerprints of 6 bytes, the containers
    assert 0.8 * held <= history.nbytes() <= 1.25 * held, (history.nbytes(), held)
    window_only = _filled(500, 0, [f"event-{n:06d}-" + "x" * 40 for n in range(500)])
    strings = sum(sys.getsizeof(i) for i in window_only.recent)
    assert window_only.nbytes() > strings + sys.getsizeof(window_only.recent)


def test_nbytes_of_a_window_without_fingerprints_is_what_it_allocated() -> None:
    """No fingerprint yet: the window's order, its lookup set and its ids are all the
    history holds, and the report counts each of them (within 4%; the order alone is 9%)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        history = _filled(1_000, 100, [f"evt-{n:08d}" for n in range(1_000)])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert history.count == 0
    assert 0.96 * held <= history.nbytes() <= 1.04 * held, (history.nbytes(), held)


def test_record_says_whether_an_id_is_new_and_stores_it_once() -> None:
    history = _filled(2, 10, ["a", "b", "c"])  # a is a fingerprint
    assert not history.record("a") and not history.record("c")
    assert (history.count, list(history.recent)) == (1, ["b", "c"])
    assert history.record("d") and list(history.recent) == ["c", "d"]
    assert history.count == 2


LAYOUTS = [
    # (ids carried, the id fed again, whether it was carried): the layouts above
    (
        [_id("a", b"\x00\x00\x00abc"), _id("q", b"abcabc"), _id("b", b"abcxyz"), "r"],
        b"abcabc",
        True,
    ),
    ([_id("a", b"xxxxxa"), _id("q", b"aaaaaa"), "r"], b"aaaaaa", True),
    ([_id("q", b"abcabc"), _id("next", b"abcxyz"), "recent"], b"abcabc", True),
    ([_id("a", b"\x00\x00\x00abc"), _id("b", b"abc\x09\x09\x09"), "r"], b"abcabc", False),
]


@pytest.mark.parametrize(("ids", "record", "carried"), LAYOUTS, ids=range(len(LAYOUTS)))
def test_record_tells_a_fingerprinted_id_by_its_aligned_record_only(
    ids: list[str], record: bytes, carried: bool
) -> None:
    """``record`` (the hot path) decides like ``in``: an id fed again is
    not new when its fingerprint is stored, whatever false matches surround it, and an id
    never carried is new even if its fingerprint spans two stored records."""
    history = _filled(1, 10, ids)
    again = _id("q" if carried else "never-carried", record)
    assert (again in history) is carried
    assert history.record(again) is not carried
