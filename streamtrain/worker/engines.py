"""Which engine a worker runs its training app on.

Owned here: :func:`worker_engine` and :class:`AppStepEngine`. With ``--engine none``
an app with a ``step(batch)`` (a :class:`~streamtrain.worker.app.TrainingApp`: it steps
its own optimizer) runs as before, each step committed when it returns
(:class:`AppStepEngine`), and one with only the distributed protocol trains its own
copy (:class:`~streamtrain.elastic.engine.LocalEngine`). torchft and torchelastic need a
:class:`~streamtrain.elastic.app.DistributedApp` (model, optimizer,
``forward_backward``): they run ``forward_backward`` and never the app's ``step``
(record what was trained in the ``committed`` hook, not in ``step``).
"""

from __future__ import annotations

import threading

from streamtrain.elastic.app import DistributedApp
from streamtrain.elastic.engine import Engine, LocalEngine, StepOutcome, make_engine
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.errors import ConfigError
from streamtrain.ingest.reader import Batch
from streamtrain.worker.app import TrainingApp

__all__ = ["AppStepEngine", "worker_engine"]


class AppStepEngine:
    """``--engine none`` for an app whose ``step(batch)`` is the whole training step."""

    kind = EngineKind.NONE

    def __init__(self, app: TrainingApp) -> None:
        self.app = app
        self._step = 0

    @property
    def committed_step(self) -> int:
        return self._step

    @property
    def durable_step(self) -> int:
        return self._step

    def join(self) -> None:
        return None

    def step(self, batch: Batch | None) -> StepOutcome:
        if batch is None or len(batch) == 0:
            return StepOutcome(True, self._step, self._step)
        loss = self.app.step(batch)
        self._step += 1
        return StepOutcome(
            committed=True,
            step=self._step,
            durable_step=self._step,
            records=len(batch),
            records_global=len(batch),
            loss=loss if isinstance(loss, float) else float("nan"),
        )

    def leave(self) -> None:
        return None


def worker_engine(
    app: TrainingApp | DistributedApp,
    settings: ElasticSettings,
    stop: threading.Event | None = None,
) -> Engine:
    """The engine ``settings`` names for ``app`` (module docstring)."""
    if settings.engine is EngineKind.NONE:
        # an app with its own step(batch) keeps it (a subclass may record there)
        return AppStepEngine(app) if isinstance(app, TrainingApp) else LocalEngine(app, settings)
    if not isinstance(app, DistributedApp):
        raise ConfigError(
            f"--engine {settings.engine.value} trains one model on every worker: the entry "
            "point must return a distributed app (`model`, `optimizer` and "
            "`forward_backward(batch)`; see streamtrain.elastic.app), not only `step(batch)`"
        )
    return make_engine(app, settings, stop)
