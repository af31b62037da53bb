"""The per-stream event history (fsm.sse.history): what it answers for, exactly and by
fingerprint, its bounds, its memory report, and its snapshot.

Fingerprint lookups are tested with ids whose hash the test chooses (a ``str`` subclass),
so the byte layout of a bucket is known: a stored id must be recognised whatever its
neighbours hold, and no id may match across two neighbouring records.
"""

from __future__ import annotations

import sys
import tracemalloc

import pytest

from fsm.sse.history import FINGERPRINT_BITS, EventHistory

# the module's layout: bytes 1-6 of the little-endian hash are filed (6 bytes), and its top
# 10 bits (byte 7 and the top 2 bits of byte 6) pick the bucket


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


def _id(text: str, record: bytes, bucket: bytes = b"a") -> Hashed:
    """An id whose filed fingerprint is the 6 bytes ``record``; ids with the same ``bucket``
    byte whose records end in bytes with the same top 2 bits share a bucket."""
    assert len(record) == 6 and len(bucket) == 1
    return Hashed(text, int.from_bytes(b"\x00" + record + bucket, "little", signed=True))


def _laid_out(ids: list[str]) -> EventHistory:
    """A one-id window over ``ids``, each filed into its bucket before the next leaves the
    window: one bucket's bytes are the records of ``ids[:-1]`` in this order."""
    history = EventHistory(1, 10)
    for event_id in ids:
        assert history.record(event_id)
        assert "" not in history  # a lookup files the pending fingerprint
    return history


def _filled(window: int, cap: int, ids: list[str]) -> EventHistory:
    history = EventHistory(window, cap)
    for event_id in ids:
        assert history.record(event_id)  # new to the stream
    return history


def test_fingerprints_take_56_bits() -> None:
    assert FINGERPRINT_BITS == 56


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
    # a fingerprint match of a new id has probability ~ 48 / 2**56 here
    assert not any(i in history for i in fresh)


def test_non_string_ids_never_match_a_fingerprint() -> None:
    carried = _id("carried", b"abc\x00\x00\x00", b"\x00")  # a hash an int can have
    history = _filled(1, 10, [carried, "e-next"])  # carried is a fingerprint now
    assert carried in history
    assert hash(carried.h) == carried.h and carried.h not in history  # an int, same hash
    assert None not in history


# Bucket layouts (6-byte records, one bucket: bucket byte "a", records ending in letters).
BOTH_SIDES = [_id("a", b"\x00\x00\x00abc"), _id("q", b"abcabc"), _id("b", b"abcxyz"), "r"]
"""000abc abcabc abcxyz: the query abcabc occurs at offsets 3, 6 (its record) and 9."""
RIGHT_AFTER = [_id("a", b"xxxxxa"), _id("q", b"aaaaaa"), "r"]
"""xxxxxa aaaaaa: the query aaaaaa occurs at offset 5, then at 6 (its record)."""
BEFORE = [_id("q", b"abcabc"), _id("b", b"abcxyz"), "r"]
"""abcabc abcxyz: the query's record at 0, then the query again at 3, misaligned."""
ACROSS = [_id("a", b"\x00\x00\x00abc"), _id("b", b"abcxyz"), "r"]
"""000abc abcxyz: abcabc occurs at offset 3 only, the tail of one record and the head of
the next."""


def test_every_layout_shares_one_bucket() -> None:
    for layout in (BOTH_SIDES, RIGHT_AFTER, BEFORE, ACROSS):
        assert len({hash(i) >> 54 for i in layout[:-1]}) == 1
    assert hash(_id("q", b"abcabc")) >> 54 == hash(_id("q", b"aaaaaa")) >> 54


def test_a_stored_id_is_found_among_false_matches_on_both_sides() -> None:
    assert _id("q", b"abcabc") in _laid_out(BOTH_SIDES)


def test_a_stored_id_is_found_right_after_a_false_match() -> None:
    assert _id("q", b"aaaaaa") in _laid_out(RIGHT_AFTER)


def test_a_stored_id_is_found_before_a_false_match_across_two_records() -> None:
    history = _laid_out(BEFORE)
    assert history.count == 2
    assert _id("q", b"abcabc") in history


def test_no_id_matches_the_tail_of_one_record_and_the_head_of_the_next() -> None:
    history = _laid_out(ACROSS)
    assert history.count == 2
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
    (BOTH_SIDES, b"abcabc", True),
    (RIGHT_AFTER, b"aaaaaa", True),
    (BEFORE, b"abcabc", True),
    (ACROSS, b"abcabc", False),
]


@pytest.mark.parametrize(("ids", "record", "carried"), LAYOUTS, ids=range(len(LAYOUTS)))
def test_record_tells_a_fingerprinted_id_by_its_aligned_record_only(
    ids: list[str], record: bytes, carried: bool
) -> None:
    """``record`` (the hot path) decides like ``in``: an id fed again is
    not new when its fingerprint is stored, whatever false matches surround it, and an id
    never carried is new even if its fingerprint spans two stored records."""
    history = _laid_out(ids)
    again = _id("q" if carried else "never-carried", record)
    assert (again in history) is carried
    assert history.record(again) is not carried


@pytest.mark.parametrize(("window", "batch"), [(7, 1), (9, 2), (1024, 256)])
def test_the_batch_is_a_whole_quarter_of_the_window(window: int, batch: int) -> None:
    history = EventHistory(window, 10_000)
    assert history.batch == batch
    sizes = []
    for n in range(3 * (window + batch)):
        history.record_live(f"e{n}")
        sizes.append(len(history.recent))
    assert max(sizes) == window + batch - 1


def test_ids_leave_the_window_in_batches_of_a_quarter() -> None:
    history = EventHistory(8, 100)
    assert history.batch == 2
    sizes = []
    for n in range(30):
        history.record_live(f"e{n}")
        sizes.append(len(history.recent))
    assert max(sizes) == 9 and min(sizes[8:]) == 8  # window .. window + batch - 1
    assert history.recent == [f"e{n}" for n in range(30 - len(history.recent), 30)]
    assert history.count == 30 - len(history.recent)
    assert all(f"e{n}" in history for n in range(30))


def test_a_live_record_checks_the_window_only_and_newest_finds_the_repeat() -> None:
    history = _filled(2, 100, [f"e{n}" for n in range(10)])  # e0-e7 are fingerprints
    assert not history.record_live("e9")  # still in the window: a duplicate
    assert not history.record("e3")  # against everything: a duplicate
    assert history.record_live("e3")  # the window alone takes it as new
    assert history.recent[-1] == "e3"
    assert history.newest() == "e9"  # the newest id that was new when recorded
    assert history.record_live("e10")
    assert history.newest() == "e10"


def test_newest_is_none_when_the_window_holds_only_repeats() -> None:
    history = _filled(2, 100, [f"e{n}" for n in range(10)])
    assert EventHistory(2, 100).newest() is None  # nothing recorded
    assert history.record_live("e1") and history.record_live("e2")  # the window: e1, e2
    assert list(history.recent) == ["e1", "e2"]
    assert history.newest() is None


def test_fingerprints_filed_in_several_chunks_answer_like_one() -> None:
    ids = [f"id-{n}" for n in range(40_000)]  # more than two filing chunks
    history = EventHistory(1, 100_000)
    for event_id in ids:
        assert history.record_live(event_id)
    assert history.count == 39_999
    assert all(i in history for i in ids[::97])
    assert not any(f"never-{n}" in history for n in range(2_000))


def test_freeze_files_what_is_pending_and_equals_a_filed_copy() -> None:
    ids = [f"e{n}" for n in range(50)]
    pending = _filled(4, 100, ids)
    filed = _filled(4, 100, ids)
    assert "e0" in filed  # a lookup filed its fingerprints
    assert pending.freeze() == filed.freeze()


def test_freeze_does_not_depend_on_when_fingerprints_were_filed() -> None:
    ids = [f"e{n}" for n in range(3_000)]
    early, late = EventHistory(4, 10_000), EventHistory(4, 10_000)
    for n, event_id in enumerate(ids):
        early.record_live(event_id)
        late.record_live(event_id)
        if n % 7 == 0:
            assert "" not in early  # files what is pending, a few at a time
    assert early.freeze() == late.freeze()


def test_nbytes_counts_pending_fingerprints_and_the_buckets() -> None:
    """Almost all a one-id window over 20,000 ids holds is fingerprints: pending (7 bytes
    each), then filed into the buckets (6 bytes each, 1,024 bucket headers and the dictionary of
    them). The report counts each part (within 5%, for what else the process allocates
    meanwhile; the buckets' dictionary alone is some 20%)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        history = EventHistory(1, 100_000)
        for n in range(20_000):
            history.record_live(f"id-{n:07d}")  # nothing looked up: all pending
        pending = tracemalloc.get_traced_memory()[0] - before
        assert history.count == 19_999 and not history._buckets
        assert 0.95 * pending <= history.nbytes() <= 1.05 * pending, (history.nbytes(), pending)
        assert "" not in history  # files them
        filed = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # filed: within 3% (the bucket numbers alone are 5%)
    assert 0.97 * filed <= history.nbytes() <= 1.03 * filed, (history.nbytes(), filed)


def test_newest_without_fingerprints_is_the_last_id_recorded() -> None:
    assert _filled(4, 100, ["a", "b", "c"]).newest() == "c"
    assert _filled(4, 0, ["a"]).newest() == "a"


def test_a_thawed_history_answers_like_its_original_with_many_ids_per_bucket() -> None:
    ids = [f"e{n}" for n in range(6_000)]  # about 6 fingerprints per bucket
    history = _filled(4, 10_000, ids)
    frozen = history.freeze()
    copy = EventHistory.thaw(4, 10_000, frozen)
    assert all(i in copy for i in ids)
    assert not any(f"never-{n}" in copy for n in range(1_000))
    assert copy.freeze() == frozen
