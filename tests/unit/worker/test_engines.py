"""Which engine a worker runs its app on, and `--engine none` for a step-only app."""

from pathlib import Path

import pytest

from streamtrain.elastic.app import DistributedApp
from streamtrain.elastic.engine import LocalEngine
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import RawDecoder
from streamtrain.ingest.reader import Batch
from streamtrain.testing import records
from streamtrain.worker import load_app
from streamtrain.worker.engines import AppStepEngine, worker_engine


class StepOnly:
    decoder = RawDecoder()

    def __init__(self):
        self.steps = 0

    def step(self, batch):
        self.steps += 1
        return 0.5


def test_the_builtin_mmoe_app_is_also_a_distributed_app_and_keeps_its_step_under_none():
    app = load_app(None)
    assert isinstance(app, DistributedApp)
    assert isinstance(worker_engine(app, ElasticSettings()), AppStepEngine)


def test_an_app_with_only_the_distributed_protocol_trains_its_own_copy_under_none():
    import torch

    from streamtrain.elastic.app import TrainingParts

    model = torch.nn.Linear(1, 1)
    parts = TrainingParts(
        RawDecoder(), model, torch.optim.SGD(model.parameters()), lambda m, b: 0.0
    )
    assert isinstance(worker_engine(parts, ElasticSettings()), LocalEngine)


def test_a_step_only_app_runs_as_before_under_engine_none():
    app = StepOnly()
    engine = worker_engine(app, ElasticSettings())
    assert isinstance(engine, AppStepEngine)
    empty = engine.step(None)
    assert empty.committed and empty.records == 0 and app.steps == 0
    outcome = engine.step(Batch(records(0, 3), {}, lambda _: None))
    assert (outcome.committed, outcome.step, outcome.records, outcome.loss) == (True, 1, 3, 0.5)


@pytest.mark.parametrize(
    "settings",
    [
        ElasticSettings(engine=EngineKind.TORCHFT, lighthouse="127.0.0.1:1"),
        ElasticSettings(engine=EngineKind.TORCHELASTIC, checkpoint_dir=Path("c")),
    ],
)
def test_a_collective_engine_needs_a_distributed_app(settings):
    with pytest.raises(ConfigError, match="must return a distributed app"):
        worker_engine(StepOnly(), settings)
