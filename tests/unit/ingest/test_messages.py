"""Message lists from consume() to columns (confluent-kafka's test constructor, no broker):
the accessor path, and the C builder against it."""

import os
import subprocess
import sys

import numpy as np
import pytest
from confluent_kafka import KafkaError, Message

from streamtrain.ingest import messages as builder
from streamtrain.ingest.messages import to_columns


def message(topic="t", partition=0, offset=0, value=b"x", ts=1000, error=None):
    return Message(
        topic=topic, partition=partition, offset=offset, value=value, timestamp=(1, ts), error=error
    )


def test_one_topic_to_columns():
    messages = [
        message(partition=i % 3, offset=i, value=bytes([i]) * i, ts=100 + i) for i in range(6)
    ]
    (records,), errors = to_columns(messages, "t")
    assert errors == []
    assert records.topic == "t"
    assert records.partitions.tolist() == [0, 1, 2, 0, 1, 2]
    assert records.offsets.tolist() == list(range(6))
    assert records.timestamps_ms.tolist() == [100 + i for i in range(6)]
    assert list(records.values()) == [bytes([i]) * i for i in range(6)]


def test_topics_are_split_in_arrival_order():
    messages = [message("a", offset=0), message("b", offset=5), message("a", offset=1)]
    chunks, _ = to_columns(messages)
    assert [(c.topic, c.offsets.tolist()) for c in chunks] == [("a", [0, 1]), ("b", [5])]


def test_error_events_are_separated_from_records():
    error = KafkaError(KafkaError._PARTITION_EOF, "eof")
    messages = [message(offset=0), message(offset=1, error=error), message(offset=2)]
    (records,), errors = to_columns(messages, "t")
    assert records.offsets.tolist() == [0, 2]
    assert [e.code() for e in errors] == [KafkaError._PARTITION_EOF]


def test_only_errors_gives_no_chunk():
    error = KafkaError(KafkaError._TRANSPORT, "down")
    chunks, errors = to_columns([message(error=error)], "t")
    assert chunks == []
    assert len(errors) == 1


def test_tombstones_become_empty_payloads():
    (records,), _ = to_columns([message(value=None, offset=0), message(value=b"ab", offset=1)], "t")
    assert list(records.values()) == [b"", b"ab"]


# -- the C column builder ---------------------------------------------------------------


def _python_columns(messages):
    (records,), _ = to_columns(list(messages))  # no single topic: always the accessors
    return records


@pytest.mark.parametrize("chooser", ["c", "python"])
@pytest.mark.parametrize(("n", "size"), [(10, 4), (12, 4), (3, 5), (1, 1), (700, 256)])
def test_batch_records_cuts_the_records_into_chunks_each_with_its_own_payloads(chooser, n, size):
    """One call for a whole consume(): chunks of ``size`` (the last shorter), each the
    columns the records alone would give, payload bounds from 0, payloads one buffer."""
    rng = np.random.default_rng(n)
    ragged = n % 2 == 0
    messages = [
        message(
            partition=i % 3,
            offset=1000 + i,
            value=(None if i % 5 == 2 else rng.bytes(int(rng.integers(0, 300))))
            if ragged
            else rng.bytes(200),
            ts=5000 + i,
        )
        for i in range(n)
    ]
    chunks, errors = to_columns(messages, "t", builder=chooser, batch_records=size)
    assert errors == []
    assert [len(c) for c in chunks] == [min(size, n - i) for i in range(0, n, size)]
    for k, chunk in enumerate(chunks):
        alone = _python_columns(messages[k * size : (k + 1) * size])
        for field in ("partitions", "offsets", "timestamps_ms", "payload_bounds"):
            assert np.array_equal(getattr(chunk, field), getattr(alone, field)), (k, field)
        assert chunk.payloads == alone.payloads
        lengths = alone.payload_lengths()
        assert chunk.payload_length_range() == (int(lengths.min()), int(lengths.max()))


def test_the_set_up_builds_the_c_builder_and_finds_the_message_layout():
    # `make setup` compiles it (setup.py); CI must not silently run the slow path.
    if builder.active_builder() != "c" and os.environ.get("CI") != "true":
        pytest.skip("the C column builder is not built here (no C compiler?)")
    assert builder.active_builder() == "c"
    layout = builder.message_layout()
    assert layout is not None and len(set(layout)) == 5
    assert all(0 < at < Message.__basicsize__ for at in layout)


@pytest.mark.skipif(builder.active_builder() != "c", reason="the C column builder is not built")
@pytest.mark.parametrize("n", [100, 2_000], ids=["copy-with-gil", "copy-without-gil"])
def test_c_builder_gives_the_accessor_paths_columns(n):
    """Below 64 KiB of payloads the C builder copies with the GIL held, above without."""
    rng = np.random.default_rng(3)
    messages = [
        message(
            partition=int(rng.integers(0, 2**31 - 1)),
            offset=int(rng.integers(0, 2**62)),
            value=None if i % 7 == 3 else rng.bytes(int(rng.integers(0, 300))),
            ts=int(rng.integers(-1, 2**50)),
        )
        for i in range(n)
    ]
    (fast,), errors = to_columns(messages, "t")
    slow = _python_columns(messages)
    assert errors == [] and builder.active_builder() == "c"
    for field in ("partitions", "offsets", "timestamps_ms", "payload_bounds"):
        assert np.array_equal(getattr(fast, field), getattr(slow, field)), field
    assert fast.payloads == slow.payloads
    assert fast.partitions.dtype == np.int32 and fast.offsets.dtype == np.int64
    # the range the C builder saw while copying is the one the lengths give
    lengths = slow.payload_lengths()
    assert fast.payload_length_range() == (int(lengths.min()), int(lengths.max()))


@pytest.mark.skipif(builder.active_builder() != "c", reason="the C column builder is not built")
def test_c_builder_leaves_batches_with_errors_to_the_accessor_path():
    error = KafkaError(KafkaError._PARTITION_EOF, "eof")
    messages = [message(offset=0), message(offset=1, error=error), message(offset=2)]
    (records,), errors = to_columns(messages, "t")
    assert records.offsets.tolist() == [0, 2] and len(errors) == 1
    assert builder.active_builder() == "c"  # an error event is not a disagreement


def test_a_wrong_layout_is_caught_by_the_spot_check_and_switches_to_the_accessors(
    monkeypatch, caplog
):
    found = builder._c_builder()
    if found is None:
        pytest.skip("the C column builder is not built")
    module, layout = found
    value_at, error_at, partition_at, offset_at, timestamp_at = layout
    swapped = (value_at, error_at, partition_at, timestamp_at, offset_at)
    monkeypatch.setattr(builder, "_C", (module, swapped))
    messages = [message(offset=10 + i, ts=5000 + i) for i in range(4)]
    (records,), _ = to_columns(messages, "t")
    assert records.offsets.tolist() == [10, 11, 12, 13]  # right anyway: the accessor path
    assert records.timestamps_ms.tolist() == [5000, 5001, 5002, 5003]
    assert builder.active_builder() == "python" and builder._C is None
    assert "disagrees" in caplog.text


def test_the_python_builder_is_chosen_by_parameter_not_environment(monkeypatch):
    monkeypatch.setenv("STREAMTRAIN_INGEST_BUILDER", "python")  # read only by the CLI
    assert builder.active_builder("python") == "python"
    messages = [message(offset=i, value=bytes([i])) for i in range(3)]
    (records,), _ = to_columns(messages, "t", builder="python")
    assert records.offsets.tolist() == [0, 1, 2]
    assert list(records.values()) == [b"\x00", b"\x01", b"\x02"]


def test_importing_the_module_builds_no_probe():
    code = (
        "import streamtrain.ingest.messages as m; "
        "assert m._C is None and not m._c_probed; "
        "m.active_builder(); assert m._c_probed"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_extension_built_from_older_source_is_not_called(monkeypatch, caplog):
    """A stale build has the old fill(): the accessor path instead of a crash."""
    import types

    import streamtrain

    stale = types.ModuleType("streamtrain._columns")
    stale.__dict__["fill"] = lambda *args: None  # the old seven-argument fill, never called
    monkeypatch.setitem(sys.modules, "streamtrain._columns", stale)
    monkeypatch.setattr(streamtrain, "_columns", stale, raising=False)
    assert builder._find_c_builder() is None
    assert "older source" in caplog.text
