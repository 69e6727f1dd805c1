"""A worker's share of a step: gradients weighted by records sum to the gradient of the
mean loss over every record; a batch that cannot be trained is refused, not shared."""

import math
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtrain.elastic.app import TrainingParts
from streamtrain.elastic.gradients import (
    GradientBuffer,
    LocalStep,
    count_vector,
    fingerprint,
    holds_kept_model,
    read_counts,
    same_model_tags,
    weights_tag,
)
from streamtrain.errors import ElasticError
from streamtrain.ingest.decoders import RawDecoder
from streamtrain.ingest.reader import Batch
from streamtrain.testing import records


def mean_loss(model, x, y):
    return torch.nn.functional.mse_loss(model(x).squeeze(1), y)


def batch_of(x, y):
    n = x.shape[0]
    return Batch(records(0, n), {"x": x.numpy(), "y": y.numpy()}, lambda _: None)


def app(seed=0, fail_with=None):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))

    def forward_backward(model, batch):
        if fail_with is not None:
            raise fail_with
        loss = mean_loss(model, torch.from_numpy(batch["x"]), torch.from_numpy(batch["y"]))
        loss.backward()
        return float(loss.detach())

    return TrainingParts(
        RawDecoder(), model, torch.optim.SGD(model.parameters(), lr=0.1), forward_backward
    )


@pytest.mark.parametrize("sizes", [(3, 7), (1, 0, 9), (5, 5, 5, 1)])
def test_weighted_shares_sum_to_the_gradient_of_all_records(sizes):
    rng = np.random.default_rng(0)
    data = [
        (
            torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32)),
            torch.from_numpy(rng.normal(size=n).astype(np.float32)),
        )
        for n in sizes
    ]
    workers = [app() for _ in sizes]
    summed, counts = None, torch.zeros(3, dtype=torch.float64)
    for worker, (x, y) in zip(workers, data, strict=True):
        contribution = LocalStep(worker).run(batch_of(x, y) if len(y) else None)
        assert contribution.records == len(y)
        share = GradientBuffer(worker.model).pack(contribution.records)
        summed = share if summed is None else summed + share
        counts += count_vector(contribution.records)
    total, participants, _ = read_counts(counts)
    assert (total, participants) == (sum(sizes), len(sizes))
    assert summed is not None
    GradientBuffer(workers[0].model).unpack(summed, total)
    one = app()
    x = torch.cat([x for x, _ in data])
    y = torch.cat([y for _, y in data])
    mean_loss(one.model, x, y).backward()
    for got, want in zip(workers[0].model.parameters(), one.model.parameters(), strict=True):
        assert torch.allclose(got.grad, want.grad, atol=1e-6)


def test_an_empty_share_is_zeros_and_skips_the_forward_pass():
    worker = app(fail_with=AssertionError("no forward pass for no data"))
    contribution = LocalStep(worker).run(None)
    assert contribution.records == 0 and contribution.refused is None
    assert not GradientBuffer(worker.model).pack(0).any()


def test_a_nan_loss_is_refused_and_contributes_nothing():
    worker = app()
    x = torch.full((4, 3), float("nan"))
    contribution = LocalStep(worker).run(batch_of(x, torch.zeros(4)))
    assert contribution.records == 0 and "loss is nan" in str(contribution.refused)
    assert all(p.grad is None for p in worker.model.parameters())


def test_a_data_error_is_refused_and_too_many_in_a_row_stop_the_worker():
    worker = app(fail_with=IndexError("index 7 is out of bounds"))
    step = LocalStep(worker, max_bad_batches=3)
    batch = batch_of(torch.zeros(2, 3), torch.zeros(2))
    for _ in range(2):
        assert "index 7" in str(step.run(batch).refused)
    with pytest.raises(ElasticError, match="3 batches in a row"):
        step.run(batch)


def test_a_good_batch_resets_the_count_of_bad_ones():
    worker = app()
    step = LocalStep(worker, max_bad_batches=2)
    bad = batch_of(torch.full((2, 3), float("inf")), torch.zeros(2))
    good = batch_of(torch.zeros(2, 3), torch.zeros(2))
    for _ in range(5):
        assert step.run(bad).refused is not None
        assert step.run(good).refused is None


def test_the_fingerprint_tells_different_weights_apart():
    a, b = app(seed=0), app(seed=0)
    assert torch.equal(fingerprint(a.model), fingerprint(b.model))
    with torch.no_grad():
        next(b.model.parameters())[0, 0] += 1e-6
    assert not torch.equal(fingerprint(a.model), fingerprint(b.model))


def test_weight_tags_summed_over_participants_tell_one_model_from_two():
    same = [weights_tag(fingerprint(app(seed=0).model)) for _ in range(5)]
    assert all(0 <= float(x) < 2**16 and float(x) == int(x) for x in same[0])
    total = torch.stack(same).sum(0)
    assert all(same_model_tags(total, tag, 5) for tag in same)
    other = app(seed=0)
    with torch.no_grad():
        next(other.model.parameters())[0, 0] += 1e-6
    mixed = [*same[:4], weights_tag(fingerprint(other.model))]
    total = torch.stack(mixed).sum(0)
    # every participant sees that the sum is not five times its own tag
    assert not any(same_model_tags(total, tag, 5) for tag in mixed)
    three = [weights_tag(fingerprint(app(seed=s).model)) for s in (1, 2, 3)]
    assert not any(same_model_tags(torch.stack(three).sum(0), tag, 3) for tag in three)


class MaxGroup:
    """A MAX all-reduce among ``size`` threads, as gloo's: each call returns once every
    participant gave its tensor."""

    def __init__(self, size: int) -> None:
        self.given: list[torch.Tensor | None] = [None] * size
        self.barrier = threading.Barrier(size, timeout=10)

    def reduce_max(self, rank: int):
        def call(tensor: torch.Tensor) -> torch.Tensor:
            self.given[rank] = tensor.clone()
            self.barrier.wait()
            result = torch.stack(self.given).max(0).values  # type: ignore[arg-type]
            self.barrier.wait()  # nobody overwrites its slot before all have read
            return result

        return call


def kept_by_each(prints: list[tuple[float, float]]) -> list[bool]:
    group = MaxGroup(len(prints))
    kept: list[bool] = [False] * len(prints)

    def run(rank: int) -> None:
        mine = torch.tensor(prints[rank], dtype=torch.float64)
        kept[rank] = holds_kept_model(mine, group.reduce_max(rank))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(prints))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    return kept


def test_the_kept_model_is_someones_when_sums_and_squares_disagree():
    # one worker has the greater sum, the other the greater sum of squares: an element-wise
    # MAX of the fingerprints is (2, 5), nobody's, and both would step back
    assert kept_by_each([(1.0, 5.0), (2.0, 3.0)]) == [False, True]


_VALUES = st.sampled_from([-math.inf, -1.0, 0.0, 1.0, 2.0, math.inf, math.nan])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_VALUES, _VALUES), min_size=1, max_size=5))
def test_exactly_the_holders_of_the_greatest_fingerprint_keep_their_model(prints):
    def rank(value: float) -> float:
        return -math.inf if math.isnan(value) else value

    keys = [(rank(a), rank(b)) for a, b in prints]
    assert kept_by_each(prints) == [key == max(keys) for key in keys]


def test_a_contribution_times_its_forward_and_backward_pass():
    worker = app()
    inner = worker.step_fn

    def slow(model, batch):
        time.sleep(0.05)
        return inner(model, batch)

    worker = TrainingParts(worker.decoder, worker.model, worker.optimizer, slow)
    x = torch.zeros(4, 3)
    contribution = LocalStep(worker).run(batch_of(x, torch.zeros(4)))
    assert contribution.records == 4 and contribution.compute_s >= 0.05
    assert LocalStep(worker).run(None).compute_s == 0.0
