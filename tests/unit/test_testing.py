"""The test doubles shipped in streamtrain.testing: the record builder and the recording
acknowledger (the scripted forecaster and policy are exercised by the scale tests)."""

from streamtrain.testing import RecordingAcknowledger, merge_ranges, records


def test_records_are_consecutive_offsets_of_one_partition():
    chunk = records(10, 3, 2)
    assert (chunk.topic, chunk.partitions.tolist(), chunk.offsets.tolist()) == (
        "t",
        [2, 2, 2],
        [10, 11, 12],
    )
    assert list(chunk.values()) == [b"r2-10", b"r2-11", b"r2-12"]
    assert not chunk.forwarded
    forwarded = records(0, 2, topic="u", forwarded=True, payload=b"x")
    assert forwarded.forwarded and forwarded.topic == "u"
    assert list(forwarded.values()) == [b"x", b"x"]
    assert len(records(0, 0)) == 0


def test_merge_ranges():
    assert merge_ranges([(5, 6), (0, 2), (3, 4), (8, 9)]) == [(0, 6), (8, 9)]


def test_recording_acknowledger_position_stops_at_first_gap():
    acks = RecordingAcknowledger()
    acks.ack("t", 0, 0, 9)
    acks.ack("t", 0, 20, 29)
    assert acks.position("t", 0) == 10
    acks.ack("t", 0, 10, 19)
    assert acks.position("t", 0) == 30
    assert acks.covered("t", 0) == [(0, 29)]
    assert acks.acked_records("t", 0) == 30
    assert acks.position("t", 1) == 0
