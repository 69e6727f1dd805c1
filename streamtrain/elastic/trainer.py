"""A training round and what follows it: offsets follow the step, not the batch.

Owned here: :class:`ElasticTrainer`, between the worker's loop and an
:class:`~streamtrain.elastic.engine.Engine`. :meth:`~ElasticTrainer.round` runs one
engine step on this worker's batch (or on nothing) and settles the batch:

* a step that committed: the app's optional ``committed(batch, step)`` hook runs, then
  the batch waits in the :class:`~streamtrain.elastic.ledger.AckLedger` until its step
  is durable and is then acknowledged (``batch.ack()``);
* a step that did not commit: ``batch.nack()``, the batch is handed back to be trained
  again;
* a batch the step refused (a data error, a non-finite loss): this worker took part
  with nothing; the batch is split in halves, handed back to be tried apart, until the
  record the step cannot take is alone: that one goes to the dead-letter sink (its
  offset is acknowledged once the dead letter is delivered), the rest is trained;
* :meth:`~ElasticTrainer.close`: everything not yet durable is handed back.

A source that wants the step numbers (shard done-reports carry them) implements any of
:class:`StepAware`'s methods: ``steps(committed_step, durable_step)`` after every round,
``batch_trained(batch, step)`` right before a batch is acknowledged (``step``: the
committed step that trained it, which is durable by then).

A round that did not commit, or whose participants differ from the round before's, is
counted in the worker's metrics as *disturbed*
(:meth:`~streamtrain.ingest.metrics.WorkerMetrics.disturbed`): the throughput samples
around it measure a peer's failure, arrival or departure, and the planner leaves them
out of its throughput model. (torchft returns such rounds; torchelastic raises on a
failed step and restarts every rank, so there only a changed world size shows.)

A committed lockstep round that trained records of this worker gives its time and its
forward-backward time
(:meth:`~streamtrain.ingest.metrics.WorkerMetrics.lockstep_round`), from which the
samples' busy fraction estimates what the pool would train with full batches.

:meth:`~ElasticTrainer.idle_rounds` keeps a joined worker stepping with no data in a
thread while it does something else (waiting for admission, starting its consumer): a
collective engine's peers cannot step without it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from streamtrain.elastic.engine import Engine, StepOutcome
from streamtrain.elastic.ledger import AckLedger, Settled
from streamtrain.elastic.settings import EngineKind
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.reader import Batch

__all__ = ["ElasticTrainer", "RoundTotals", "StepAware"]

log = logging.getLogger(__name__)

DeadLetter = Callable[[Batch, str], None]


class StepAware(Protocol):
    """What a data source may implement to learn the step numbers (all optional)."""

    def steps(self, committed_step: int, durable_step: int) -> None: ...

    def batch_trained(self, batch: Batch, step: int) -> None: ...


@dataclass
class RoundTotals:
    """What the rounds did so far (records counted when acknowledged)."""

    rounds: int = 0
    rounds_committed: int = 0
    rounds_failed: int = 0
    empty_rounds: int = 0
    records_acked: int = 0
    records_nacked: int = 0
    records_refused: int = 0


class ElasticTrainer:
    """Rounds of ``engine`` and the fate of each batch (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        *,
        source: object | None = None,
        dead_letter: DeadLetter | None = None,
        metrics: WorkerMetrics | None = None,
        batch_records: int | None = None,
    ) -> None:
        self.engine = engine
        self.source = source
        self.dead_letter = dead_letter
        self.metrics = metrics
        self.ledger: AckLedger[tuple[int, Batch]] = AckLedger()
        self.totals = RoundTotals()
        self.last: StepOutcome | None = None
        self._committed_hook: Callable[[Batch, int], object] | None = None
        self._acknowledged_hook: Callable[[Batch, int], object] | None = None
        self._round_hook: Callable[[StepOutcome], object] | None = None
        if metrics is not None and batch_records and self.steps_every_round:
            metrics.lockstep(batch_records)

    @property
    def steps_every_round(self) -> bool:
        """Whether a round happens even without a batch (every collective engine)."""
        return self.engine.kind is not EngineKind.NONE

    def on_committed(self, hook: Callable[[Batch, int], object] | None) -> None:
        """Call ``hook(batch, step)`` for each batch whose step committed (the app's)."""
        self._committed_hook = hook

    def observe(self, app: object) -> None:
        """Call the app's optional hooks: ``committed(batch, step)`` once a step that
        trained ``batch`` committed, ``acknowledged(batch, step)`` right before its
        records are acknowledged (the step is durable then), ``round_done(outcome)``
        after every round."""
        hooks = [getattr(app, name, None) for name in ("committed", "acknowledged", "round_done")]
        committed, acknowledged, round_done = (h if callable(h) else None for h in hooks)
        self._committed_hook, self._acknowledged_hook = committed, acknowledged
        self._round_hook = round_done

    def round(self, batch: Batch | None) -> StepOutcome:
        """One engine step with ``batch`` (``None``: nothing), then settle the batch."""
        started = time.monotonic()
        outcome = self.engine.step(batch)
        if self.metrics is not None:
            elapsed_s = time.monotonic() - started
            if batch is not None:
                self.metrics.add(busy_s=elapsed_s, steps=1)
            if self.steps_every_round and outcome.committed and outcome.records > 0:
                self.metrics.lockstep_round(elapsed_s, outcome.compute_s, outcome.records)
            if _disturbed(self.last, outcome):
                self.metrics.disturbed(started)
        self.last = outcome
        totals = self.totals
        totals.rounds += 1
        totals.rounds_committed += outcome.committed
        totals.rounds_failed += not outcome.committed
        totals.empty_rounds += outcome.records_global == 0
        steps = getattr(self.source, "steps", None)
        if callable(steps):
            steps(outcome.step, outcome.durable_step)
        if batch is not None:
            self._settle_batch(batch, outcome)
        self._apply(self.ledger.durable(outcome.durable_step))
        if self._round_hook is not None:
            self._round_hook(outcome)
        return outcome

    def close(self) -> None:
        """Hand back every batch whose step is not durable yet."""
        self._apply(self.ledger.release_all())

    @contextlib.contextmanager
    def idle_rounds(self) -> Iterator[None]:
        """Step with no data in a thread for the duration of the ``with`` block."""
        if not self.steps_every_round:
            yield
            return
        done = threading.Event()
        failure: list[BaseException] = []

        def keep_stepping() -> None:
            try:
                while not done.is_set():
                    self.round(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                failure.append(exc)

        thread = threading.Thread(target=keep_stepping, name="idle-rounds", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
        if failure:
            raise failure[0]

    def _settle_batch(self, batch: Batch, outcome: StepOutcome) -> None:
        if outcome.refused is not None:
            if len(batch) > 1:
                for half in batch.split():
                    half.nack()
                return
            self.totals.records_refused += len(batch)
            if self.dead_letter is not None:
                self.dead_letter(batch, outcome.refused)
            else:
                log.error(
                    "a refused batch of %d records has no dead-letter topic: handed back",
                    len(batch),
                )
                self._apply(AckLedger.failed((outcome.step, batch)))
            return
        if not outcome.committed:
            self._apply(AckLedger.failed((outcome.step, batch)))
            return
        if self._committed_hook is not None:
            self._committed_hook(batch, outcome.step)
        self._apply(self.ledger.committed(outcome.step, (outcome.step, batch)))

    def _apply(self, settled: Settled[tuple[int, Batch]]) -> None:
        trained = getattr(self.source, "batch_trained", None)
        for step, batch in settled.ack:
            if callable(trained):
                trained(batch, step)
            if self._acknowledged_hook is not None:
                self._acknowledged_hook(batch, step)
            batch.ack()
            self.totals.records_acked += len(batch)
        for _, batch in settled.nack:
            batch.nack()
            self.totals.records_nacked += len(batch)


def _disturbed(last: StepOutcome | None, outcome: StepOutcome) -> bool:
    """Whether a round measured a change of the pool rather than the pool: it did not
    commit (a peer failed mid-step, the others waited for the collective's timeout), or
    its participants differ from the round before's (a peer joined or left)."""
    if not outcome.committed:
        return True
    return last is not None and last.world_size != outcome.world_size
