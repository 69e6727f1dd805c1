"""``--engine torchelastic``: ``torch.distributed`` under ``torchrun``, restart-based.

Owned here: :class:`TorchElasticEngine`. ``torchrun`` (c10d rendezvous) starts one
process per worker and restarts every one of them when a worker joins or leaves; each
restart resumes from the newest durable checkpoint (:mod:`streamtrain.elastic.
checkpoints`). So the offsets follow the checkpoint, not the step: a batch is
acknowledged only once a checkpoint at its step or later was saved (rank 0 saves every
``checkpoint_every_steps`` steps and announces the saved step in the next round's
counts all-reduce), and what was trained after the newest checkpoint is handed back.

A round: this worker's forward and backward pass (if it has a batch), one all-reduce of
``[records, participants, saved step]``, and, when the step has records, one of the
gradients weighted by records; then ``optimizer.step()``. A collective that fails (a
peer died, the group is being restarted) raises: ``torchrun`` restarts the process.

Run it under ``torchrun``; set ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, without which a
scale-up hangs (pytorch#135712). The rendezvous store and the group's store are
``torch.distributed``'s: they listen on every interface of the host that runs them.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.rendezvous import rendezvous

from streamtrain.elastic.app import DistributedApp, app_state, load_app_state
from streamtrain.elastic.checkpoints import CheckpointDir
from streamtrain.elastic.engine import StepOutcome
from streamtrain.elastic.gradients import GradientBuffer, LocalStep, count_vector, read_counts
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.elastic.statecodec import check_same_model
from streamtrain.errors import ConfigError, ElasticError
from streamtrain.ingest.reader import Batch
from streamtrain.ports import is_loopback

__all__ = ["TorchElasticEngine"]

log = logging.getLogger(__name__)

_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class TorchElasticEngine:
    """One rank of a ``torchrun`` group (module docstring)."""

    kind = EngineKind.TORCHELASTIC

    def __init__(self, app: DistributedApp, settings: ElasticSettings) -> None:
        assert settings.checkpoint_dir is not None  # noqa: S101 - ElasticSettings requires it
        self.app = app
        self.settings = settings
        self.local = LocalStep(app, settings.max_bad_batches)
        self.buffer = GradientBuffer(app.model)
        self.checkpoints = CheckpointDir(
            settings.checkpoint_dir, max_bytes=settings.max_state_bytes
        )
        self.rank = 0
        self.world_size = 1
        self._step = 0
        self._durable = 0  # the newest checkpoint every rank knows was saved
        self._saved = 0  # rank 0: the newest it saved (announced in the next round)
        self.resumed_from = 0

    @property
    def committed_step(self) -> int:
        return self._step

    @property
    def durable_step(self) -> int:
        return self._durable

    def join(self) -> None:
        """Join the group torchrun started, then load the newest durable checkpoint (the
        step rank 0 finds; every rank loads that one)."""
        missing = [name for name in _TORCHRUN_ENV if name not in os.environ]
        if missing:
            raise ConfigError(
                f"--engine torchelastic runs under torchrun ({', '.join(missing)} not set): "
                "torchrun --nnodes MIN:MAX --rdzv-backend c10d ... streamtrain worker ..."
            )
        if is_loopback(self.settings.host) and sys.platform == "linux":
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        if not dist.is_initialized():
            self._init_group()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        found = torch.tensor([float(self.checkpoints.latest_step() if self.rank == 0 else 0)])
        self._collective(found)
        step = round(float(found[0]))
        if step > 0:
            state = self.checkpoints.load(step)
            if not isinstance(state, dict):
                raise ElasticError(f"the checkpoint of step {step} is not a mapping")
            check_same_model(
                self.app.model.state_dict(),
                state.get("model"),
                source=f"the checkpoint of step {step}",
            )
            load_app_state(self.app, state)
        self._step = self._durable = self._saved = self.resumed_from = step
        log.info(
            "rank %d of %d resumed from step %d (restart %s)",
            self.rank,
            self.world_size,
            step,
            os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"),
        )

    def step(self, batch: Batch | None) -> StepOutcome:
        contribution = self.local.run(batch)
        announced = self._saved if self.rank == 0 else 0
        counts = count_vector(contribution.records, announced)
        self._collective(counts)
        records_global, participants, saved = read_counts(counts)
        if participants != self.world_size:
            raise ElasticError(f"{participants} of {self.world_size} ranks took part in a step")
        self._durable = max(self._durable, saved)
        if records_global > 0:
            gradients = self.buffer.pack(contribution.records)
            self._collective(gradients)
            self.buffer.unpack(gradients, records_global)
            self.app.optimizer.step()
        self._step += 1
        if self.rank == 0 and self._step % self.settings.checkpoint_every_steps == 0:
            self.checkpoints.save(self._step, app_state(self.app))
            self._saved = self._step
        return StepOutcome(
            committed=True,
            step=self._step,
            durable_step=self._durable,
            records=contribution.records,
            records_global=records_global,
            world_size=self.world_size,
            refused=contribution.refused,
            loss=contribution.loss,
            compute_s=contribution.compute_s,
        )

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def _init_group(self) -> None:
        """The process group torchrun's environment describes. Its ranks start within
        ``connect_timeout_s`` of each other (each imports torch and the app first, seconds
        on a busy machine): the rendezvous waits that long, the collectives then
        ``timeout_s``, so a dead peer is still found within it."""
        s = self.settings
        try:
            store, rank, world_size = next(
                rendezvous("env://", timeout=timedelta(seconds=s.connect_timeout_s))
            )
        except (RuntimeError, ValueError) as exc:  # DistNetworkError derives from RuntimeError
            raise ElasticError(
                f"the torchrun group did not meet within {s.connect_timeout_s:g} s "
                f"(MASTER_ADDR {os.environ.get('MASTER_ADDR')}, MASTER_PORT "
                f"{os.environ.get('MASTER_PORT')}): {str(exc).splitlines()[0][:200]}"
            ) from exc
        dist.init_process_group(
            "gloo",
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=s.timeout_s),
        )

    def _collective(self, tensor: torch.Tensor) -> None:
        try:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        except RuntimeError as exc:  # DistBackendError and gloo's errors derive from it
            raise ElasticError(
                f"a collective of the group failed (a peer left or the group is restarting): "
                f"{str(exc).splitlines()[0][:200]}",
                retriable=True,
            ) from exc
