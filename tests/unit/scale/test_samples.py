"""Throughput samples to job-level observations and the prior/measured estimate; no broker."""

import math

import pytest

from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.models import modelarts_prior
from streamtrain.scale.samples import (
    JobWindow,
    SampleBook,
    SampleSettings,
    capacity_records_per_s,
    estimate_throughput,
    job_windows,
    materially_different,
    model_coefficients,
    sample_problem,
)

T0_MS = 1_700_000_000_000


def sample(worker, workers, rate, at_ms=T0_MS, job="demo", window_s=5.0):
    return cp.ThroughputSample(
        job=job,
        worker_id=worker,
        workers=workers,
        records_per_s_trained=rate,
        window_s=window_s,
        observed_at_ms=at_ms,
    )


def problem(bad):
    why = sample_problem(bad, "demo")
    assert why is not None
    return why


def estimated(windows, settings, max_workers):
    result = estimate_throughput(windows, settings, max_workers=max_workers)
    assert result is not None
    return result


def test_bad_samples_say_why():
    assert sample_problem(sample("w0", 1, 5.0), "demo") is None
    assert "job" in problem(sample("w0", 1, 5.0, job="other"))
    assert "worker_id" in problem(sample("", 1, 5.0))
    assert "records_per_s_trained" in problem(sample("w0", 1, math.nan))
    assert "records_per_s_trained" in problem(sample("w0", 1, -1.0))
    assert "window_s" in problem(sample("w0", 1, 1.0, window_s=0))


def test_windows_sum_workers_and_count_a_duplicate_once():
    samples = [
        sample("w0", 2, 10.0, T0_MS + 1000),
        sample("w1", 2, 12.0, T0_MS + 2000),
        sample("w1", 2, 12.0, T0_MS + 2000),  # redelivered
    ]
    (window,) = job_windows(samples, bucket_s=10, min_coverage=0.5)
    assert (window.workers, window.records_per_s, window.reporting_workers) == (2, 22.0, 2)


def test_a_partly_idle_worker_counts_at_its_capacity():
    idle = sample("w0", 1, 10.0)
    idle.busy_fraction = 0.25  # it trained 10/s while busy a quarter of the time
    assert capacity_records_per_s(idle) == 40.0
    barely = sample("w0", 1, 1.0)
    barely.busy_fraction = 0.01  # too little work to say anything: left out
    assert capacity_records_per_s(barely) is None
    assert job_windows([barely], bucket_s=10, min_coverage=0.5) == []
    assert capacity_records_per_s(sample("w0", 1, 7.0)) == 7.0  # no busy fraction
    (window,) = job_windows([idle], bucket_s=10, min_coverage=0.5)
    assert window.records_per_s == 40.0


def test_a_missing_worker_is_extrapolated_and_a_thin_bucket_is_dropped():
    # 4 workers, 2 reported: the mean per worker times 4.
    half = [sample("w0", 4, 10.0), sample("w1", 4, 14.0)]
    (window,) = job_windows(half, bucket_s=10, min_coverage=0.5)
    assert window.records_per_s == 48.0
    assert job_windows(half[:1], bucket_s=10, min_coverage=0.5) == []


def test_different_pool_sizes_in_one_bucket_stay_apart():
    mixed = [sample("w0", 1, 10.0), sample("w0", 2, 9.0, T0_MS + 10), sample("w1", 2, 9.0)]
    windows = job_windows(mixed, bucket_s=10, min_coverage=1.0)
    assert [(w.workers, w.records_per_s) for w in windows] == [(1, 10.0), (2, 18.0)]


def test_unknown_pool_size_counts_the_reporters():
    (window,) = job_windows(
        [sample("a", 0, 3.0), sample("b", 0, 5.0)], bucket_s=10, min_coverage=1.0
    )
    assert (window.workers, window.records_per_s) == (2, 8.0)


def windows_for(rates_by_count):
    return [
        JobWindow(float(i), w, r, w)
        for w, rates in rates_by_count.items()
        for i, r in enumerate(rates)
    ]


def test_before_enough_counts_the_prior_scaled_by_the_measured_rate_is_used():
    settings = SampleSettings(min_distinct_workers=3)
    estimate = estimated(windows_for({2: [16.0] * 5}), settings, 8)
    assert estimate.source == "prior"
    single = 16.0 / modelarts_prior(1.0, 2)  # = 10 records/s: 2 workers give 2 * 0.8 * 10
    assert estimate.single_worker_records_per_s == pytest.approx(single)
    assert [w for w, _ in estimate.observations] == list(range(1, 9))
    assert estimate.observations[3][1] == pytest.approx(modelarts_prior(single, 4))
    assert "prior" in estimate.explanation and "1 of 4" in estimate.explanation
    model = estimate.model("sync")
    assert model.at(4) == pytest.approx(modelarts_prior(single, 4), rel=0.05)


def test_before_enough_counts_a_measured_count_keeps_its_measurement():
    """Linear workers (the demo's): the prior scaled to 2 and 3 workers over-states one
    worker by 1/0.8; once one worker is measured, the estimate says what was measured."""
    settings = SampleSettings(min_distinct_workers=4)
    linear = {2: [20.0] * 3, 3: [30.0] * 3}
    before = estimated(windows_for(linear), settings, 8)
    assert before.source == "prior" and before.observations[0][1] > 12.0
    assert before.observations[1][1] == pytest.approx(20.0)
    after = estimated(windows_for({1: [10.0] * 3, **linear}), settings, 8)
    assert after.source == "prior"
    assert [r for _, r in after.observations[:3]] == pytest.approx([10.0, 20.0, 30.0])
    assert materially_different(before, after, 0.1)


def test_with_enough_counts_the_measurements_are_used():
    settings = SampleSettings(min_distinct_workers=3)  # sync has 4 coefficients: needs 4
    assert model_coefficients("sync") == 4
    rates = {w: [modelarts_prior(10.0, w)] * 3 for w in (1, 2, 4)}
    assert estimated(windows_for(rates), settings, 8).source == "prior"
    rates[8] = [modelarts_prior(10.0, 8)] * 3
    estimate = estimated(windows_for(rates), settings, 8)
    assert estimate.source == "measured"
    assert [w for w, _ in estimate.observations] == [1, 2, 4, 8]
    assert "measured" in estimate.explanation


def test_a_high_quantile_reads_capacity_not_a_starved_window():
    settings = SampleSettings(quantile=0.9, min_distinct_workers=1, model_kind="optimus")
    rates = {1: [10.0] * 9 + [2.0], 2: [18.0] * 10, 3: [25.0] * 10}
    estimate = estimated(windows_for(rates), settings, 4)
    assert estimate.source == "measured"
    assert estimate.measured[0] == (1, pytest.approx(10.0))


def test_no_samples_and_no_prior_rate_is_no_estimate_but_a_prior_rate_is():
    assert estimate_throughput([], SampleSettings(), max_workers=4) is None
    prior = estimated([], SampleSettings(prior_single_worker_records_per_s=5.0), 4)
    assert prior.source == "prior" and prior.observations[0] == (1.0, 5.0)


def test_material_change():
    settings = SampleSettings(min_distinct_workers=1, model_kind="optimus")
    base = estimate_throughput(
        windows_for({1: [10.0], 2: [18.0], 3: [25.0]}), settings, max_workers=4
    )
    close = estimate_throughput(
        windows_for({1: [10.5], 2: [18.0], 3: [25.0]}), settings, max_workers=4
    )
    far = estimate_throughput(
        windows_for({1: [12.0], 2: [18.0], 3: [25.0]}), settings, max_workers=4
    )
    assert not materially_different(base, close, 0.1)
    assert materially_different(base, far, 0.1)
    assert materially_different(None, base, 0.1)
    assert not materially_different(None, None, 0.1)


def test_book_keeps_closed_windows_and_drops_late_samples():
    book = SampleBook("demo", SampleSettings(bucket_s=10, retention_s=60))
    now_s = T0_MS / 1000
    assert book.add(sample("w0", 1, 10.0), now_s) is None
    assert book.add(sample("w0", 1, 10.0, job="other"), now_s) is not None
    assert (book.accepted, book.rejected) == (1, 1)
    later_s = now_s + 600
    book.prune(later_s)
    assert len(book) == 0
    assert [(w.workers, w.records_per_s) for w in book.windows()] == [(1, 10.0)]
    assert "late" in str(book.add(sample("w1", 1, 10.0), later_s))
    assert book.late == 1


def test_bad_settings():
    with pytest.raises(ConfigError):
        SampleSettings(model_kind="sync_ps")
    with pytest.raises(ConfigError):
        SampleSettings(min_coverage=0)
    with pytest.raises(ConfigError):
        SampleSettings(prior_single_worker_records_per_s=-1.0)
    with pytest.raises(ConfigError, match="clock skew"):
        SampleSettings(max_clock_skew_s=-1.0)
    with pytest.raises(ConfigError, match="max_pool_workers"):
        SampleSettings(max_pool_workers=0)
    with pytest.raises(ConfigError, match="max_records_per_s"):
        SampleSettings(max_records_per_s=math.inf)


def test_a_future_dated_sample_is_refused():
    """A worker whose clock runs an hour ahead must not pin what the planner believes
    (the planner counts only accepted samples' workers: test_planner)."""
    book = SampleBook("demo", SampleSettings(max_clock_skew_s=60))
    now_s = T0_MS / 1000
    assert book.add(sample("w0", 3, 10.0), now_s) is None
    ahead = sample("w1", 40, 10.0, at_ms=T0_MS + 3_600_000)
    why = book.add(ahead, now_s)
    assert why is not None and "3,600 s in the future" in why
    assert (book.rejected, book.skewed, book.accepted) == (1, 1, 1)
    # within the skew allowed, a sample counts (clocks are never quite equal)
    assert book.add(sample("w1", 3, 10.0, at_ms=T0_MS + 30_000), now_s) is None
    assert book.skewed == 1


def test_absurd_values_are_refused():
    """``sample_problem`` checked neither the pool size nor the range
    of the rates: one sample could report a pool of four billion workers."""
    assert "pool of 4000000000" in problem(sample("w0", 4_000_000_000, 5.0))
    assert "records_per_s_trained" in problem(sample("w0", 1, 1e15))
    consumed = sample("w0", 1, 5.0)
    consumed.records_per_s_consumed = math.inf
    assert "records_per_s_consumed" in problem(consumed)
    busy = sample("w0", 1, 5.0)
    busy.busy_fraction = math.nan
    assert "busy_fraction" in problem(busy)
    roomy = SampleSettings(max_pool_workers=50_000)
    assert sample_problem(sample("w0", 20_000, 5.0), "demo", settings=roomy) is None
    book = SampleBook("demo")
    assert book.add(sample("w0", 4_000_000_000, 5.0), T0_MS / 1000) is not None
    assert book.rejected == 1


def test_sample_problem_checks_the_clock_when_given_now():
    future = sample("w0", 1, 5.0, at_ms=T0_MS + 120_000)
    assert sample_problem(future, "demo") is None  # no clock given: not checked
    assert "in the future" in str(sample_problem(future, "demo", now_ms=T0_MS))
    assert sample_problem(future, "demo", now_ms=T0_MS + 60_000) is None
