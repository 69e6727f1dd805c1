"""Worker metrics: rates by differencing totals, throughput samples, Prometheus series."""

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from streamtrain.ingest.metrics import (
    MetricsSnapshot,
    WorkerMetrics,
    disturbed_s,
    lockstep_capacity,
    rates,
    throughput_sample,
)
from streamtrain.ingest.reporting import WorkerCollector
from streamtrain.ingest.tracker import OffsetTracker, PartitionProgress
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import decode, encode


def test_rates_difference_totals_over_the_window():
    a = MetricsSnapshot(at_s=10.0, records_consumed=100, records_trained=50)
    b = MetricsSnapshot(at_s=12.0, records_consumed=1100, records_trained=850)
    assert rates(a, b) == (500.0, 400.0)
    assert rates(b, b) == (0.0, 0.0)


def test_throughput_sample_carries_rates_pool_and_positions():
    partitions = {
        ("t", 1): PartitionProgress(committed=5, consumed=20, in_flight_records=3),
        ("t", 0): PartitionProgress(committed=None, consumed=None, in_flight_records=0),
    }
    a = MetricsSnapshot(at_s=0.0)
    b = MetricsSnapshot(at_s=5.0, records_consumed=1000, records_trained=500, partitions=partitions)
    sample = throughput_sample(a, b, job="job", worker_id="w1", workers=3, observed_at_ms=1234)
    assert sample.records_per_s_consumed == 200.0
    assert sample.records_per_s_trained == 100.0
    assert sample.workers == 3
    assert sample.window_s == 5.0
    assert [(p.topic, p.partition, p.offset) for p in sample.positions] == [("t", 1, 20)]
    again = decode(pb.ThroughputSample, encode(sample))
    assert again.schema_version == 1
    assert again.worker_id == "w1"
    assert not sample.HasField("busy_fraction")  # no step times reported


def test_throughput_sample_says_how_busy_the_trainer_was():
    a = MetricsSnapshot(at_s=0.0, busy_s=1.0)
    b = MetricsSnapshot(at_s=10.0, records_trained=500, busy_s=3.5)
    sample = throughput_sample(a, b, job="j", worker_id="w", workers=1, observed_at_ms=1)
    assert sample.busy_fraction == 0.25
    metrics = WorkerMetrics()
    metrics.add(busy_s=0.5)
    metrics.add(busy_s=0.25)
    assert metrics.snapshot().busy_s == 0.75


def test_worker_metrics_snapshot_reads_live_sources():
    tracker = OffsetTracker()
    tracker.assign("t", 0, 3)
    tracker.handed_out("t", 0, 3, 9)
    metrics = WorkerMetrics()
    metrics.bind(tracker.progress, lambda: {"queue_records": 7, "in_flight_records": 7})
    metrics.add(consumed=7, trained=2, dead_letters=1, commits=1)
    snap = metrics.snapshot()
    assert (snap.records_consumed, snap.records_trained, snap.dead_letters) == (7, 2, 1)
    assert snap.queue_records == 7
    assert snap.partitions[("t", 0)].consumed == 10


def test_prometheus_series():
    tracker = OffsetTracker()
    tracker.assign("t", 2, 4)
    tracker.handed_out("t", 2, 4, 9)
    metrics = WorkerMetrics(tracker.progress, lambda: {"queue_records": 6, "stale_acks": 1})
    metrics.add(consumed=6, trained=4)
    registry = CollectorRegistry()
    registry.register(WorkerCollector(metrics, "w1"))
    text = generate_latest(registry).decode()
    assert 'streamtrain_worker_records_consumed_total{worker="w1"} 6.0' in text
    assert 'streamtrain_worker_records_trained_total{worker="w1"} 4.0' in text
    assert 'streamtrain_worker_stale_acks_total{worker="w1"} 1.0' in text
    assert 'streamtrain_worker_local_queue_records{worker="w1"} 6.0' in text
    assert 'streamtrain_worker_partition_position{partition="2",topic="t",worker="w1"} 10.0' in text
    assert 'streamtrain_worker_partition_committed{partition="2",topic="t",worker="w1"} 4.0' in text


def test_prometheus_shuffle_series_are_zero_without_a_shuffle_and_its_totals_with_one():
    metrics = WorkerMetrics()
    plain = CollectorRegistry()
    plain.register(WorkerCollector(metrics, "w1"))
    text = generate_latest(plain).decode()
    assert 'streamtrain_worker_shuffle_records_forwarded_total{worker="w1"} 0.0' in text
    assert 'streamtrain_worker_shuffle_peers{worker="w1"} 0.0' in text
    totals = {"peers": 3, "records_forwarded": 40, "records_received": 7, "batches_timed_out": 1}
    shuffled = CollectorRegistry()
    shuffled.register(WorkerCollector(metrics, "w2", lambda: totals))
    text = generate_latest(shuffled).decode()
    assert 'streamtrain_worker_shuffle_records_forwarded_total{worker="w2"} 40.0' in text
    assert 'streamtrain_worker_shuffle_records_received_total{worker="w2"} 7.0' in text
    assert 'streamtrain_worker_shuffle_batches_timed_out_total{worker="w2"} 1.0' in text
    assert 'streamtrain_worker_shuffle_batches_rejected_total{worker="w2"} 0.0' in text
    assert 'streamtrain_worker_shuffle_peers{worker="w2"} 3.0' in text


def test_throughput_sample_says_the_mean_step_time_when_steps_are_counted():
    a = MetricsSnapshot(at_s=0.0, busy_s=1.0, steps=10)
    b = MetricsSnapshot(at_s=10.0, records_trained=500, busy_s=3.5, steps=60)
    sample = throughput_sample(a, b, job="j", worker_id="w", workers=1, observed_at_ms=1)
    assert sample.step_time_ms == 50.0  # 2.5 s over 50 steps
    quiet = throughput_sample(b, b, job="j", worker_id="w", workers=1, observed_at_ms=2)
    assert not quiet.HasField("step_time_ms")  # no step in the window
    metrics = WorkerMetrics()
    metrics.add(busy_s=0.5, steps=1)
    metrics.add(busy_s=0.25, steps=1)
    assert metrics.snapshot().steps == 2


def test_a_sample_says_when_its_first_disturbed_round_began():
    """A failed round that began before the window (the peers waited out a dead rank's
    collective timeout) reaches back before the window; none: no field."""
    metrics = WorkerMetrics()
    start = metrics.snapshot()
    quiet = metrics.snapshot()
    assert not throughput_sample(
        start, quiet, job="j", worker_id="w", workers=2, observed_at_ms=1
    ).HasField("disturbed_s")
    metrics.disturbed(quiet.at_s - 4.0)  # began 4 s before the window
    metrics.disturbed(quiet.at_s + 0.001)
    after = metrics.snapshot()
    sample = throughput_sample(quiet, after, job="j", worker_id="w", workers=2, observed_at_ms=1)
    assert sample.disturbed_s == pytest.approx(after.at_s - quiet.at_s + 4.0)
    assert disturbed_s(after, metrics.snapshot()) is None  # counted once


def test_more_disturbed_rounds_than_kept_reach_back_to_the_window_start_at_least():
    a = MetricsSnapshot(at_s=100.0, disturbed_rounds=3)
    b = MetricsSnapshot(at_s=110.0, disturbed_rounds=30, disturbances=((30, 109.0),))
    assert disturbed_s(a, b) == pytest.approx(10.0)


def test_a_lockstep_workers_capacity_is_its_compute_per_full_batch_plus_the_sync():
    """Rounds of 64 records at 2 ms a record, whose rest (quorum, all-reduces, peers)
    took 0.1 s at least and up to 0.9 s while the peers waited for data: with full
    batches of 256 a round takes 0.512 + 0.1 s. The step time (0.228-1.028 s a round)
    read as busy would have put the capacity at the traffic."""
    metrics = WorkerMetrics()
    metrics.lockstep(256)
    before = metrics.snapshot()
    for rest_s in (0.1, 0.1, 0.1, 0.9, 0.5, 0.9, 0.1, 0.9):
        metrics.lockstep_round(0.128 + rest_s, 0.128, 64)
    metrics.add(trained=8 * 64)  # the source counts acknowledged records
    after = replace(metrics.snapshot(), at_s=before.at_s + 10.0)  # a 10-s window
    capacity = lockstep_capacity(before, after)
    assert capacity == pytest.approx(256 / (0.512 + 0.1))
    trained = 8 * 64 / 10.0
    sample = throughput_sample(before, after, job="j", worker_id="w", workers=3, observed_at_ms=1)
    assert sample.records_per_s_trained / sample.busy_fraction == pytest.approx(capacity)
    assert sample.records_per_s_trained == pytest.approx(trained)


def test_a_lockstep_worker_that_trained_nothing_says_nothing_about_its_capacity():
    metrics = WorkerMetrics()
    metrics.lockstep(256)
    metrics.lockstep_round(1.0, 0.5, 100)
    before = metrics.snapshot()
    metrics.add(busy_s=3.0, steps=3)  # empty rounds only
    after = metrics.snapshot()
    assert lockstep_capacity(before, after) is None
    sample = throughput_sample(before, after, job="j", worker_id="w", workers=3, observed_at_ms=1)
    assert sample.busy_fraction == 0.0  # below the planner's minimum: left out
