"""What a user gives to train one model on many workers: the distributed training app.

Owned here: the :class:`DistributedApp` protocol and :class:`TrainingParts`, which
builds one from parts. The user gives the model, its optimizer, a ``forward_backward`` that
runs the forward and backward pass on one batch (the loss as a DDP loop computes it: the
mean over the batch's records) and, optionally, ``state_dict``/``load_state_dict`` for state
beyond the model and the optimizer (a scheduler, counters). The library owns the rest
of the loop: ``zero_grad``, averaging the gradients over every worker's records,
``optimizer.step()`` only when the step committed everywhere, the offsets, a joiner's
heal and the checkpoints (:mod:`streamtrain.elastic.engine`).

``forward_backward`` is called only with a non-empty batch: a worker with no data in a round
contributes nothing and the library takes care of the collective.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.reader import Batch

__all__ = ["DistributedApp", "TrainingParts", "app_state", "load_app_state"]


@runtime_checkable
class DistributedApp(Protocol):
    """A model trained data-parallel by every worker of a job (module docstring).

    ``forward_backward(batch)`` runs the forward pass and ``loss.backward()`` on the
    batch's mean loss and returns the loss as a float; it neither zeroes gradients nor
    steps the optimizer (a worker's ``step(batch)`` does all of it: another protocol).
    An optional ``state_dict()``/``load_state_dict(state)`` pair carries state beyond
    ``model`` and ``optimizer``. Optional hooks: ``committed(batch, step)`` once a step
    that trained ``batch`` committed (to record what was trained),
    ``acknowledged(batch, step)`` right before its records are acknowledged,
    ``round_done(outcome)`` after every round (a
    :class:`~streamtrain.elastic.engine.StepOutcome`), and ``close()`` at the end.
    """

    @property
    def decoder(self) -> Decoder: ...

    @property
    def model(self) -> torch.nn.Module: ...

    @property
    def optimizer(self) -> torch.optim.Optimizer: ...

    def forward_backward(self, batch: Batch) -> float: ...


@dataclass
class TrainingParts:
    """A :class:`DistributedApp` from its parts: ``step_fn(model, batch) -> loss``."""

    decoder: Decoder
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step_fn: Callable[[torch.nn.Module, Batch], float]
    extra_state: Callable[[], dict[str, Any]] | None = None
    load_extra_state: Callable[[Mapping[str, Any]], None] | None = None
    last_loss: float = field(default=float("nan"), init=False)

    def forward_backward(self, batch: Batch) -> float:
        self.last_loss = float(self.step_fn(self.model, batch))
        return self.last_loss

    def state_dict(self) -> dict[str, Any]:
        return {} if self.extra_state is None else self.extra_state()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.load_extra_state is not None:
            self.load_extra_state(state)


def app_state(app: DistributedApp) -> dict[str, Any]:
    """Everything a joiner heals from and a checkpoint holds: the model, the optimizer,
    and the app's own ``state_dict()`` when it has one."""
    extra = getattr(app, "state_dict", None)
    return {
        "model": app.model.state_dict(),
        "optimizer": app.optimizer.state_dict(),
        "app": extra() if callable(extra) else {},
    }


def load_app_state(app: DistributedApp, state: Mapping[str, Any]) -> None:
    """Load what :func:`app_state` gave (the model part already checked by the caller)."""
    app.model.load_state_dict(state["model"])
    app.optimizer.load_state_dict(state["optimizer"])
    load = getattr(app, "load_state_dict", None)
    if callable(load):
        load(state.get("app", {}))
