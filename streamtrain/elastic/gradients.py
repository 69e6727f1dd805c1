"""One worker's share of a data-parallel step: its gradient, weighted by its records.

Owned here: :class:`LocalStep`, which runs the app's forward and backward pass on this
worker's batch (or nothing, for an empty one) and refuses a batch whose step raises a
data error or gives a non-finite loss or gradient (the worker then contributes nothing
and the caller dead-letters the batch; after ``max_bad_batches`` in a row it raises:
then the step is broken, not the data); and :class:`GradientBuffer`, the one flat
tensor a step all-reduces.

The weighting: worker ``i`` has ``n_i`` records and the gradient ``g_i`` of its mean
loss. It contributes ``n_i * g_i``; the sum over the workers divided by ``N = sum n_i``
(one all-reduce of the counts first, :func:`count_vector`) is the gradient of the mean
loss over every record of the step, whatever each worker had: a worker with 3 records
does not weigh as much as one with 300, and one with none adds nothing.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from streamtrain.elastic.app import DistributedApp
from streamtrain.errors import ElasticError
from streamtrain.ingest.reader import Batch

__all__ = [
    "Contribution",
    "GradientBuffer",
    "LocalStep",
    "count_vector",
    "fingerprint",
    "holds_kept_model",
    "read_counts",
    "same_model_tags",
    "weights_tag",
]

log = logging.getLogger(__name__)

# What a step of the user's code may raise for data it cannot train on (an id out of
# range, a shape that does not fit): the batch is refused, the worker keeps going.
_DATA_ERRORS = (ValueError, IndexError, RuntimeError)


@dataclass(frozen=True, slots=True)
class Contribution:
    """What this worker brings to a step: ``records`` trained (0: nothing), the batch's
    refusal if it was refused (``refused``: why), the loss, and the time its forward and
    backward pass took (``compute_s``)."""

    records: int
    refused: str | None = None
    loss: float = float("nan")
    compute_s: float = 0.0


def count_vector(records: int, durable_step: int = 0) -> torch.Tensor:
    """The counts all-reduce's input: ``[records, 1 (a participant), durable_step]``.

    Summed over the participants: the step's records, how many took part, and (only one
    worker, the checkpoint writer, contributes it) the newest durable step.
    """
    return torch.tensor([float(records), 1.0, float(durable_step)], dtype=torch.float64)


def read_counts(summed: torch.Tensor) -> tuple[int, int, int]:
    """``(records, participants, durable_step)`` from a summed :func:`count_vector`."""
    records, participants, durable = (round(float(x)) for x in summed.tolist())
    return records, participants, durable


def fingerprint(model: torch.nn.Module) -> torch.Tensor:
    """Two numbers that differ between two models that are not the same weights
    (float64 sums of the parameters and of their squares): the same weights give the
    same bits on every worker."""
    with torch.no_grad():
        total = torch.zeros(2, dtype=torch.float64)
        for p in model.parameters():
            flat = p.detach().reshape(-1).to(torch.float64)
            total[0] += flat.sum()
            total[1] += flat.square().sum()
    return total


_TAG_CHUNKS = 8  # 16-bit pieces of the fingerprint's 128 bits


def weights_tag(print_: torch.Tensor) -> torch.Tensor:
    """:func:`fingerprint`'s bits as small integers (float64, each below 2**16), so that
    they ride in the counts all-reduce: a SUM of up to 2**37 of them is exact, and a
    participant can tell from the sum whether everyone sent its own tag
    (:func:`same_model_tags`)."""
    raw = print_.to(torch.float64).contiguous().numpy().tobytes()
    pieces = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, 2 * _TAG_CHUNKS, 2)]
    return torch.tensor(pieces, dtype=torch.float64)


def same_model_tags(summed: torch.Tensor, mine: torch.Tensor, participants: int) -> bool:
    """Whether ``summed`` (the SUM of every participant's :func:`weights_tag`) is
    ``participants`` times this worker's own: the same weights everywhere. Different
    weights give a sum that equals it only if the other tags average to this one in all
    eight 16-bit pieces at once."""
    return bool(torch.equal(summed, mine * participants))


def holds_kept_model(
    mine: torch.Tensor, reduce_max: Callable[[torch.Tensor], torch.Tensor]
) -> bool:
    """Whether this worker holds the model the participants keep after they found they
    hold different ones: the greatest :func:`fingerprint` in lexicographic order (the sum
    first, the sum of squares for a tie; NaN ranks below every number).

    ``reduce_max`` is a MAX all-reduce that every participant calls as often, in the
    same order (twice here). One MAX of the whole fingerprints would not do: it is taken
    element by element, so when one worker has the greater sum and another the greater
    sum of squares it is nobody's fingerprint, nobody keeps its model, and every worker
    steps back to heal from a peer that is stepping back too.
    """
    mine = mine.to(torch.float64)
    ranked = torch.where(mine.isnan(), -math.inf, mine)
    lead = reduce_max(ranked[:1].clone())
    leads = bool(ranked[0] == lead[0])
    runner = ranked[1:2].clone() if leads else torch.full((1,), -math.inf, dtype=torch.float64)
    second = reduce_max(runner)
    return leads and bool(ranked[1] == second[0])


class GradientBuffer:
    """The model's gradients as one flat float32 tensor, to all-reduce in one call."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.numel = sum(p.numel() for p in self.params)

    def pack(self, records: int) -> torch.Tensor:
        """``records`` times this worker's gradients (zeros where it has none)."""
        flat = torch.zeros(self.numel, dtype=torch.float32)
        if records == 0:
            return flat
        offset = 0
        for p in self.params:
            n = p.numel()
            if p.grad is not None:
                grad = p.grad.to_dense() if p.grad.is_sparse else p.grad
                flat[offset : offset + n].copy_(grad.reshape(-1)).mul_(records)
            offset += n
        return flat

    def unpack(self, summed: torch.Tensor, records_global: int) -> None:
        """Set every parameter's gradient to ``summed / records_global``: the mean."""
        offset = 0
        for p in self.params:
            n = p.numel()
            mean = summed[offset : offset + n].view_as(p).to(p.dtype) / records_global
            if p.grad is None:
                p.grad = mean.clone()
            else:
                p.grad.copy_(mean)
            offset += n


class LocalStep:
    """This worker's forward and backward pass on its batch (module docstring)."""

    def __init__(self, app: DistributedApp, max_bad_batches: int = 5) -> None:
        self.app = app
        self.max_bad_batches = max_bad_batches
        self.bad_in_a_row = 0

    def run(self, batch: Batch | None) -> Contribution:
        """Zero the gradients, then train on ``batch`` unless it is empty."""
        self.app.optimizer.zero_grad(set_to_none=True)
        if batch is None or len(batch) == 0:
            return Contribution(0)
        self.app.model.train()
        started = time.monotonic()
        try:
            loss = float(self.app.forward_backward(batch))
        except _DATA_ERRORS as exc:
            return self._refuse(batch, f"the training step failed on it: {exc!r:.300}")
        if not math.isfinite(loss):
            return self._refuse(batch, f"its loss is {loss}")
        if not all(
            p.grad is None or bool(torch.isfinite(p.grad).all())
            for p in self.app.model.parameters()
        ):
            return self._refuse(batch, "its gradient is not finite")
        self.bad_in_a_row = 0
        return Contribution(len(batch), loss=loss, compute_s=time.monotonic() - started)

    def _refuse(self, batch: Batch, why: str) -> Contribution:
        self.app.optimizer.zero_grad(set_to_none=True)
        self.bad_in_a_row += 1
        if self.bad_in_a_row >= self.max_bad_batches:
            raise ElasticError(
                f"{self.bad_in_a_row} batches in a row could not be trained (the last: {why}): "
                "the training step is broken, not the data"
            )
        log.warning("refusing a batch of %d records: %s", len(batch), why)
        return Contribution(0, refused=why)
