"""The example CTR/CVR record: a fixed 200-byte binary layout, and a synthetic source of it.

Owned here: :data:`CTR_RECORD` (the numpy structured dtype the built-in worker decodes
with :class:`~streamtrain.ingest.decoders.StructDecoder`), the sparse feature groups
(KALE §4.1's embedding layout ``64*2, 8*18, 64*2, 8*12, 8*3`` with dimensions scaled
for CPU), and :class:`SyntheticCtr`, which draws records whose click and conversion
labels come from a hidden logistic model, so training on them measurably learns. The
hidden model can drift (``phase``), so that stale training hurts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = [
    "CTR_RECORD",
    "DENSE_FEATURES",
    "SPARSE_FIELDS",
    "SPARSE_GROUPS",
    "SyntheticCtr",
    "split_records",
]

#: ``(fields, embedding dim)`` per sparse feature group: KALE's 64*2, 8*18, 64*2, 8*12,
#: 8*3, with the dimensions divided by 4 and 2 for a CPU.
SPARSE_GROUPS: tuple[tuple[int, int], ...] = ((2, 16), (18, 4), (2, 16), (12, 4), (3, 4))
SPARSE_FIELDS = sum(fields for fields, _ in SPARSE_GROUPS)  # 37
DENSE_FEATURES = 8

#: One training record, 200 bytes little-endian: a unique id, two labels (click,
#: conversion), 37 hashed categorical feature ids, 8 dense features, padding.
CTR_RECORD = np.dtype(
    [
        ("id", "<i8"),
        ("click", "u1"),
        ("conversion", "u1"),
        ("sparse", "<i4", (SPARSE_FIELDS,)),
        ("dense", "<f4", (DENSE_FEATURES,)),
        ("_pad", "V10"),
    ]
)


def split_records(table: NDArray[np.void]) -> list[bytes]:
    """One ``bytes`` payload per row of a ``CTR_RECORD`` array."""
    data = table.tobytes()
    size = table.dtype.itemsize
    return [data[i : i + size] for i in range(0, len(data), size)]


@dataclass(frozen=True, slots=True)
class SyntheticCtr:
    """Records whose labels follow a hidden logistic model over the features.

    ``vocab`` ids per sparse field; ``phase`` in [0, 1) rotates the hidden model
    between two random ones (a full turn returns to the start), which is how a demo
    makes the data drift.
    """

    seed: int = 0
    vocab: int = 1000
    base_ctr_logit: float = -1.0
    base_cvr_logit: float = -0.5

    def __post_init__(self) -> None:
        if self.vocab < 2:
            raise ConfigError(f"vocab must be at least 2, got {self.vocab}")

    def _weights(self, phase: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        rng = np.random.default_rng(self.seed)
        sparse_a = rng.normal(0.0, 0.6, size=(2, SPARSE_FIELDS, self.vocab))
        sparse_b = rng.normal(0.0, 0.6, size=(2, SPARSE_FIELDS, self.vocab))
        dense_a = rng.normal(0.0, 0.5, size=(2, DENSE_FEATURES))
        dense_b = rng.normal(0.0, 0.5, size=(2, DENSE_FEATURES))
        angle = 2 * np.pi * phase
        c, s = np.cos(angle), np.sin(angle)
        return c * sparse_a + s * sparse_b, c * dense_a + s * dense_b

    def sample(
        self, n: int, *, first_id: int = 0, phase: float = 0.0, seed: int = 1
    ) -> NDArray[np.void]:
        """``n`` records with ids ``first_id ..``, as a ``CTR_RECORD`` array."""
        if n < 0:
            raise ConfigError(f"cannot sample {n} records")
        sparse_w, dense_w = self._weights(phase)
        rng = np.random.default_rng([self.seed, seed, first_id])
        # Zipf-like ids: a few categories are much more frequent, as in real click logs.
        sparse = (rng.zipf(1.3, size=(n, SPARSE_FIELDS)) - 1) % self.vocab
        dense = rng.normal(0.0, 1.0, size=(n, DENSE_FEATURES)).astype(np.float32)
        fields = np.arange(SPARSE_FIELDS)
        logits = np.stack(
            [
                sparse_w[task][fields, sparse].sum(axis=1) / np.sqrt(SPARSE_FIELDS)
                + dense @ dense_w[task]
                for task in range(2)
            ],
            axis=1,
        )
        logits[:, 0] += self.base_ctr_logit
        logits[:, 1] += self.base_cvr_logit
        probability = 1.0 / (1.0 + np.exp(-logits))
        click = rng.random(n) < probability[:, 0]
        conversion = click & (rng.random(n) < probability[:, 1])
        table = np.zeros(n, dtype=CTR_RECORD)
        table["id"] = np.arange(first_id, first_id + n)
        table["click"] = click
        table["conversion"] = conversion
        table["sparse"] = sparse
        table["dense"] = dense
        return table
