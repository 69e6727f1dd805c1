"""The FEDformer-style network (torch ``nn.Module`` s), after Zhou et al., ICML 2022.

Owned here, written for this project from the paper's description:

* :class:`SeriesDecomp`: moving-average trend and the seasonal remainder (edges are
  padded by repeating the first and last value, so the trend keeps the series length).
* :class:`FourierBlock`: frequency-enhanced self-attention: FFT along time, keep a fixed
  set of modes, multiply each kept mode by a learned complex ``E x E`` matrix per head,
  inverse FFT. :class:`FourierCrossAttention`: the same idea between decoder queries
  and encoder keys (attention weights ``tanh(Q Kᵀ)`` computed on the kept modes).
* :class:`FedformerNet`: embedding (value convolution + time-feature projection, no
  positional encoding), an encoder of [attention, decompose, feed-forward, decompose]
  layers that keeps the seasonal part, and a decoder that also accumulates the trend
  parts the decompositions remove; its input is the seasonal part of the last
  ``label_len`` steps followed by zeros, and its trend starts from the trend of the same
  steps followed by the input mean (FEDformer) or by zeros (``trend_from_mean=False``,
  for inputs normalised so that 0 is the current level).

Univariate: one value channel in and out (KALE's "input size 1"). The attention factor
``c`` sets the number of kept modes to ``min(len // 2, c · ⌈ln len⌉)`` (Informer's
sparsity factor, applied to FEDformer's mode selection); KALE uses ``c = 3``. The
shapes come from :class:`~streamtrain.forecast.fedformer_settings.NetConfig`.
This module imports torch at import time: import it lazily.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from streamtrain.errors import ConfigError
from streamtrain.forecast.fedformer_settings import NetConfig

__all__ = [
    "FedformerNet",
    "FourierBlock",
    "FourierCrossAttention",
    "SeriesDecomp",
    "select_modes",
]


def _dropout(p: float) -> nn.Module:
    # nn.Dropout(0) still draws a mask on every call, which costs as much as the block.
    return nn.Dropout(p) if p > 0 else nn.Identity()


def select_modes(length: int, factor: int) -> list[int]:
    """The kept Fourier modes of a ``length``-step input: the lowest ``c·⌈ln L⌉`` (a
    contiguous range from 0, so the blocks slice and pad the spectrum instead of
    indexing it: the same values at a fraction of the cost of a training step)."""
    count = min(length // 2, factor * max(1, math.ceil(math.log(max(length, 2)))))
    return list(range(max(1, count)))


class MovingAvg(nn.Module):
    def __init__(self, kernel: int) -> None:
        super().__init__()
        self.kernel = kernel
        self.pool = nn.AvgPool1d(kernel_size=kernel, stride=1, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = (self.kernel - 1) // 2
        right = self.kernel - 1 - left
        front = x[:, :1, :].expand(-1, left, -1)
        end = x[:, -1:, :].expand(-1, right, -1)
        padded = torch.cat([front, x, end], dim=1)
        out: torch.Tensor = self.pool(padded.permute(0, 2, 1)).permute(0, 2, 1)
        return out


class SeriesDecomp(nn.Module):
    """``x -> (seasonal, trend)`` with a moving-average trend."""

    def __init__(self, kernel: int) -> None:
        super().__init__()
        self.avg = MovingAvg(kernel)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        trend = self.avg(x)
        return x - trend, trend


def _complex_weights(heads: int, width: int, modes: int) -> tuple[nn.Parameter, nn.Parameter]:
    scale = 1.0 / (width * width)
    real = nn.Parameter(scale * torch.rand(heads, width, width, modes))
    imag = nn.Parameter(scale * torch.rand(heads, width, width, modes))
    return real, imag


class FourierBlock(nn.Module):
    """Frequency-enhanced self-attention on ``(B, L, H, E)`` queries (keys are unused)."""

    def __init__(self, heads: int, width: int, length: int, factor: int) -> None:
        super().__init__()
        self.length = length
        modes = select_modes(length, factor)
        self.modes: torch.Tensor
        self.register_buffer("modes", torch.tensor(modes))
        self.w_real, self.w_imag = _complex_weights(heads, width, len(modes))

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        length = q.shape[1]
        x = q.permute(0, 2, 3, 1)  # B, H, E, L
        spectrum = torch.fft.rfft(x, dim=-1)
        kept = self.modes.shape[0]
        picked = spectrum[..., :kept]  # B, H, E, M: the modes 0 .. M-1
        weights = torch.complex(self.w_real, self.w_imag)
        mixed = torch.einsum("bhim,hiom->bhom", picked, weights)
        out = F.pad(mixed, (0, length // 2 + 1 - kept))  # the other modes are zero
        result: torch.Tensor = torch.fft.irfft(out, n=length, dim=-1)
        return result.permute(0, 3, 1, 2)  # B, L, H, E


class FourierCrossAttention(nn.Module):
    """Frequency-enhanced cross-attention: decoder queries against encoder keys."""

    def __init__(self, heads: int, width: int, q_len: int, kv_len: int, factor: int) -> None:
        super().__init__()
        self.q_len = q_len
        self.width = width
        q_modes = select_modes(q_len, factor)
        self.q_modes: torch.Tensor
        self.kv_modes: torch.Tensor
        self.register_buffer("q_modes", torch.tensor(q_modes))
        self.register_buffer("kv_modes", torch.tensor(select_modes(kv_len, factor)))
        self.w_real, self.w_imag = _complex_weights(heads, width, len(q_modes))

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        width = q.shape[-1]
        q_kept, kv_kept = self.q_modes.shape[0], self.kv_modes.shape[0]
        q_ft = torch.fft.rfft(q.permute(0, 2, 3, 1), dim=-1)[..., :q_kept]
        k_ft = torch.fft.rfft(k.permute(0, 2, 3, 1), dim=-1)[..., :kv_kept]
        scores = torch.einsum("bhex,bhey->bhxy", q_ft, k_ft).tanh()
        attended = torch.einsum("bhxy,bhey->bhex", scores, k_ft)
        weights = torch.complex(self.w_real, self.w_imag)
        mixed = torch.einsum("bhex,heox->bhox", attended, weights)
        out = F.pad(mixed, (0, self.q_len // 2 + 1 - q_kept))
        result: torch.Tensor = torch.fft.irfft(out / (width * width), n=self.q_len, dim=-1)
        return result.permute(0, 3, 1, 2)


class _Attention(nn.Module):
    """Project to heads, apply a Fourier block, project back."""

    def __init__(self, inner: nn.Module, d_model: int, heads: int) -> None:
        super().__init__()
        self.inner = inner
        self.heads = heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        batch, length, d_model = x.shape
        q = self.query(x).view(batch, length, self.heads, -1)
        if memory is None:
            attended = self.inner(q)
        else:
            k = self.key(memory).view(batch, memory.shape[1], self.heads, -1)
            attended = self.inner(q, k)
        result: torch.Tensor = self.out(attended.reshape(batch, length, d_model))
        return result


class _FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff, bias=False),
            nn.GELU(),
            _dropout(dropout),
            nn.Linear(d_ff, d_model, bias=False),
            _dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out


class _SeasonalNorm(nn.Module):
    """Layer norm with the time mean removed (the seasonal part has no level)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed: torch.Tensor = self.norm(x)
        return normed - normed.mean(dim=1, keepdim=True)


class _EncoderLayer(nn.Module):
    def __init__(self, cfg: NetConfig) -> None:
        super().__init__()
        width = cfg.d_model // cfg.n_heads
        block = FourierBlock(cfg.n_heads, width, cfg.seq_len, cfg.factor)
        self.attention = _Attention(block, cfg.d_model, cfg.n_heads)
        self.ff = _FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.decomp1 = SeriesDecomp(cfg.moving_avg)
        self.decomp2 = SeriesDecomp(cfg.moving_avg)
        self.dropout = _dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, _ = self.decomp1(x + self.dropout(self.attention(x)))
        x, _ = self.decomp2(x + self.ff(x))
        return x


class _DecoderLayer(nn.Module):
    def __init__(self, cfg: NetConfig) -> None:
        super().__init__()
        width = cfg.d_model // cfg.n_heads
        dec_len = cfg.label_len + cfg.pred_len
        self_block = FourierBlock(cfg.n_heads, width, dec_len, cfg.factor)
        cross = FourierCrossAttention(cfg.n_heads, width, dec_len, cfg.seq_len, cfg.factor)
        self.self_attention = _Attention(self_block, cfg.d_model, cfg.n_heads)
        self.cross_attention = _Attention(cross, cfg.d_model, cfg.n_heads)
        self.ff = _FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.decomps = nn.ModuleList(SeriesDecomp(cfg.moving_avg) for _ in range(3))
        self.dropout = _dropout(cfg.dropout)
        self.trend_projection = nn.Conv1d(
            cfg.d_model, 1, kernel_size=3, padding=1, padding_mode="circular", bias=False
        )

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, trend1 = self.decomps[0](x + self.dropout(self.self_attention(x)))
        x, trend2 = self.decomps[1](x + self.dropout(self.cross_attention(x, memory)))
        x, trend3 = self.decomps[2](x + self.ff(x))
        trend = (trend1 + trend2 + trend3).permute(0, 2, 1)
        return x, self.trend_projection(trend).permute(0, 2, 1)


class _Embedding(nn.Module):
    """Value convolution (1 channel) plus a linear time-feature projection."""

    def __init__(self, mark_dim: int, d_model: int, dropout: float) -> None:
        super().__init__()
        self.value = nn.Conv1d(
            1, d_model, kernel_size=3, padding=1, padding_mode="circular", bias=False
        )
        self.time = nn.Linear(mark_dim, d_model, bias=False)
        self.dropout = _dropout(dropout)

    def forward(self, x: torch.Tensor, marks: torch.Tensor) -> torch.Tensor:
        value = self.value(x.permute(0, 2, 1)).permute(0, 2, 1)
        out: torch.Tensor = self.dropout(value + self.time(marks))
        return out


class FedformerNet(nn.Module):
    """Encoder-decoder over ``(B, seq_len, 1)`` inputs; returns ``(B, pred_len, 1)``."""

    def __init__(self, cfg: NetConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise ConfigError(
                f"d_model ({cfg.d_model}) must be a multiple of n_heads ({cfg.n_heads})"
            )
        self.cfg = cfg
        self.decomp = SeriesDecomp(cfg.moving_avg)
        self.enc_embedding = _Embedding(cfg.mark_dim, cfg.d_model, cfg.dropout)
        self.dec_embedding = _Embedding(cfg.mark_dim, cfg.d_model, cfg.dropout)
        self.encoder = nn.ModuleList(_EncoderLayer(cfg) for _ in range(cfg.e_layers))
        self.decoder = nn.ModuleList(_DecoderLayer(cfg) for _ in range(cfg.d_layers))
        self.enc_norm = _SeasonalNorm(cfg.d_model)
        self.dec_norm = _SeasonalNorm(cfg.d_model)
        self.projection = nn.Linear(cfg.d_model, 1)

    def forward(
        self, x: torch.Tensor, enc_marks: torch.Tensor, dec_marks: torch.Tensor
    ) -> torch.Tensor:
        cfg = self.cfg
        zeros = torch.zeros(x.shape[0], cfg.pred_len, 1, dtype=x.dtype)
        mean = (
            x.mean(dim=1, keepdim=True).expand(-1, cfg.pred_len, -1)
            if cfg.trend_from_mean
            else zeros
        )
        seasonal, trend = self.decomp(x)
        trend = torch.cat([trend[:, -cfg.label_len :, :], mean], dim=1)
        seasonal = torch.cat([seasonal[:, -cfg.label_len :, :], zeros], dim=1)
        memory = self.enc_embedding(x, enc_marks)
        for layer in self.encoder:
            memory = layer(memory)
        memory = self.enc_norm(memory)
        out = self.dec_embedding(seasonal, dec_marks)
        for layer in self.decoder:
            out, residual_trend = layer(out, memory)
            trend = trend + residual_trend
        result: torch.Tensor = trend + self.projection(self.dec_norm(out))
        return result[:, -cfg.pred_len :, :]
