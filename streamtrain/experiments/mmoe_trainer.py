"""The real training step of the shuffle experiment's workers: MMoE on CTR records.

Owned here: :class:`MmoeTrainer`, what :mod:`streamtrain.experiments.shuffle_harness`
runs per batch when its spec's trainer says ``"model": "mmoe"``:

* ``step(columns)``: decodes the batch's payloads as
  :data:`~streamtrain.ingest.example.CTR_RECORD` and takes one real Adam step of
  :class:`~streamtrain.ingest.mmoe.MMoE` (one torch thread), starting from
  ``init_state`` (a ``state_dict`` file the experiment trained before the run, as an
  online job starts from its last checkpoint) when given;
* ``maybe_evaluate()``: every ``interval_s``, the model's click AUC on a held-out sample
  (its own random stream) of the traffic *of that moment*: the hidden labelling model at
  the phase the producer uses, read from the experiment's ``clock_file``
  (``{"start_at_s", "produce_s", "drift_turns"}``: the phase turns ``drift_turns`` over
  the ``produce_s`` the producer runs, then stays). No clock file yet: no evaluation.
  One JSON line per evaluation (``at_s``, ``auc``, ``trained``) goes to ``log_path``;
  the CPU time spent evaluating is counted apart (``eval_cpu_s``), so the worker's CPU
  utilization is that of training, reading and shuffling.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from streamtrain.errors import ConfigError
from streamtrain.ingest.example import CTR_RECORD, SyntheticCtr
from streamtrain.ingest.mmoe import MmoeCtrApp, click_auc, ctr_loss
from streamtrain.records import RecordColumns
from streamtrain.units import s_to_ms

__all__ = ["EVAL_SEED", "MmoeTrainer", "decode_ctr", "drift_phase_at"]

EVAL_SEED = 4_242  # the held-out sample's random stream, apart from the producer's


def decode_ctr(columns: RecordColumns) -> np.ndarray[Any, Any]:
    """The batch's payloads as a ``CTR_RECORD`` array (every payload must be one record)."""
    lengths = np.diff(columns.payload_bounds)
    if lengths.size and (lengths != CTR_RECORD.itemsize).any():
        raise ConfigError(
            f"a payload of {int(lengths[lengths != CTR_RECORD.itemsize][0])} bytes is not "
            f"a {CTR_RECORD.itemsize}-byte CTR record"
        )
    return np.frombuffer(columns.payloads, dtype=CTR_RECORD)


def drift_phase_at(now_s: float, clock: dict[str, float]) -> float:
    """The hidden model's phase at wall time ``now_s`` under the experiment's clock."""
    produce_s = float(clock["produce_s"])
    elapsed = min(max(now_s - float(clock["start_at_s"]), 0.0), produce_s)
    return float(clock["drift_turns"]) * elapsed / produce_s


class MmoeTrainer:
    """See the module docstring. ``spec``: ``init_state``, ``learning_rate``, ``seed``,
    ``eval`` (``clock_file``, ``records``, ``interval_s``)."""

    def __init__(self, spec: dict[str, Any], log_path: Path) -> None:
        self.app = MmoeCtrApp(
            learning_rate=float(spec.get("learning_rate", 2e-3)), seed=int(spec.get("seed", 0))
        )
        init_state = spec.get("init_state")
        if init_state:
            self.app.model.load_state_dict(torch.load(init_state, weights_only=True))
        evaluation = spec.get("eval") or {}
        self.clock_file = Path(evaluation["clock_file"]) if evaluation.get("clock_file") else None
        self.eval_records = int(evaluation.get("records", 2_000))
        self.interval_s = float(evaluation.get("interval_s", 1.0))
        self.source = SyntheticCtr(seed=int(spec.get("seed", 0)))
        self.trained = 0
        self.eval_cpu_s = 0.0
        self.step_cpu_s = 0.0
        self._clock: dict[str, float] | None = None
        self._next_eval = time.monotonic()
        self._log: IO[str] = log_path.open("a")

    def warm_up(self) -> None:
        """One forward and backward pass and one scoring on a small sample, without
        changing the model: torch's first calls are slow, and they should not count as
        lag once the producer runs."""
        table = self.source.sample(100, seed=EVAL_SEED)
        model = self.app.model
        sparse, dense, click, conversion = (
            torch.from_numpy(np.array(table[name], order="C"))
            for name in ("sparse", "dense", "click", "conversion")
        )
        torch.autograd.backward(ctr_loss(model(sparse, dense), click, conversion))
        self.app.optimizer.zero_grad(set_to_none=True)
        click_auc(model, table)

    def step(self, columns: RecordColumns) -> float:
        started = time.thread_time()
        table = decode_ctr(columns)
        app = self.app
        sparse, dense, click, conversion = (
            torch.from_numpy(np.array(table[name], order="C"))
            for name in ("sparse", "dense", "click", "conversion")
        )
        app.model.train()
        app.optimizer.zero_grad(set_to_none=True)
        loss = ctr_loss(app.model(sparse, dense), click, conversion)
        torch.autograd.backward(loss)
        app.optimizer.step()
        self.trained += len(table)
        self.step_cpu_s += time.thread_time() - started
        return float(loss.detach())

    def _read_clock(self) -> dict[str, float] | None:
        if self._clock is None and self.clock_file is not None:
            try:
                self._clock = json.loads(self.clock_file.read_text())
            except (FileNotFoundError, ValueError):
                return None
        return self._clock

    def maybe_evaluate(self, *, force: bool = False) -> float | None:
        """Evaluate when due (or ``force``); the AUC, or ``None`` when nothing ran."""
        if not force and time.monotonic() < self._next_eval:
            return None
        clock = self._read_clock()
        if clock is None:
            return None
        self._next_eval = time.monotonic() + self.interval_s
        started = time.thread_time()
        wall = time.time()
        held_out = self.source.sample(
            self.eval_records,
            phase=drift_phase_at(wall, clock),
            seed=EVAL_SEED,
            first_id=int(s_to_ms(wall)),
        )
        auc = click_auc(self.app.model, held_out)
        line = {"at_s": round(wall, 3), "auc": round(auc, 5), "trained": self.trained}
        self._log.write(json.dumps(line) + "\n")
        self._log.flush()
        self.eval_cpu_s += time.thread_time() - started
        return auc

    def close(self) -> None:
        self._log.close()
