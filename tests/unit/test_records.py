"""The shared record types: RecordColumns (offset ranges, concat, payload lengths), offset
runs in record order and merged, dropping revoked partitions."""

import numpy as np
import pytest

from streamtrain import records as records_module
from streamtrain.errors import ConfigError
from streamtrain.records import RecordColumns, contiguous_runs, drop_partitions, runs_of


def chunk(partitions, offsets, values=None, topic="t", forwarded=False):
    values = values or [f"v{o}".encode() for o in offsets]
    return RecordColumns.from_values(
        topic, partitions, offsets, [0] * len(offsets), values, forwarded=forwarded
    )


def test_offset_ranges_follow_record_order():
    records = chunk([0, 0, 1, 1, 0], [5, 6, 9, 10, 7])
    assert records.offset_ranges() == [(0, 5, 6), (1, 9, 10), (0, 7, 7)]


def test_offset_ranges_of_finely_interleaved_partitions_are_merged():
    partitions = [i % 4 for i in range(400)]
    offsets = [i // 4 for i in range(400)]
    records = chunk(partitions, offsets)
    assert records.offset_ranges() == [(p, 0, 99) for p in range(4)]


def test_offset_ranges_cover_exactly_the_records():
    rng = np.random.default_rng(0)
    partitions = rng.integers(0, 3, 300).tolist()
    offsets = [int(o) for o in rng.integers(0, 50, 300)]
    covered = sorted(
        (p, o) for p, a, b in chunk(partitions, offsets).offset_ranges() for o in range(a, b + 1)
    )
    assert covered == sorted(zip(partitions, offsets, strict=True))


def test_offset_ranges_split_at_gaps_and_repeats():
    records = chunk([2, 2, 2, 2, 2], [1, 2, 5, 5, 6])
    assert records.offset_ranges() == [(2, 1, 2), (2, 5, 5), (2, 5, 6)]


def test_offset_ranges_of_nothing():
    assert chunk([], []).offset_ranges() == []


def test_concat_keeps_order_and_payloads():
    a = chunk([0, 0], [1, 2], [b"a", b"bb"])
    b = chunk([1], [7], [b"ccc"])
    joined = RecordColumns.concat([a, b])
    assert list(joined.values()) == [b"a", b"bb", b"ccc"]
    assert joined.offsets.tolist() == [1, 2, 7]
    assert joined.partitions.tolist() == [0, 0, 1]
    assert joined.payload_lengths().tolist() == [1, 2, 3]
    assert RecordColumns.concat([a]) is a


@pytest.mark.parametrize(
    "other", [chunk([0], [1], topic="u"), chunk([0], [1], forwarded=True)], ids=["topic", "fwd"]
)
def test_concat_refuses_mixed_chunks(other):
    with pytest.raises(ConfigError):
        RecordColumns.concat([chunk([0], [0]), other])
    with pytest.raises(ConfigError):
        RecordColumns.concat([])


def test_lease_ids_follow_the_records_through_take_and_concat():
    a = chunk([0, 0, 0], [1, 2, 3], [b"a", b"b", b"c"]).leased(np.array([7, 7, 8]))
    b = chunk([1], [9], [b"d"]).leased(np.array([9]))
    for picked in (a.take(np.array([0, 2])), a.take(slice(1, 3))):
        assert picked.lease_ids is not None and picked.lease_ids.tolist() == [7, 8]
    joined = RecordColumns.concat([a, b]).lease_ids
    assert joined is not None and joined.tolist() == [7, 7, 8, 9]
    assert chunk([0], [1]).lease_ids is None
    with pytest.raises(ConfigError):
        RecordColumns.concat([a, chunk([0], [4])])  # lease ids on some only
    with pytest.raises(ConfigError):
        chunk([0, 0], [1, 2]).leased(np.array([1]))  # one per record


def test_omit_keeps_the_other_records_in_order_with_their_payloads():
    records = chunk([0, 1, 0, 1], [1, 2, 3, 4], [b"a", b"bb", b"", b"d"]).leased(
        np.array([5, 6, 7, 8])
    )
    rest = records.omit(np.array([2, 0]))
    assert rest.offsets.tolist() == [2, 4]
    assert list(rest.values()) == [b"bb", b"d"]
    assert rest.lease_ids is not None and rest.lease_ids.tolist() == [6, 8]
    assert len(records.omit(np.array([], dtype=np.intp))) == 4
    assert len(records.omit(np.arange(4))) == 0


def test_payload_bytes_and_lengths():
    records = chunk([0, 0, 0], [0, 1, 2], [b"", b"xy", b"z"])
    assert records.payload_bytes == 3
    assert records.payload_lengths().dtype == np.int64
    assert records.payload_lengths().tolist() == [0, 2, 1]
    assert records.payload_length_range() == (0, 2)
    assert chunk([], [], []).payload_length_range() == (0, 0)


def test_offset_runs_from_the_c_extension_match_numpys():
    records = records_module
    try:
        from streamtrain._columns import offset_runs
    except ImportError:
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(11)
    for case in range(200):
        n = int(rng.integers(1, 300))
        partitions = rng.integers(0, 1 + case % 5, n).astype(np.int32)
        offsets = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)  # gaps and repeats
        if case % 3 == 0:
            partitions.sort()
        chunk = RecordColumns(
            "t", partitions, offsets, np.zeros(n, np.int64), b"", np.zeros(n + 1, np.int64)
        )
        fast = offset_runs(partitions, offsets, records._MAX_UNSORTED_RUNS)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(records, "_c_offset_runs", None)
            slow = records.offset_runs(chunk.partitions, chunk.offsets)
        if fast is None:  # too many runs in record order: numpy sorts by partition instead
            breaks = (partitions[1:] != partitions[:-1]) | (np.diff(offsets) != 1)
            assert int(breaks.sum()) + 1 > records._MAX_UNSORTED_RUNS
        else:
            assert fast == slow, case
    big = np.arange(10, dtype=np.int64)
    assert offset_runs(np.zeros(10, np.int32), big, 64) == [(0, 0, 9)]
    assert offset_runs(np.zeros(0, np.int32), big[:0], 64) == []
    with pytest.raises(ValueError, match="int32 partitions"):
        offset_runs(np.zeros(3, np.int64), big[:3], 64)


def _runs(partitions, offsets):
    return contiguous_runs(
        np.asarray(partitions, dtype=np.int32), np.asarray(offsets, dtype=np.int64)
    )


def test_runs_group_by_partition_and_split_on_gaps():
    assert _runs([0, 0, 0, 1, 1, 0], [5, 6, 7, 3, 4, 9]) == [(0, 5, 7), (0, 9, 9), (1, 3, 4)]


def test_runs_any_order_and_duplicates():
    assert _runs([2, 2, 2, 2], [11, 10, 10, 12]) == [(2, 10, 12)]


def test_runs_empty():
    assert _runs([], []) == []


def test_runs_of_cut_records_in_the_order_given():
    parts = np.asarray([0, 0, 1, 1, 0, 0, 0], dtype=np.int32)
    offs = np.asarray([5, 6, 9, 10, 7, 7, 6], dtype=np.int64)
    assert runs_of(parts, offs) == [(0, 5, 6), (1, 9, 10), (0, 7, 7), (0, 7, 7), (0, 6, 6)]
    assert runs_of(parts[:0], offs[:0]) == []


def test_record_order_and_merged_runs_cover_the_same_records():
    rng = np.random.default_rng(4)
    parts = rng.integers(0, 4, 500).astype(np.int32)
    offs = rng.integers(0, 80, 500).astype(np.int64)
    in_order = {
        (p, o) for p, a, b in records_module.offset_runs(parts, offs) for o in range(a, b + 1)
    }
    merged = {(p, o) for p, a, b in contiguous_runs(parts, offs) for o in range(a, b + 1)}
    assert in_order == merged == set(zip(parts.tolist(), offs.tolist(), strict=True))


def test_drop_partitions_keeps_other_records_and_counts_the_rest():
    chunks = [chunk([0, 1, 2], [0, 0, 0]), chunk([1, 1], [1, 2]), chunk([0], [1], topic="u")]
    kept, dropped = drop_partitions(chunks, "t", {1})
    assert dropped == 3
    assert [(c.topic, c.partitions.tolist()) for c in kept] == [("t", [0, 2]), ("u", [0])]


def test_payload_bounds_from_lengths():
    assert records_module.payload_bounds([3, 0, 2]).tolist() == [0, 3, 3, 5]
    assert records_module.payload_bounds(np.array([], dtype=np.int64)).tolist() == [0]
    assert records_module.payload_bounds([]).dtype == np.int64
