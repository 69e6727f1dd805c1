"""The demo's phases: starting, running, draining, then done or timed out."""

from streamtrain.demo.phases import DayPhases, Phase, progress_line


def _phase(phases: DayPhases) -> Phase:
    """The current phase (a call, so no earlier assertion narrows it)."""
    return phases.phase


def test_a_day_then_a_drain_that_completes():
    phases = DayPhases(start_at_s=100.0, drain_timeout_s=30.0)
    assert phases.advance(50.0, traffic_running=True) is None
    assert _phase(phases) is Phase.STARTING
    assert not phases.settle(50.0, produced=0, trained=0)  # not draining yet
    assert phases.advance(100.0, traffic_running=True) is None
    assert _phase(phases) is Phase.RUNNING
    assert phases.advance(700.0, traffic_running=False) == (
        "the day is over; draining (at most 30 s)"
    )
    assert _phase(phases) is Phase.DRAINING and phases.drain_deadline_s == 730.0
    assert phases.advance(701.0, traffic_running=False) is None  # said once
    assert phases.drain_deadline_s == 730.0
    assert not phases.settle(701.0, produced=10, trained=9)
    assert phases.settle(702.0, produced=10, trained=10)
    assert _phase(phases) is Phase.DONE


def test_a_drain_that_times_out():
    phases = DayPhases(start_at_s=0.0, drain_timeout_s=5.0)
    phases.advance(10.0, traffic_running=False)
    assert not phases.settle(14.9, produced=10, trained=3)
    assert phases.settle(15.0, produced=10, trained=3)
    assert _phase(phases) is Phase.DRAIN_TIMED_OUT
    assert _phase(phases) == "drain timed out"  # what the dashboard and summary show


def test_progress_line():
    line = progress_line(
        Phase.RUNNING,
        simulated_s=25 * 3600 + 5 * 60 + 59,
        workers=3,
        lag_s=None,
        trained=12_345,
        produced=20_000,
        forwarded=7,
    )
    assert line == (
        "[running] simulated 25:05  workers 3  lag n/a  trained 12,345 / produced 20,000 "
        "(7 by a peer)"
    )
    assert "lag 1.2 s" in progress_line(
        Phase.DRAINING, simulated_s=0, workers=1, lag_s=1.24, trained=0, produced=0, forwarded=0
    )
