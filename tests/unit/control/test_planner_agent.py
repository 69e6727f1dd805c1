"""The planner's side of the control app without Faust: samples in, commands out, arrivals."""

from types import SimpleNamespace

from faust.exceptions import ConsumerNotStarted

from streamtrain.control.planner_agent import PlannerAgent, leads_now
from streamtrain.lag.history_tables import HistoryTables
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.planner import Planner
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.scale.policy_settings import parse_policy_settings
from streamtrain.scale.samples import SampleSettings
from streamtrain.wire import encode

T0 = 1_700_000_000.0
HPA_ON_LAG = parse_policy_settings(
    {
        "metric": "lag",
        "target": "10",
        "sync_period_s": "1",
        "readiness_delay_s": "0",
        "metric_window_s": "0",
        "scale_down_window_s": "0",
    }
)


def agent():
    settings = PlannerSettings(
        job="demo",
        group="trainer",
        policy="hpa",
        policy_settings=HPA_ON_LAG,
        step_s=1,
        max_workers=8,
        samples=SampleSettings(bucket_s=1.0),
    )
    return PlannerAgent(Planner(settings))


def sample(at_s):
    return cp.ThroughputSample(
        job="demo",
        worker_id="w0",
        workers=1,
        records_per_s_trained=5.0,
        window_s=1.0,
        observed_at_ms=int(at_s * 1000),
    )


def lag(at_s, max_lag_s):
    return SimpleNamespace(
        observed_at_s=at_s,
        records_per_s=20.0,
        max_lag_s=max_lag_s,
        total_lag_records=600,
        produced=lambda: (round(20.0 * at_s), 1),  # the HWMs grow at the CPS
    )


def test_samples_are_decoded_and_bad_ones_counted():
    a = agent()
    a.take(encode(sample(T0)))
    a.take(b"\xff not a sample")
    assert len(a.new_samples) == 1 and a.bad_samples == 1


def test_a_null_sample_value_is_counted_not_a_crash():
    """A null value (a tombstone on the samples topic) crashed the
    samples agent."""
    a = agent()
    a.take(None)
    a.take(encode(sample(T0)))
    assert len(a.new_samples) == 1 and a.bad_samples == 1


def test_samples_waiting_for_the_planner_are_bounded():
    """An instance that is not the leader never drained its samples;
    whatever waits is bounded, the oldest pushed out and counted."""
    a = agent()
    limit = a.new_samples.maxlen
    assert limit is not None
    for i in range(limit + 5):
        a.take(encode(sample(T0 + i)))
    assert len(a.new_samples) == limit
    assert a.counts()["dropped_samples"] == 5
    assert a.drain_samples()[0].observed_at_ms == int((T0 + 5) * 1000)
    assert a.counts()["pending_samples"] == 0


def test_a_step_turns_samples_and_lag_into_a_command_and_unsent_ones_go_first():
    a = agent()
    commands, alerts = a.plan([sample(T0)], lag(T0, 30.0), T0 + 0.5)
    assert len(commands) == 1 and commands[0].target_workers == 3 and alerts == []
    assert a.status["commands_sent"] == 1 and a.status["bad_samples"] == 0
    a.command_outbox.append(commands[0])  # the send failed
    again, _ = a.plan([], None, T0 + 1.5)
    assert again == [commands[0]] and not a.command_outbox


def test_arrival_steps_are_persisted_once_and_restored_after_a_restart():
    first = agent()
    for i in range(4):
        first.plan([], lag(T0 + i, 0.0), T0 + i + 0.5)
    messages = first.arrivals_to_persist()
    assert [k for _, k, _ in messages] == [f"arr:trainer|{int(T0) + i}" for i in range(3)]
    assert first.arrivals_to_persist() == []  # written already
    tables = HistoryTables(
        {}, {}, {}, step_s=1.0, max_age_s=60.0, planner_group="trainer", max_arrival_steps=100
    )
    for _, key, value in messages:
        tables.keep(key, value, T0 + 4)
    second = agent()
    second.restore_arrivals(tables)
    assert second.arrivals_restored and second.planner.restored_steps == 3
    assert second.arrivals_persisted == int(T0) + 2
    assert second.arrivals_to_persist() == []  # nothing new to write


def test_arrival_steps_whose_send_failed_are_written_again():
    """The history topic was away for a tick: its steps were lost for good (a restarted
    app restored 4 of 6 steps in CI); they are sent again at the next tick."""
    a = agent()
    for i in range(4):
        a.plan([], lag(T0 + i, 0.0), T0 + i + 0.5)
    sent = a.arrivals_to_persist()
    a.arrivals_not_persisted([step for step, _, _ in sent[1:]])  # the last two failed
    again = a.arrivals_to_persist()
    assert [step for step, _, _ in again] == [step for step, _, _ in sent[1:]]
    assert a.arrivals_to_persist() == []


def test_an_unsent_command_is_not_resent_after_a_newer_one():
    """The outbox re-sent older commands first; only the newest
    decision is sent (the applier also refuses an older one)."""
    a = agent()
    first, _ = a.plan([sample(T0)], lag(T0, 30.0), T0 + 0.5)
    a.command_outbox.extend(first)  # its send failed
    older = cp.ScaleCommand(command_id="older", job="demo", target_workers=2)
    a.command_outbox.appendleft(older)
    again, _ = a.plan([], None, T0 + 1.5)
    assert [c.command_id for c in again] == [first[0].command_id]


class _Starting:
    """A Faust app whose consumer thread has not started yet."""

    def is_leader(self) -> bool:
        raise ConsumerNotStarted("Consumer thread not yet started")


class _Leading:
    def is_leader(self) -> bool:
        return True


def test_the_planner_page_answers_while_the_consumer_is_starting():
    assert leads_now(_Starting()) is False
    assert leads_now(_Leading()) is True
