"""The demo's training app as a distributed app: the speed limit, the trained ids written
once a step committed, and who evaluates the one model (no broker, no engine)."""

import json
import os
import time

import numpy as np
import pytest

from streamtrain.demo.trainer import DemoTrainer, DemoWorkerConfig
from streamtrain.elastic.app import DistributedApp
from streamtrain.elastic.engine import StepOutcome
from streamtrain.ingest.example import SyntheticCtr, split_records
from streamtrain.ingest.reader import Batch
from streamtrain.records import RecordColumns


def a_batch(app: DemoTrainer, first_id: int, n: int) -> Batch:
    values = split_records(SyntheticCtr().sample(n, first_id=first_id))
    records = RecordColumns.from_values("t", [0] * n, list(range(n)), [0] * n, values)
    return Batch(records, app.decoder.decode(records).columns, lambda *_: None)


def config(tmp_path, **kw) -> DemoWorkerConfig:
    return DemoWorkerConfig(run_dir=tmp_path, start_at_s=0.0, duration_s=600.0, **kw)


def test_the_speed_limit_counts_the_computation_as_device_time(tmp_path, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    app = DemoTrainer(config(tmp_path, capacity_records_per_s=10.0), "w-1", slot=1)
    assert isinstance(app, DistributedApp) and not hasattr(app, "step")
    loss = app.forward_backward(a_batch(app, 0, 100))  # 10 s of the "device"
    app.close()
    assert np.isfinite(loss)
    assert len(slept) == 1 and 5.0 < slept[0] < 10.0  # less the computation itself


def test_ids_are_written_once_their_step_committed(tmp_path):
    app = DemoTrainer(config(tmp_path), "w-1", slot=1)
    batch = a_batch(app, 500, 20)
    app.forward_backward(batch)
    ids_file = tmp_path / "trained" / f"w-1-{os.getpid()}.ids"  # not the forwarded ids
    assert ids_file.read_bytes() == b""  # trained, not committed: not written
    app.committed(batch, step=7)
    assert np.fromfile(ids_file, dtype="<i8").tolist() == list(range(500, 520))
    app.close()


@pytest.mark.parametrize(
    ("engine", "slot", "evaluates"),
    [
        ("torchft", 0, True),
        ("torchft", 2, False),
        ("none", 2, True),
    ],
)
def test_one_worker_evaluates_the_one_model(tmp_path, engine, slot, evaluates):
    app = DemoTrainer(config(tmp_path, engine=engine), f"w-{slot}", slot=slot)
    app.round_done(StepOutcome(committed=True, step=12, durable_step=12, world_size=3))
    app.round_done(StepOutcome(committed=False, step=12, durable_step=12, world_size=3))
    app.close()
    lines = [
        json.loads(line)
        for path in (tmp_path / "stats").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(lines) == (1 if evaluates else 0)
    if evaluates:
        assert lines[0]["step"] == 12 and lines[0]["quorum"] == 3
        assert lines[0]["engine"] == engine and 0.0 <= lines[0]["auc"] <= 1.0
