"""One worker of a data-parallel job, scripted for tests: a small MLP on in-memory
batches, driven by the real engine (torchft, torchelastic or none) through
ElasticTrainer. Run as ``python -m tests.integration.elastic_rank PLAN.json``.

The plan names the engine, how many workers to wait for (stepping empty) before the
first planned round, the batches of each round (record ids; an empty list is a round
with no data), optional faults (a step that hangs at a round, for a kill -9; weights
changed at a round, as a worker that trained apart would hold), and
where to write: one JSON line per round (committed, step, records, the model's
checksum), per acknowledged or handed-back batch, and at the end the model's state.
A batch handed back is trained again before the next planned one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamtrain.elastic.app import TrainingParts
from streamtrain.elastic.engine import make_engine
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.elastic.statecodec import encode
from streamtrain.elastic.trainer import ElasticTrainer
from streamtrain.errors import StreamtrainError
from streamtrain.ingest.decoders import RawDecoder
from streamtrain.ingest.reader import Batch
from streamtrain.records import RecordColumns

FEATURES = 8


def features(ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic inputs and labels of record ids (any worker computes the same)."""
    j = np.arange(FEATURES)
    x = np.sin(0.37 * ids[:, None].astype(np.float64) + j[None, :]).astype(np.float32)
    y = (x.sum(axis=1) + 0.3 * np.cos(ids.astype(np.float64)) > 0).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)


def make_app(hidden: int, seed: int, poison: set[int]) -> TrainingParts:
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)

    def forward_backward(model: torch.nn.Module, batch: Batch) -> float:
        ids = batch.columns["id"]
        x, y = features(ids)
        if poison & set(ids.tolist()):
            x = x * float("nan")  # a record whose values make the loss NaN
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        loss.backward()
        return float(loss.detach())

    return TrainingParts(RawDecoder(), model, optimizer, forward_backward)


def checksum(model: torch.nn.Module) -> float:
    with torch.no_grad():
        return float(sum(float(p.double().sum()) for p in model.parameters()))


class Log:
    def __init__(self, path: Path) -> None:
        self.file = path.open("a")

    def write(self, **row: Any) -> None:
        row["t"] = time.time()
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()


def batch_of(ids: list[int], log: Log, redo: deque[Batch]) -> Batch:
    records = RecordColumns.from_values(
        "t", [0] * len(ids), ids, [0] * len(ids), [str(i).encode() for i in ids]
    )
    columns = {"id": np.asarray(ids, dtype=np.int64)}

    def acked(done: RecordColumns) -> None:
        log.write(acked=[int(i) for i in done.offsets])

    def handed_back(batch: Batch) -> None:
        log.write(nacked=[int(i) for i in batch.columns["id"]])
        redo.append(batch_of([int(i) for i in batch.columns["id"]], log, redo))

    return Batch(records, columns, acked, handed_back)


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    if "per_rank" in plan:  # one plan for every rank torchrun starts
        plan.update(plan.pop("per_rank")[int(os.environ["RANK"])])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    log = Log(Path(plan["out"]))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    app = make_app(plan.get("hidden", 16), plan.get("seed", 0), set(plan.get("poison", [])))
    slow = plan.get("slow")
    inner = app.forward_backward

    def forward_backward(batch: Batch) -> float:
        if slow is not None and slow["round"] == state["round"]:
            Path(slow["marker"]).write_text("in step")
            time.sleep(slow["seconds"])
        time.sleep(plan.get("step_sleep_s", 0.0))
        return inner(batch)

    app.forward_backward = forward_backward  # type: ignore[method-assign]
    state = {"round": 0}
    settings = ElasticSettings(
        engine=EngineKind(plan["engine"]),
        replica_id=plan["name"],
        lighthouse=plan.get("lighthouse"),
        step_wait_s=0.1,
        timeout_s=plan.get("timeout_s", 5.0),
        connect_timeout_s=plan.get("connect_timeout_s", 10.0),
        checkpoint_dir=Path(plan["checkpoint_dir"]) if plan.get("checkpoint_dir") else None,
        checkpoint_every_steps=plan.get("checkpoint_every", 20),
    )
    engine = make_engine(app, settings, stop)
    refused: list[int] = []
    trainer = ElasticTrainer(
        engine, dead_letter=lambda batch, why: refused.extend(batch.columns["id"].tolist())
    )
    trainer.on_committed(
        lambda batch, step: log.write(trained=batch.columns["id"].tolist(), step=step)
    )
    try:
        time.sleep(plan.get("join_delay_s", 0.0))  # as if this rank started late
        engine.join()
        log.write(joined=engine.committed_step, healed=getattr(engine, "healed", None))
        world, start_world = 1, plan.get("start_world", 1)
        while world < start_world and not stop.is_set():
            world = trainer.round(None).world_size  # wait for the others, stepping empty
        redo: deque[Batch] = deque()
        planned = deque(plan["batches"])
        # "hold_until": once the plan is trained, step empty until this file exists (the
        # rank stays in the job until the test says so)
        hold = Path(plan["hold_until"]) if plan.get("hold_until") else None

        def held() -> bool:
            return hold is not None and not hold.exists()

        while (planned or redo or held()) and not stop.is_set():
            batch = None
            if not planned and not redo:
                time.sleep(0.05)
            if redo:
                batch = redo.popleft()
            elif planned:
                ids = planned.popleft()
                batch = batch_of(ids, log, redo) if ids else None
            if plan.get("perturb_round") == state["round"]:
                with torch.no_grad():  # as if this worker had trained apart from the others
                    for p in app.model.parameters():
                        p.add_(0.01)
            outcome = trainer.round(batch)
            log.write(
                round=state["round"],
                committed=outcome.committed,
                step=outcome.step,
                durable=outcome.durable_step,
                records=outcome.records,
                records_global=outcome.records_global,
                world=outcome.world_size,
                refused=outcome.refused,
                checksum=checksum(app.model) if outcome.committed else None,
                ids=[] if batch is None else batch.columns["id"].tolist(),
            )
            state["round"] += 1
        trainer.close()
        if refused:
            log.write(dead_letters=refused)
    except StreamtrainError as exc:
        log.write(error=type(exc).__name__, message=exc.message)
        print(f"error: {exc.message}", file=sys.stderr, flush=True)
        return 3
    finally:
        engine.leave()
    Path(plan["out"] + ".state").write_bytes(encode(app.model.state_dict()))
    log.write(done=True, loss=app.last_loss if math.isfinite(app.last_loss) else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
