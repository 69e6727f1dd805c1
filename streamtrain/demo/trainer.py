"""The demo's training app: the MMoE CTR model at a set speed, scored on today's traffic.

Owned here:

* :class:`DemoWorkerConfig`: what a demo worker needs to know, read from the environment
  the demo gives its pool (``STREAMTRAIN_DEMO_*``), so the worker stays an ordinary
  ``streamtrain worker --entry streamtrain.demo.trainer:demo_app``.
* :class:`DemoTrainer`, a :class:`~streamtrain.elastic.app.DistributedApp`: the worker's
  engine (``--engine``) runs its ``forward_backward`` on each batch, averages the
  gradients over the job's workers and steps the optimizer (one model on every worker
  with ``torchft``; each worker its own copy with ``none``). Around that: a speed limit
  (on a 2-core machine this is what makes the traffic peak need several workers), the
  trained ids for the demo's at-least-once check, online AUC on *today's* traffic
  (training that lags behind learns a stale model and scores worse, which is KALE's
  Fig. 1), and checkpoints with a warm start.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import torch

from streamtrain.demo.observe import FORWARDED_IDS_SUFFIX
from streamtrain.demo.traffic import drift_phase
from streamtrain.elastic.engine import StepOutcome
from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.example import SyntheticCtr
from streamtrain.ingest.mmoe import MmoeCtrApp, roc_auc
from streamtrain.ingest.reader import Batch
from streamtrain.units import s_to_ms

__all__ = ["DemoTrainer", "DemoWorkerConfig", "demo_app", "roc_auc"]

log = logging.getLogger(__name__)

_ENV = "STREAMTRAIN_DEMO_"
_EVAL_SEED = 7_777  # the evaluation sample's own random stream, apart from the traffic's
ENGINES = ("none", "torchft", "torchelastic")


@dataclass(frozen=True, slots=True)
class DemoWorkerConfig:
    """See the module docstring; :meth:`from_env` reads ``STREAMTRAIN_DEMO_*``."""

    run_dir: Path
    start_at_s: float  # wall time the traffic's day began
    duration_s: float
    drift_turns: float = 0.5
    seed: int = 0
    capacity_records_per_s: float = 400.0
    eval_interval_s: float = 1.0
    eval_records: int = 2_000
    checkpoint_interval_s: float = 5.0
    engine: str = "torchft"  # the workers' --engine: "none" trains one copy per worker

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.capacity_records_per_s <= 0:
            raise ConfigError("the demo duration and worker capacity must be positive")
        if self.eval_interval_s <= 0 or self.eval_records < 10:
            raise ConfigError("evaluate at a positive interval on at least 10 records")
        if self.engine not in ENGINES:
            raise ConfigError(f"the engine is one of {', '.join(ENGINES)}, got {self.engine!r}")

    @property
    def one_model(self) -> bool:
        """Whether every worker trains the same model (any engine but ``none``)."""
        return self.engine != "none"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> DemoWorkerConfig:
        source = dict(os.environ if env is None else env)

        def need(name: str) -> str:
            value = source.get(_ENV + name)
            if not value:
                raise ConfigError(
                    f"{_ENV}{name} is not set: demo workers are started by `streamtrain demo`"
                )
            return value

        try:
            return cls(
                run_dir=Path(need("RUN_DIR")),
                start_at_s=float(need("START_AT_S")),
                duration_s=float(need("DURATION_S")),
                drift_turns=float(source.get(_ENV + "DRIFT_TURNS", "0.5")),
                seed=int(source.get(_ENV + "SEED", "0")),
                capacity_records_per_s=float(source.get(_ENV + "CAPACITY", "400")),
                engine=source.get(_ENV + "ENGINE", "torchft"),
            )
        except ValueError as exc:
            raise ConfigError(f"a {_ENV}* setting is not a number: {exc}") from exc

    def to_env(self) -> dict[str, str]:
        return {
            _ENV + "RUN_DIR": str(self.run_dir),
            _ENV + "START_AT_S": repr(self.start_at_s),
            _ENV + "DURATION_S": repr(self.duration_s),
            _ENV + "DRIFT_TURNS": repr(self.drift_turns),
            _ENV + "SEED": str(self.seed),
            _ENV + "CAPACITY": repr(self.capacity_records_per_s),
            _ENV + "ENGINE": self.engine,
        }

    def phase(self, now_s: float) -> float:
        """The drift's phase at wall time ``now_s`` (what the traffic generator uses)."""
        return drift_phase(now_s - self.start_at_s, self.duration_s, self.drift_turns)


class DemoTrainer:
    """The demo's MMoE worker app (module docstring).

    **Trained ids** are appended (int64, little-endian) to
    ``<run dir>/trained/<worker id>-<pid>.ids`` in :meth:`committed`, so every committed
    record is in some file even when the worker is killed; the demo compares them with
    the produced ids. **Online AUC** every ``eval_interval_s`` (:meth:`evaluate`) goes
    to ``<run dir>/stats/<worker id>-<pid>.jsonl``, one JSON line per evaluation. With
    one model only the worker of slot 0 evaluates it (the pool never stops that slot and
    refills it when its worker dies); with ``none`` every worker evaluates its own copy.
    **A checkpoint** goes to ``<run dir>/checkpoints/`` every ``checkpoint_interval_s``
    (one model: slot 0's alone), and a **warm start** loads the newest one before the
    worker joins: with ``none`` that is how a new worker starts from the job's model;
    with ``torchft`` the joiner then heals from a live peer anyway, and the checkpoint
    only matters if every worker died (torchft keeps the model in the live workers).
    """

    def __init__(
        self, config: DemoWorkerConfig, worker_id: str | None = None, slot: int | None = None
    ) -> None:
        self.config = config
        self.worker_id = worker_id or os.environ.get("STREAMTRAIN_WORKER_ID", "worker")
        if slot is None:
            slot = int(os.environ.get("STREAMTRAIN_WORKER_INDEX", "0") or 0)
        # one model: one worker speaks for it (the evaluations, the checkpoint)
        self.speaks_for_model = not config.one_model or slot == 0
        self.inner = MmoeCtrApp(seed=config.seed)
        self.source = SyntheticCtr(seed=config.seed)
        name = f"{self.worker_id}-{os.getpid()}"
        for sub in ("trained", "stats", "checkpoints"):
            (config.run_dir / sub).mkdir(parents=True, exist_ok=True)
        append = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._ids = os.open(config.run_dir / "trained" / f"{name}.ids", append)
        self._forwarded_ids = os.open(
            config.run_dir / "trained" / f"{name}{FORWARDED_IDS_SUFFIX}", append
        )
        self._stats: IO[str] = (config.run_dir / "stats" / f"{name}.jsonl").open("a")
        self._checkpoint = config.run_dir / "checkpoints" / f"{self.worker_id}.pt"
        self.warm_started_from: str | None = None  # set by warm_start, before any data
        self.trained = 0
        self._busy_until = time.monotonic()
        self._next_eval = self._next_checkpoint = time.monotonic()

    @property
    def decoder(self) -> Decoder:
        return self.inner.decoder

    @property
    def model(self) -> torch.nn.Module:
        return self.inner.model

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.inner.optimizer

    @property
    def last_loss(self) -> float:
        return self.inner.last_loss

    def warm_start(self, worker_id: str) -> None:
        """The worker's two-phase start hook: load the newest checkpoint of the job."""
        self.warm_started_from = self._warm_start()

    def _warm_start(self) -> str | None:
        found = sorted(
            (self.config.run_dir / "checkpoints").glob("*.pt"),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for path in found:
            try:
                state = torch.load(path, weights_only=True)
                self.inner.model.load_state_dict(state)
            except (OSError, RuntimeError, ValueError) as exc:  # a torn or old file
                log.warning("cannot warm-start from %s: %s", path, exc)
                continue
            log.info("warm start from %s", path.name)
            return path.name
        return None

    def forward_backward(self, batch: Batch) -> float:
        """The forward and backward pass, within the speed limit: this batch occupies the
        "device" for ``n / capacity`` seconds from when it starts, its own computation
        included; the rest of that time is slept, as a slower accelerator would. The
        synchronization around it (the quorum, gloo's all-reduces) is real and adds to
        it."""
        started = time.monotonic()
        loss = self.inner.forward_backward(batch)
        busy_s = len(batch) / self.config.capacity_records_per_s
        self._busy_until = max(self._busy_until, started) + busy_s
        now = time.monotonic()
        if self._busy_until > now:
            time.sleep(self._busy_until - now)
        return loss

    def committed(self, batch: Batch, step: int) -> None:
        """The step that trained ``batch`` committed on every worker: its ids are trained
        (written before the batch is acknowledged)."""
        ids = np.ascontiguousarray(batch.columns["id"], dtype="<i8")
        os.write(self._forwarded_ids if batch.records.forwarded else self._ids, ids.tobytes())
        self.trained += len(ids)

    def round_done(self, outcome: StepOutcome) -> None:
        """After every round (with data or not): evaluate and checkpoint when due."""
        if not self.speaks_for_model or not outcome.committed:
            return
        now = time.monotonic()
        if now >= self._next_eval:
            self._next_eval = now + self.config.eval_interval_s
            self.evaluate(outcome.loss, outcome)
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + self.config.checkpoint_interval_s
            self.save()

    def evaluate(self, loss: float, outcome: StepOutcome | None = None) -> float:
        """Click AUC on a fresh sample of the traffic at this moment's phase (the hidden
        model at the current phase of the drift, which the traffic generator also
        follows); logged with the job's committed step and the quorum's size."""
        wall = time.time()
        table = self.source.sample(
            self.config.eval_records,
            phase=self.config.phase(wall),
            seed=_EVAL_SEED,
            first_id=int(s_to_ms(wall)),
        )
        model = self.inner.model
        model.eval()
        with torch.no_grad():
            logits = model(torch.from_numpy(table["sparse"]), torch.from_numpy(table["dense"]))
        auc = roc_auc(logits[:, 0].numpy(), table["click"])
        line = {
            "at_s": round(wall, 3),
            "worker_id": self.worker_id,
            "engine": self.config.engine,
            "auc": round(auc, 5),
            "loss": None if loss != loss else round(loss, 5),  # NaN: an empty round
            "trained": self.trained,
        }
        if outcome is not None:
            line["step"] = outcome.step
            line["quorum"] = outcome.world_size
        self._stats.write(json.dumps(line) + "\n")
        self._stats.flush()
        return auc

    def save(self) -> None:
        temporary = self._checkpoint.with_suffix(".tmp")
        torch.save(self.inner.model.state_dict(), temporary)
        temporary.replace(self._checkpoint)

    def close(self) -> None:
        os.close(self._ids)
        os.close(self._forwarded_ids)
        self._stats.close()


def demo_app() -> DemoTrainer:
    """The entry point the demo's workers run (``--entry streamtrain.demo.trainer:demo_app``)."""
    return DemoTrainer(DemoWorkerConfig.from_env())
