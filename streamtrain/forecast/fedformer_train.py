"""Training and inference of the FEDformer-style network: the only torch code besides
the network itself, importing torch only inside its functions.

Owned here:

* :func:`train_network`: cut windows of block residuals, normalise each window
  RevIN-style but anchored (minus the mean of its input's last ``anchor_blocks``
  blocks, or of the whole input when ``anchor_blocks`` is 0, over the input's standard
  deviation, floored at 0.01), train with Adam on the L1 loss (MASE is an absolute
  error), weighted by the baseline's level when given, with a cosine learning-rate
  schedule for a fixed number of seeded mini-batch steps, keep the weights with the
  lowest validation error (the last ``val_fraction`` of the windows), and return the
  validation errors' quantiles per horizon block on :data:`QUANTILE_GRID`;
* :func:`run_network`: one forward pass for one input window (or a batch of them),
  normalised the same way;
* :func:`build_network`: the network for a
  :class:`~streamtrain.forecast.fedformer_settings.NetConfig`.

``torch.set_num_threads`` is set to the settings' ``threads`` for the call and restored.

The optimiser is torch's Adam and cosine learning-rate schedule written out
(:class:`Adam`, :func:`cosine_rates`): the same arithmetic, op for op, so a network
trains to the same bits (a unit test compares them with ``torch.optim``), without
``torch.optim``'s first call, which imports ``torch._dynamo`` (2-3 s in every process
that trains: ``auto``'s worker process and its refit).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.forecast.base import QUANTILE_GRID
from streamtrain.forecast.fedformer_settings import FedformerSettings, NetConfig

if TYPE_CHECKING:
    from streamtrain.forecast.fedformer_model import FedformerNet

__all__ = [
    "QUANTILE_GRID",
    "Adam",
    "build_network",
    "cosine_rates",
    "run_network",
    "train_network",
]

FloatArray = NDArray[np.float64]
_MIN_STD = 0.01  # log-scale units: about 1 % of the rate


def build_network(net: NetConfig) -> FedformerNet:
    from streamtrain.forecast.fedformer_model import FedformerNet

    return FedformerNet(net)


@contextlib.contextmanager
def _threads(count: int) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def cosine_rates(base: float, steps: int) -> list[float]:
    """The learning rate of each of ``steps`` steps: a cosine from ``base`` towards 0 over
    ``steps`` steps, computed as ``torch.optim.lr_scheduler.CosineAnnealingLR`` (``T_max
    = max(1, steps)``, ``eta_min = 0``) computes it, each rate from the one before (its
    closed form differs in the last bits)."""
    t_max = max(1, steps)
    rates = [base][:steps]
    for k in range(1, steps):
        ratio = (1 + math.cos(math.pi * k / t_max)) / (1 + math.cos(math.pi * (k - 1) / t_max))
        rates.append(ratio * rates[-1])
    return rates


class Adam:
    """``torch.optim.Adam`` with its defaults (betas 0.9 and 0.999, eps 1e-8, no weight
    decay, no amsgrad) on CPU tensors: its single-tensor update, op for op, so the
    parameters end the same to the bit; parameters without a gradient are skipped and
    keep no state, as there. ``zero_grad`` sets the gradients to ``None``, as there.

    Each op is applied to every parameter by one ``torch._foreach_*`` call (on CPU a
    loop over the same per-tensor kernels, so the same bits) instead of one Python call
    per parameter and op: the network's fifty-odd parameters made the update a
    twentieth of a training step."""

    def __init__(
        self, params: Iterable[Any], betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.params = list(params)
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.state: dict[int, tuple[Any, Any, list[float]]] = {}  # moments and step count

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    def step(self, lr: float) -> None:
        import torch

        beta1, beta2 = self.beta1, self.beta2
        params, grads, avgs, squares, sizes, corrections = [], [], [], [], [], []
        for index, param in enumerate(self.params):
            grad = param.grad
            if grad is None:
                continue
            if index not in self.state:
                zeros = torch.zeros_like(param, memory_format=torch.preserve_format)
                self.state[index] = (zeros, zeros.clone(), [0.0])
            exp_avg, exp_avg_sq, count = self.state[index]
            count[0] += 1.0
            params.append(param)
            grads.append(grad)
            avgs.append(exp_avg)
            squares.append(exp_avg_sq)
            sizes.append(-lr / (1 - beta1 ** count[0]))
            corrections.append((1 - beta2 ** count[0]) ** 0.5)
        if not params:
            return
        with torch.no_grad():
            torch._foreach_lerp_(avgs, grads, 1 - beta1)
            torch._foreach_mul_(squares, beta2)
            torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
            denoms = torch._foreach_sqrt(squares)
            torch._foreach_div_(denoms, corrections)
            torch._foreach_add_(denoms, self.eps)
            torch._foreach_addcdiv_(params, avgs, denoms, sizes)


def _normalise(x: FloatArray, anchor: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    mean = (
        x[..., -anchor:].mean(axis=-1, keepdims=True) if anchor else x.mean(axis=-1, keepdims=True)
    )
    std = np.maximum(x.std(axis=-1, keepdims=True), _MIN_STD)
    return (x - mean) / std, mean, std


def _tensor(values: FloatArray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))


def train_network(
    blocks: FloatArray,
    seen: FloatArray,
    level: FloatArray | None,
    marks: FloatArray,
    starts: NDArray[np.int64],
    s: FedformerSettings,
    seed: int,
    init: dict[str, Any] | None = None,
) -> tuple[FedformerNet, FloatArray, float]:
    """Train on windows starting at ``starts``; returns (net, error quantiles, val MAE).

    With ``init`` (a fitted network's weights), fine-tune: start from them and train
    ``finetune_steps`` steps at ``finetune_learning_rate``; the starting weights count
    as a candidate for the best, so a fine-tune never ends worse on the validation
    windows than the weights it started from (0 steps: those weights, with error
    quantiles from this history's validation windows)."""
    import torch

    seq, pred, label = s.net.seq_len, s.net.pred_len, s.net.label_len
    idx_in = starts[:, None] + np.arange(seq)
    idx_out = starts[:, None] + seq + np.arange(pred)
    x_norm, mean, std = _normalise(blocks[idx_in], s.anchor_blocks)
    target = blocks[idx_out]
    weight = (seen[idx_out] >= 0.5).astype(np.float64)
    if level is not None:
        weight = weight * level[idx_out]
    enc_marks = marks[idx_in]
    dec_marks = marks[np.concatenate([idx_in[:, -label:], idx_out], axis=1)]
    count = starts.shape[0]
    n_val = max(1, int(count * s.val_fraction))
    train_idx = np.arange(max(1, count - n_val - (seq + pred) // 2))
    val_idx = np.arange(count - n_val, count)

    tensors = [_tensor(a) for a in (x_norm, mean, std, target, weight, enc_marks, dec_marks)]
    tx, tmean, tstd, ty, tw, tenc, tdec = tensors

    def forward(rows: Any) -> Any:
        out = net(tx[rows].unsqueeze(-1), tenc[rows], tdec[rows])[..., 0]
        return out * tstd[rows] + tmean[rows]

    rng = np.random.default_rng(seed)
    steps = s.train_steps if init is None else s.finetune_steps
    rate = s.learning_rate if init is None else s.finetune_learning_rate
    with _threads(s.threads):
        torch.manual_seed(seed)
        net = build_network(s.net)
        # (validation MAE, weights, their validation forecasts: the error quantiles')
        best: tuple[float, dict[str, Any], Any] = (
            float("inf"),
            {k: v.clone() for k, v in net.state_dict().items()},
            None,
        )
        val_rows = torch.from_numpy(val_idx)
        if init is not None:
            net.load_state_dict(init)
            net.eval()
            with torch.no_grad():
                out = forward(val_rows)
                err = ((out - ty[val_rows]).abs() * tw[val_rows]).sum()
                best = (float(err / tw[val_rows].sum().clamp(min=1.0)), dict(init), out)
        optimiser = Adam(net.parameters())
        rates = cosine_rates(rate, steps)
        net.train()  # once, and again after each validation pass: a call walks every module
        for step in range(1, steps + 1):
            rows = torch.from_numpy(rng.choice(train_idx, size=s.batch_size))
            loss = ((forward(rows) - ty[rows]).abs() * tw[rows]).sum() / tw[rows].sum().clamp(
                min=1.0
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step(rates[step - 1])
            if step % s.val_every == 0 or step == steps:
                net.eval()
                with torch.no_grad():
                    out = forward(val_rows)
                    err = ((out - ty[val_rows]).abs() * tw[val_rows]).sum()
                    val_mae = float(err / tw[val_rows].sum().clamp(min=1.0))
                if val_mae < best[0]:
                    best = (val_mae, {k: v.clone() for k, v in net.state_dict().items()}, out)
                net.train()
        net.load_state_dict(best[1])
        net.eval()
        with torch.no_grad():  # the kept weights' validation pass, or one now
            out = best[2] if best[2] is not None else forward(val_rows)
            errors = (ty[val_rows] - out).numpy().astype(np.float64)
    valid = weight[val_idx] > 0
    quantiles = np.stack(
        [
            np.quantile(col[ok], QUANTILE_GRID) if ok.any() else np.zeros(QUANTILE_GRID.size)
            for col, ok in zip(errors.T, valid.T, strict=True)
        ],
        axis=1,
    )
    return net, quantiles, best[0]


def run_network(
    net: FedformerNet,
    blocks: FloatArray,
    enc_marks: FloatArray,
    dec_marks: FloatArray,
    threads: int,
    anchor: int,
) -> FloatArray:
    """The network's forecast (``pred_len`` blocks) for one window of ``blocks``, or
    ``(windows, pred_len)`` for a batch of them (``blocks`` of two dimensions, the marks
    of three: the forecasts of a validation fold's origins in one pass)."""
    import torch

    single = blocks.ndim == 1
    if single:
        blocks, enc_marks, dec_marks = blocks[None, :], enc_marks[None], dec_marks[None]
    x_norm, mean, std = _normalise(blocks, anchor)
    with _threads(threads), torch.no_grad():
        out = net(_tensor(x_norm).unsqueeze(-1), _tensor(enc_marks), _tensor(dec_marks))[..., 0]
    result: FloatArray = out.numpy().astype(np.float64) * std + mean
    return result[0] if single else result
