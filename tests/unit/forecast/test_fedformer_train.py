import subprocess
import sys

import pytest
import torch

from streamtrain.forecast.fedformer_train import Adam, cosine_rates


@pytest.mark.parametrize("steps", [0, 1, 2, 7, 50, 400])
def test_cosine_rates_are_torch_schedule_to_the_bit(steps):
    param = torch.nn.Parameter(torch.zeros(1))
    optimiser = torch.optim.SGD([param], lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max(1, steps))
    expected = []
    for _ in range(steps):
        expected.append(optimiser.param_groups[0]["lr"])
        optimiser.step()
        schedule.step()
    assert cosine_rates(3e-3, steps) == expected


def _model(seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    # the second layer is never used: no gradient, no state, no update
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))


def test_adam_is_torch_adam_to_the_bit():
    ours, theirs = _model(0), _model(0)
    unused = torch.nn.Linear(3, 3)
    unused_before = unused.weight.detach().clone()
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 4, generator=generator)
    y = torch.randn(64, 1, generator=generator)
    optimiser = Adam([*ours.parameters(), *unused.parameters()])
    reference = torch.optim.Adam(theirs.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(reference, T_max=30)
    rates = cosine_rates(3e-3, 30)
    for step in range(30):
        rows = torch.randint(0, 64, (16,), generator=generator)
        for model, opt in ((ours, optimiser), (theirs, reference)):
            loss = (model(x[rows]) - y[rows]).abs().mean()
            opt.zero_grad()
            loss.backward()
        optimiser.step(rates[step])
        reference.step()
        schedule.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(next(ours.parameters()), next(_model(0).parameters()))  # it trained
    assert torch.equal(unused.weight, unused_before)
    assert all(p.grad is not None for p in ours.parameters())
    optimiser.zero_grad()
    assert all(p.grad is None for p in ours.parameters())


def test_training_does_not_import_torch_dynamo():
    code = (
        "import sys\n"
        "from tests.unit.forecast.test_fedformer import TINY, seasonal_with_trend\n"
        "from streamtrain.forecast.fedformer import FedformerForecaster\n"
        "FedformerForecaster(TINY).fit(seasonal_with_trend(4, seed=1))\n"
        "assert 'torch' in sys.modules\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "False"
