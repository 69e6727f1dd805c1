"""The engine behind one model trained by many workers: what a step tells the loop.

Owned here: :class:`StepOutcome` (what one round did: committed or not, the job's step
number, the newest durable step, the records of this worker and of the whole step),
the :class:`Engine` protocol every engine follows, :class:`CommittedOnReturn` (what
the ``--engine none`` engines share: each step committed and durable when it returns,
as before engines existed), :class:`LocalEngine` (``--engine none``: this worker's own
model) and :func:`make_engine`, which builds the engine the settings name (torchft
and torchelastic are imported only when asked for).

An engine's round: every participant steps, with its batch or with nothing (the loop
gives ``None`` when no batch came within the step wait), so no collective waits for a
worker without data.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from streamtrain.elastic.app import DistributedApp
from streamtrain.elastic.gradients import LocalStep
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.ingest.reader import Batch

__all__ = ["CommittedOnReturn", "Engine", "LocalEngine", "StepOutcome", "make_engine"]


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One round, as this worker saw it.

    ``committed``: the step's update was applied everywhere it took part (torchft:
    ``should_commit()``); ``step``: the job's committed steps after this round (the
    number a shard done-report carries; unchanged when the round did not commit);
    ``durable_step``: the newest step a restart would resume from (torchft and none:
    ``step``; torchelastic: the newest saved checkpoint's); ``records`` this worker
    trained in the round and ``records_global`` the whole step's; ``world_size`` the
    participants; ``refused``: why this worker's batch was refused (it contributed
    nothing; the caller dead-letters it); ``compute_s``: this worker's forward and
    backward pass (the rest of the round is synchronization and waiting for peers).
    """

    committed: bool
    step: int
    durable_step: int
    records: int = 0
    records_global: int = 0
    world_size: int = 1
    refused: str | None = None
    loss: float = float("nan")
    compute_s: float = 0.0


class Engine(Protocol):
    """What the training loop drives (module docstring)."""

    kind: EngineKind

    @property
    def committed_step(self) -> int:
        """The job's committed steps as this worker last saw them."""
        ...

    @property
    def durable_step(self) -> int:
        """The newest step a restart would resume from."""
        ...

    def join(self) -> None:
        """Take part, holding the job's current weights when it returns (torchft: healed
        from a live peer; torchelastic: the newest checkpoint loaded)."""
        ...

    def step(self, batch: Batch | None) -> StepOutcome:
        """One round with this worker's batch (``None``: nothing to train)."""
        ...

    def leave(self) -> None:
        """Stop taking part (after the last step returned); idempotent."""
        ...


class CommittedOnReturn:
    """What every ``--engine none`` engine shares: one worker, so each step is committed
    and durable when it returns; no joining, no leaving. A subclass counts its steps in
    ``_step`` and reports a round with :meth:`_outcome`."""

    kind = EngineKind.NONE

    def __init__(self) -> None:
        self._step = 0

    @property
    def committed_step(self) -> int:
        return self._step

    @property
    def durable_step(self) -> int:
        return self._step

    def join(self) -> None:
        return None

    def leave(self) -> None:
        return None

    def _outcome(
        self,
        records: int,
        *,
        loss: float = float("nan"),
        refused: str | None = None,
        compute_s: float = 0.0,
    ) -> StepOutcome:
        return StepOutcome(
            committed=True,
            step=self._step,
            durable_step=self._step,
            records=records,
            records_global=records,
            refused=refused,
            loss=loss,
            compute_s=compute_s,
        )


class LocalEngine(CommittedOnReturn):
    """``--engine none``: this worker's own model copy; nothing is exchanged."""

    def __init__(self, app: DistributedApp, settings: ElasticSettings) -> None:
        super().__init__()
        self.app = app
        self.local = LocalStep(app, settings.max_bad_batches)

    def step(self, batch: Batch | None) -> StepOutcome:
        contribution = self.local.run(batch)
        if contribution.records:
            self.app.optimizer.step()
            self._step += 1
        return self._outcome(
            contribution.records,
            loss=contribution.loss,
            refused=contribution.refused,
            compute_s=contribution.compute_s,
        )


def make_engine(
    app: DistributedApp, settings: ElasticSettings, stop: threading.Event | None = None
) -> Engine:
    """The engine ``settings.engine`` names, for ``app``; ``stop`` ends waits early."""
    if settings.engine is EngineKind.TORCHFT:
        from streamtrain.elastic.torchft_engine import TorchftEngine

        return TorchftEngine(app, settings, stop)
    if settings.engine is EngineKind.TORCHELASTIC:
        from streamtrain.elastic.torchelastic_engine import TorchElasticEngine

        return TorchElasticEngine(app, settings)
    return LocalEngine(app, settings)
