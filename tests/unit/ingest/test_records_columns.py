"""RecordColumns additions used by ingest: offset ranges, concat, payload lengths."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.records import RecordColumns


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


def test_payload_bytes_and_lengths():
    records = chunk([0, 0, 0], [0, 1, 2], [b"", b"xy", b"z"])
    assert records.payload_bytes == 3
    assert records.payload_lengths().dtype == np.int64
    assert records.payload_lengths().tolist() == [0, 2, 1]
