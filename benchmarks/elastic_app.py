"""The training app of ``benchmarks/elastic.py``'s workers: the demo's MMoE, one model on
every worker, with what the benchmark measures written down as it happens.

``streamtrain worker --entry benchmarks.elastic_app:make --app-dir <repo>`` with
``ELASTIC_BENCH_DIR`` set. Each worker process appends to ``<dir>/<worker>-<pid>.*``:

* ``.rounds``: one line per round: wall time, step, committed, participants, this
  worker's records, the step's records, a fingerprint of the weights after the round;
* ``.commits``: the ids each committed step trained (before they are acknowledged);
* ``.acks``: the ids acknowledged, with their step;
* ``.final``: the model's state when the worker stops (pickle-free).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO

from streamtrain.elastic.engine import StepOutcome
from streamtrain.elastic.gradients import fingerprint
from streamtrain.elastic.statecodec import encode
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.mmoe import MmoeCtrApp
from streamtrain.ingest.reader import Batch

__all__ = ["BenchApp", "make"]


class BenchApp:
    """:class:`MmoeCtrApp` as a distributed app, recording rounds, commits and acks."""

    def __init__(self, directory: Path, worker_id: str) -> None:
        self.inner = MmoeCtrApp()
        self.model = self.inner.model
        self.optimizer = self.inner.optimizer
        self.last_step = 0
        name = directory / f"{worker_id}-{os.getpid()}"
        self.final_path = name.with_suffix(".final")
        self._files: dict[str, IO[str]] = {
            kind: name.with_suffix(f".{kind}").open("a", buffering=1)
            for kind in ("rounds", "commits", "acks")
        }

    @property
    def decoder(self) -> Decoder:
        return self.inner.decoder

    @property
    def last_loss(self) -> float:
        return self.inner.last_loss

    def forward_backward(self, batch: Batch) -> float:
        return self.inner.forward_backward(batch)

    def round_done(self, outcome: StepOutcome) -> None:
        mark = fingerprint(self.model).tolist() if outcome.committed else [0.0, 0.0]
        self.last_step = outcome.step
        self._files["rounds"].write(
            f"{time.time():.4f} {outcome.step} {int(outcome.committed)} {outcome.world_size} "
            f"{outcome.records} {outcome.records_global} {mark[0]!r} {mark[1]!r}\n"
        )

    def committed(self, batch: Batch, step: int) -> None:
        ids = " ".join(map(str, batch.columns["id"].tolist()))
        self._files["commits"].write(f"{time.time():.4f} {step} {ids}\n")

    def acknowledged(self, batch: Batch, step: int) -> None:
        ids = " ".join(map(str, batch.columns["id"].tolist()))
        self._files["acks"].write(f"{time.time():.4f} {step} {ids}\n")

    def close(self) -> None:
        state = {"step": self.last_step, "model": self.model.state_dict()}
        self.final_path.write_bytes(encode(state))
        for file in self._files.values():
            file.close()


def make() -> BenchApp:
    """The entry point (``ELASTIC_BENCH_DIR`` names where to write)."""
    directory = Path(os.environ["ELASTIC_BENCH_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    return BenchApp(directory, os.environ.get("STREAMTRAIN_WORKER_ID", "worker"))
