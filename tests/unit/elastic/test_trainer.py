"""ElasticTrainer with a scripted engine: offsets follow the step (ack only when committed
and durable, nack when not committed, dead letter when refused)."""

import threading

import numpy as np
import pytest

from streamtrain.elastic.engine import StepOutcome
from streamtrain.elastic.settings import EngineKind
from streamtrain.elastic.trainer import ElasticTrainer
from streamtrain.ingest.reader import Batch
from streamtrain.testing import records


class ScriptedEngine:
    kind = EngineKind.TORCHFT

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.seen = []
        self.committed_step = self.durable_step = 0

    def join(self):
        pass

    def leave(self):
        pass

    def step(self, batch):
        self.seen.append(batch)
        return self.outcomes.pop(0) if self.outcomes else StepOutcome(True, 0, 0)


class Source:
    def __init__(self):
        self.events = []

    def steps(self, committed, durable):
        self.events.append(("steps", committed, durable))

    def batch_trained(self, batch, step):
        self.events.append(("trained", batch.records.offsets[0].item(), step))


def batch(first, log):
    return Batch(
        records(first, 2),
        {},
        lambda r: log.append(("ack", int(r.offsets[0]))),
        lambda b: log.append(("nack", int(b.records.offsets[0]))),
    )


def test_committed_and_durable_is_acked_not_committed_is_handed_back():
    log: list[tuple[object, ...]] = []
    engine = ScriptedEngine([StepOutcome(True, 1, 1, 2, 4), StepOutcome(False, 1, 1)])
    trainer = ElasticTrainer(engine)
    trainer.round(batch(0, log))
    trainer.round(batch(10, log))
    assert log == [("ack", 0), ("nack", 10)]
    assert trainer.totals.records_acked == 2 and trainer.totals.records_nacked == 2


def test_acks_wait_for_the_durable_step_and_close_hands_back_the_rest():
    log: list[tuple[object, ...]] = []
    source = Source()
    outcomes = [StepOutcome(True, s, d, 2, 2) for s, d in ((1, 0), (2, 0), (3, 2), (4, 2))]
    trainer = ElasticTrainer(ScriptedEngine(outcomes), source=source)
    for first in (0, 10, 20, 30):
        trainer.round(batch(first, log))
    assert log == [("ack", 0), ("ack", 10)]
    assert ("trained", 0, 1) in source.events and ("trained", 10, 2) in source.events
    assert ("steps", 4, 2) in source.events
    trainer.close()
    assert log[2:] == [("nack", 20), ("nack", 30)]


def test_a_refused_record_alone_goes_to_the_dead_letters():
    log: list[tuple[object, ...]] = []
    dead: list[tuple[object, ...]] = []
    engine = ScriptedEngine([StepOutcome(True, 1, 1, 0, 2, refused="its loss is nan")])
    trainer = ElasticTrainer(engine, dead_letter=lambda b, why: dead.append((b, why)))
    one = Batch(records(0, 1), {}, lambda r: log.append(("ack",)), lambda b: log.append(("nack",)))
    trainer.round(one)
    assert dead == [(one, "its loss is nan")] and log == []


def test_a_refused_batch_is_handed_back_in_halves_to_find_the_bad_record():
    handed_back: list[Batch] = []
    dead: list[object] = []
    engine = ScriptedEngine([StepOutcome(True, 1, 1, 0, 2, refused="its loss is nan")])
    trainer = ElasticTrainer(engine, dead_letter=lambda b, why: dead.append(b))
    five = Batch(records(0, 5), {"v": np.arange(5)}, lambda r: None, handed_back.append)
    trainer.round(five)
    assert dead == []
    assert [h.records.offsets.tolist() for h in handed_back] == [[0, 1], [2, 3, 4]]
    assert [h["v"].tolist() for h in handed_back] == [[0, 1], [2, 3, 4]]


def test_the_committed_hook_runs_before_the_ack():
    log: list[tuple[object, ...]] = []
    trainer = ElasticTrainer(ScriptedEngine([StepOutcome(True, 7, 7, 2, 2)]))
    trainer.on_committed(lambda b, step: log.append(("hook", step)))
    trainer.round(batch(0, log))
    assert log == [("hook", 7), ("ack", 0)]


def test_idle_rounds_step_with_nothing_until_the_block_ends():
    stepped = threading.Event()

    class Recording(ScriptedEngine):
        def step(self, batch):
            stepped.set()
            return super().step(batch)

    engine = Recording([])
    trainer = ElasticTrainer(engine)
    with trainer.idle_rounds():
        assert stepped.wait(5)
    count = len(engine.seen)
    assert count >= 1 and all(b is None for b in engine.seen)
    assert len(engine.seen) == count  # stopped when the block ended


def test_idle_rounds_hand_their_failure_to_the_caller():
    class Failing(ScriptedEngine):
        def step(self, batch):
            raise RuntimeError("peer gone")

    engine = Failing([])
    with pytest.raises(RuntimeError, match="peer gone"), ElasticTrainer(engine).idle_rounds():
        threading.Event().wait(0.5)


def test_no_idle_rounds_without_a_collective_engine():
    engine = ScriptedEngine([])
    engine.kind = EngineKind.NONE
    with ElasticTrainer(engine).idle_rounds():
        threading.Event().wait(0.1)
    assert engine.seen == []


def test_an_apps_hooks_see_every_round_commit_and_ack():
    events: list[tuple[object, ...]] = []

    class App:
        def committed(self, batch, step):
            events.append(("committed", step))

        def acknowledged(self, batch, step):
            events.append(("acknowledged", step))

        def round_done(self, outcome):
            events.append(("round", outcome.step, outcome.committed))

    outcomes = [StepOutcome(True, 1, 0, 2, 2), StepOutcome(False, 1, 0), StepOutcome(True, 2, 1)]
    trainer = ElasticTrainer(ScriptedEngine(outcomes))
    trainer.observe(App())
    trainer.round(batch(0, []))
    trainer.round(batch(10, []))
    trainer.round(None)
    assert events == [
        ("committed", 1),
        ("round", 1, True),
        ("round", 1, False),
        ("acknowledged", 1),
        ("round", 2, True),
    ]


def test_each_round_with_a_batch_counts_one_step_and_its_time_for_the_step_time_report():
    from streamtrain.ingest.metrics import WorkerMetrics

    metrics = WorkerMetrics()
    trainer = ElasticTrainer(ScriptedEngine([]), metrics=metrics)
    trainer.round(batch(0, []))
    trainer.round(None)  # an empty round of a collective engine: no step of this worker
    trainer.round(batch(10, []))
    snapshot = metrics.snapshot()
    assert snapshot.steps == 2
    assert snapshot.busy_s >= 0


def test_rounds_that_fail_or_change_the_participants_are_counted_as_disturbed():
    """What the planner needs to leave a killed peer's timeout out of its throughput
    model: the failed round, the first round with one fewer and the first with the
    replacement; steady rounds, empty or not, are not disturbed."""
    from streamtrain.ingest.metrics import WorkerMetrics

    def round_of(committed, world, step):
        return StepOutcome(committed, step, step, world_size=world)

    script = [
        round_of(True, 3, 1),
        round_of(True, 3, 2),
        round_of(False, 3, 2),  # a peer died mid-step
        round_of(True, 2, 3),  # one fewer
        round_of(True, 2, 4),
        round_of(True, 3, 5),  # the replacement joined
        round_of(True, 3, 6),
    ]
    metrics = WorkerMetrics()
    trainer = ElasticTrainer(ScriptedEngine(script), metrics=metrics)
    counts = []
    for i in range(len(script)):
        trainer.round(batch(10 * i, []) if i % 2 else None)
        counts.append(metrics.snapshot().disturbed_rounds)
    assert counts == [0, 0, 1, 2, 2, 3, 3]


def test_lockstep_rounds_that_trained_give_their_time_and_compute_to_the_metrics():
    from streamtrain.ingest.metrics import WorkerMetrics

    script = [
        StepOutcome(True, 1, 1, 2, 6, world_size=3, compute_s=0.25),
        StepOutcome(True, 2, 2, 0, 4, world_size=3),  # nothing of this worker's
        StepOutcome(False, 2, 2, 0, 0, world_size=3, compute_s=0.5),  # not committed
    ]
    metrics = WorkerMetrics()
    trainer = ElasticTrainer(ScriptedEngine(script), metrics=metrics, batch_records=256)
    trainer.round(batch(0, []))
    trainer.round(None)
    trainer.round(batch(10, []))
    snapshot = metrics.snapshot()
    assert snapshot.lockstep_batch_records == 256
    assert (snapshot.lockstep_rounds, snapshot.lockstep_records) == (1, 2)
    assert snapshot.lockstep_compute_s == 0.25
    assert len(snapshot.lockstep_syncs) == 1 and snapshot.lockstep_syncs[0][1] >= 0


def test_a_worker_of_its_own_model_is_not_lockstep():
    from streamtrain.ingest.metrics import WorkerMetrics

    engine = ScriptedEngine([StepOutcome(True, 1, 1, 2, 2)])
    engine.kind = EngineKind.NONE
    metrics = WorkerMetrics()
    ElasticTrainer(engine, metrics=metrics, batch_records=256).round(batch(0, []))
    snapshot = metrics.snapshot()
    assert snapshot.lockstep_batch_records == 0 and snapshot.lockstep_rounds == 0
