"""LocalQueue: bounded in records, splits and joins chunks, drops revoked partitions."""

import threading
import time

import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.records import RecordColumns


def chunk(partitions, offsets, topic="t", forwarded=False):
    return RecordColumns.from_values(
        topic,
        partitions,
        offsets,
        [0] * len(offsets),
        [str(o).encode() for o in offsets],
        forwarded=forwarded,
    )


def get(queue, max_records=10):
    got = queue.get(max_records, timeout_s=0.1)
    assert got is not None
    return got


def test_get_returns_none_when_empty_after_timeout():
    queue = LocalQueue(10)
    assert queue.get(5, timeout_s=0.01) is None


def test_full_counts_records_and_put_never_blocks():
    queue = LocalQueue(4)
    queue.put(chunk([0, 0, 0], [0, 1, 2]))
    assert not queue.full
    queue.put(chunk([0, 0], [3, 4]))
    assert queue.full
    assert queue.records == 5


def test_get_joins_whole_chunks_that_fit_and_never_cuts_one_to_fill_up():
    queue = LocalQueue(100)
    queue.put(chunk([0, 0], [0, 1]))
    queue.put(chunk([1], [0]))
    queue.put(chunk([1, 1], [1, 2]))
    first = get(queue, 4)
    assert list(zip(first.partitions.tolist(), first.offsets.tolist(), strict=True)) == [
        (0, 0),
        (0, 1),
        (1, 0),
    ]
    assert get(queue, 4).offsets.tolist() == [1, 2]
    assert queue.records == 0


def test_get_splits_a_chunk_larger_than_the_batch():
    queue = LocalQueue(100)
    queue.put(chunk([0] * 5, [0, 1, 2, 3, 4]))
    assert get(queue, 2).offsets.tolist() == [0, 1]
    assert get(queue, 2).offsets.tolist() == [2, 3]
    assert get(queue, 2).offsets.tolist() == [4]
    assert queue.records == 0


def test_a_batch_never_mixes_topics_or_forwarded_records():
    queue = LocalQueue(100)
    queue.put(chunk([0], [0], topic="a"))
    queue.put(chunk([0], [0], topic="b"))
    queue.put(chunk([0], [1], topic="b", forwarded=True))
    assert [get(queue).topic for _ in range(2)] == ["a", "b"]
    assert get(queue).forwarded


def test_linger_waits_for_a_full_batch():
    queue = LocalQueue(100)
    queue.put(chunk([0], [0]))

    def later():
        time.sleep(0.05)
        queue.put(chunk([0], [1]))

    thread = threading.Thread(target=later)
    thread.start()
    batch = queue.get(2, timeout_s=2.0, linger_s=2.0)
    thread.join()
    assert batch is not None
    assert batch.offsets.tolist() == [0, 1]


def test_drop_removes_only_revoked_partitions_of_that_topic():
    queue = LocalQueue(100)
    queue.put(chunk([0, 1, 0, 1], [0, 0, 1, 1]))
    queue.put(chunk([1], [0], topic="other"))
    assert queue.drop("t", {1}) == 2
    assert queue.records == 3
    assert get(queue).partitions.tolist() == [0, 0]
    assert get(queue).topic == "other"


def test_close_wakes_a_waiting_reader():
    queue = LocalQueue(10)
    result = []
    thread = threading.Thread(target=lambda: result.append(queue.get(1, timeout_s=10)))
    thread.start()
    time.sleep(0.05)
    queue.close()
    thread.join(5)
    assert not thread.is_alive()
    assert result == [None]


def test_bad_sizes_are_rejected():
    with pytest.raises(ConfigError):
        LocalQueue(0)
    with pytest.raises(ConfigError):
        LocalQueue(1).get(0, 0.0)
