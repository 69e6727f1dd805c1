"""A worker's memory against its local queue: record bytes, the queue's count, the bound,
and the heap settings that keep per-batch buffers off fresh pages."""

import sys

import pytest

from streamtrain.heap import keep_large_buffers_in_heap
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.memory import (
    COLUMN_BYTES_PER_RECORD,
    RSS_CONSTANT_MIB,
    memory_report,
    record_bytes,
    rss_bound_bytes,
    rss_bytes,
)
from streamtrain.testing import records


def test_a_record_costs_its_payload_and_four_column_entries():
    chunk = records(0, 10)
    assert record_bytes(chunk) == chunk.payload_bytes + 10 * COLUMN_BYTES_PER_RECORD


def test_the_queue_counts_its_bytes_and_their_peak():
    queue = LocalQueue(1_000)
    first, second = records(0, 100), records(100, 50)
    queue.put(first)
    queue.put(second)
    both = record_bytes(first) + record_bytes(second)
    assert queue.queued_bytes == queue.peak_bytes == both
    taken = queue.get(60, timeout_s=0)
    assert taken is not None
    assert queue.queued_bytes == both - record_bytes(taken)
    queue.drop("t", {0})
    assert queue.queued_bytes == 0
    assert queue.peak_bytes == both


def test_the_bound_is_twice_the_queue_plus_the_constant():
    assert rss_bound_bytes(10 * 2**20) == (20 + RSS_CONSTANT_MIB) * 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_the_report_says_whether_the_growth_stayed_within_the_bound():
    now = rss_bytes()
    assert now > 0
    report = memory_report(now, 10 * 2**20)
    assert report["rss_bound_mib"] == 20 + RSS_CONSTANT_MIB
    assert report["within_bound"] is (report["rss_growth_mib"] <= report["rss_bound_mib"])
    far_too_low_start = memory_report(1, 0)
    assert far_too_low_start["within_bound"] is False  # growth from 1 byte is above 32 MiB
    assert "rss_bound_mib" not in memory_report(now, None)  # a queue that does not count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_heap_settings_apply_once_on_glibc():
    assert keep_large_buffers_in_heap() is True
    assert keep_large_buffers_in_heap() is True
