"""The built-in example model: a small MMoE CTR/CVR model (KALE §4.1, scaled for a CPU).

Owned here: :class:`MMoE` (embeddings per sparse feature group, a Multi-gate Mixture of
Experts with 4 experts of 64 hidden units and one softmax gate per task, one Swish tower
per task, sigmoid outputs), :func:`ctr_loss` (binary cross-entropy on click and
conversion), and :class:`MmoeCtrApp`, the training app the ``streamtrain worker``
command runs when no entry point is given: it decodes :data:`CTR_RECORD` batches and
takes one Adam step per batch; :func:`roc_auc` (pure: the area under the ROC curve,
Mann-Whitney, ties counted half) and :func:`click_auc` (a model's click AUC on a
``CTR_RECORD`` sample), how the demo and the experiments score models.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from streamtrain.ingest.decoders import StructDecoder
from streamtrain.ingest.example import CTR_RECORD, DENSE_FEATURES, SPARSE_GROUPS
from streamtrain.ingest.reader import Batch

__all__ = ["MMoE", "MmoeCtrApp", "click_auc", "ctr_loss", "mmoe_app", "roc_auc"]


class MMoE(nn.Module):
    """Multi-gate Mixture of Experts over embedded sparse and dense features; 2 tasks."""

    def __init__(
        self,
        *,
        vocab: int = 1000,
        groups: Sequence[tuple[int, int]] = SPARSE_GROUPS,
        dense_features: int = DENSE_FEATURES,
        experts: int = 4,
        expert_hidden: int = 64,
        tasks: int = 2,
        tower: Sequence[int] = (64, 32),
    ) -> None:
        super().__init__()
        self.vocab = vocab
        self.groups = tuple(groups)
        tables = [nn.Embedding(vocab * f, dim) for f, dim in self.groups]
        for table in tables:
            nn.init.normal_(table.weight, std=0.05)
        self.embeddings = nn.ModuleList(tables)
        starts = np.cumsum([0] + [f for f, _ in self.groups]).tolist()
        self._slices = list(itertools.pairwise(starts))
        # Field j of a group looks up rows [j*vocab, (j+1)*vocab) of the group's table.
        self.field_offsets: torch.Tensor
        self.register_buffer(
            "field_offsets",
            torch.cat([torch.arange(f, dtype=torch.int64) * vocab for f, _ in self.groups]),
        )
        width = sum(f * dim for f, dim in self.groups) + dense_features
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(width, expert_hidden), nn.SiLU()) for _ in range(experts)
        )
        self.gates = nn.ModuleList(nn.Linear(width, experts) for _ in range(tasks))
        self.towers = nn.ModuleList(self._tower(expert_hidden, tower) for _ in range(tasks))

    @staticmethod
    def _tower(width: int, hidden: Sequence[int]) -> nn.Sequential:
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.Linear(width, size), nn.SiLU()]
            width = size
        layers.append(nn.Linear(width, 1))
        return nn.Sequential(*layers)

    def forward(self, sparse: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, tasks)`` for ``sparse`` ids ``(n, fields)`` and ``dense`` ``(n, d)``."""
        ids = sparse.long().remainder(self.vocab) + self.field_offsets
        parts = [
            embedding(ids[:, a:b]).flatten(1)
            for (a, b), embedding in zip(self._slices, self.embeddings, strict=True)
        ]
        parts.append(dense.float())
        x = torch.cat(parts, dim=1)
        expert_out = torch.stack([expert(x) for expert in self.experts], dim=1)  # (n, E, h)
        logits = []
        for gate, tower in zip(self.gates, self.towers, strict=True):
            weights = torch.softmax(gate(x), dim=1).unsqueeze(2)  # (n, E, 1)
            logits.append(tower((weights * expert_out).sum(dim=1)))
        return torch.cat(logits, dim=1)


def ctr_loss(logits: torch.Tensor, click: torch.Tensor, conversion: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the CTR and CVR tasks."""
    labels = torch.stack([click.float(), conversion.float()], dim=1)
    return nn.functional.binary_cross_entropy_with_logits(logits, labels)


def roc_auc(scores: np.ndarray[Any, Any], labels: np.ndarray[Any, Any]) -> float:
    """AUC of ``scores`` for 0/1 ``labels``; NaN when one class is missing."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(labels).astype(bool)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = np.arange(1, scores.size + 1)
    # Ties share their mean rank.
    sorted_scores = scores[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    for start, count in zip(first[counts > 1], counts[counts > 1], strict=True):
        ranks[order[start : start + count]] = start + (count + 1) / 2
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def click_auc(model: MMoE, table: np.ndarray[Any, Any]) -> float:
    """``model``'s click AUC on ``table`` (a ``CTR_RECORD`` array), without gradients."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        sparse = torch.from_numpy(np.array(table["sparse"], order="C"))
        dense = torch.from_numpy(np.array(table["dense"], order="C"))
        logits = model(sparse, dense)
    model.train(was_training)
    return roc_auc(logits[:, 0].numpy(), table["click"])


class MmoeCtrApp:
    """One Adam step of :class:`MMoE` per batch of :data:`CTR_RECORD` records.

    ``threads`` sets torch's intra-op threads for the process (``None``: leave it).
    """

    def __init__(
        self,
        *,
        learning_rate: float = 2e-3,
        seed: int = 0,
        threads: int | None = 1,
        **model: Any,
    ) -> None:
        if threads is not None:
            # Small matrices: one intra-op thread beats several that fight the fetch
            # thread and the other workers on the same cores.
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.decoder = StructDecoder(CTR_RECORD)
        self.model = MMoE(**model)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=learning_rate)
        self.steps = 0
        self.last_loss = float("nan")

    def tensors(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        columns = batch.columns
        return tuple(
            torch.from_numpy(np.array(columns[name], order="C"))
            for name in ("sparse", "dense", "click", "conversion")
        )

    def forward_backward(self, batch: Batch) -> float:
        """The forward and backward pass alone (what a data-parallel engine runs: it
        averages the gradients over the workers and steps the optimizer itself)."""
        sparse, dense, click, conversion = self.tensors(batch)
        self.model.train()
        loss = ctr_loss(self.model(sparse, dense), click, conversion)
        torch.autograd.backward(loss)
        self.last_loss = float(loss.detach())
        return self.last_loss

    def step(self, batch: Batch) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.forward_backward(batch)
        self.optimizer.step()
        self.steps += 1
        return loss


def mmoe_app() -> MmoeCtrApp:
    """The entry point ``streamtrain worker`` uses by default."""
    return MmoeCtrApp()
