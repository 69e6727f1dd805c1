"""The example CTR record and the MMoE model: layout, determinism, and that it learns."""

import numpy as np
import pytest
import torch

from streamtrain.ingest.decoders import StructDecoder
from streamtrain.ingest.example import (
    CTR_RECORD,
    SPARSE_FIELDS,
    SyntheticCtr,
    split_records,
)
from streamtrain.ingest.mmoe import MMoE, MmoeCtrApp
from streamtrain.ingest.reader import Batch
from streamtrain.records import RecordColumns


def test_record_is_200_bytes_with_37_sparse_fields():
    assert CTR_RECORD.itemsize == 200
    assert SPARSE_FIELDS == 37


def test_synthetic_records_are_deterministic_with_unique_ids():
    source = SyntheticCtr(seed=3)
    a = source.sample(500, first_id=100)
    b = source.sample(500, first_id=100)
    assert a.tobytes() == b.tobytes()
    assert a["id"].tolist() == list(range(100, 600))
    assert 0.05 < a["click"].mean() < 0.95
    assert (a["conversion"] <= a["click"]).all()
    assert (a["sparse"] >= 0).all() and (a["sparse"] < source.vocab).all()


def test_drift_changes_the_labels():
    source = SyntheticCtr(seed=3)
    now = source.sample(4000, phase=0.0)
    later = source.sample(4000, phase=0.25)
    assert (now["sparse"] == later["sparse"]).all()  # same features ...
    assert (now["click"] != later["click"]).mean() > 0.1  # ... other labels


def _batch(table):
    values = split_records(table)
    n = len(values)
    records = RecordColumns.from_values("t", [0] * n, list(range(n)), [0] * n, values)
    decoded = StructDecoder(CTR_RECORD).decode(records)
    return Batch(records, decoded.columns, lambda r: None)


def test_mmoe_forward_shapes():
    model = MMoE()
    table = SyntheticCtr().sample(16)
    logits = model(
        torch.from_numpy(table["sparse"].copy()), torch.from_numpy(table["dense"].copy())
    )
    assert logits.shape == (16, 2)


@pytest.fixture
def one_thread():
    """Small matrices: one intra-op thread is faster than two fighting other tests."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_mmoe_learns_the_hidden_model(one_thread):
    app = MmoeCtrApp(seed=1)
    source = SyntheticCtr(seed=0)
    held_out = _batch(source.sample(2000, first_id=10**6, seed=99))

    def held_out_loss():
        from streamtrain.ingest.mmoe import ctr_loss

        sparse, dense, click, conversion = app.tensors(held_out)
        with torch.no_grad():
            return float(ctr_loss(app.model(sparse, dense), click, conversion))

    before = held_out_loss()
    for i in range(60):
        app.step(_batch(source.sample(256, first_id=i * 256, seed=i)))
    after = held_out_loss()
    assert app.steps == 60
    assert np.isfinite(app.last_loss)
    assert after < before - 0.1
