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
from streamtrain.elastic.engine import (
    CommittedOnReturn,
    Engine,
    LocalEngine,
    StepOutcome,
    make_engine,
)
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.errors import ConfigError
from streamtrain.ingest.reader import Batch
from streamtrain.worker.app import TrainingApp

__all__ = ["AppStepEngine", "worker_engine"]


class AppStepEngine(CommittedOnReturn):
    """``--engine none`` for an app whose ``step(batch)`` is the whole training step."""

    def __init__(self, app: TrainingApp) -> None:
        super().__init__()
        self.app = app

    def step(self, batch: Batch | None) -> StepOutcome:
        if batch is None or len(batch) == 0:
            return self._outcome(0)
        loss = self.app.step(batch)
        self._step += 1
        return self._outcome(len(batch), loss=loss if isinstance(loss, float) else float("nan"))


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
