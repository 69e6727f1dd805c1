"""Settings of the FEDformer-style forecaster (pure; no torch): one home for each field.

Owned here:

* :class:`NetConfig`: the network's shape (lengths in coarse blocks: the input window
  ``seq_len``, the decoder's ``label_len`` overlap, the forecast ``pred_len``; widths,
  layers, the moving-average kernel, dropout, the attention factor ``c`` of
  :func:`~streamtrain.forecast.fedformer_model.select_modes`, and whether the decoder's
  trend starts from the input mean, as in FEDformer, or from zero). Its defaults are
  the forecaster's, the values that reached the network before these fields lived
  here: no dropout, and a trend from zero (windows are anchored so that 0 is the
  current level: an untrained network forecasts persistence). ``mark_dim`` is the
  number of time features, fixed by :func:`~streamtrain.forecast.fedformer_data.time_marks`.
* :class:`FedformerSettings`: data preparation and training, and the :class:`NetConfig`
  it trains (``net``). :meth:`~FedformerSettings.from_options` builds it from flat
  names (``seq_len=36, train_steps=20``: the registry's ``**options``, and the
  ``settings`` a saved model stores), :meth:`~FedformerSettings.options` gives them
  back, so models saved before the network's fields moved here still load (and those
saved with ``smooth_steps``, one-minute steps, before the window was ``smooth_s``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from streamtrain.errors import ConfigError
from streamtrain.forecast.fedformer_data import MARK_DIM
from streamtrain.units import MINUTE_S

__all__ = ["FedformerSettings", "NetConfig"]


@dataclass(frozen=True, slots=True)
class NetConfig:
    """Shapes of the network; lengths are in (coarse) model steps."""

    seq_len: int = 48
    label_len: int = 12
    pred_len: int = 6
    mark_dim: int = MARK_DIM
    d_model: int = 32
    n_heads: int = 4
    e_layers: int = 2
    d_layers: int = 1
    d_ff: int = 64
    moving_avg: int = 13
    dropout: float = 0.0
    factor: int = 3  # the attention factor c: kept Fourier modes
    trend_from_mean: bool = False


@dataclass(frozen=True, slots=True)
class FedformerSettings:
    """Data preparation and training settings, and the network; block lengths are in
    ``coarse_s`` blocks."""

    net: NetConfig = field(default_factory=NetConfig)
    # 30-minute blocks beat 5, 10, 15 and 60 minutes on MASE at a 30-minute horizon over
    # five series, and train 2-3x faster than 10 minutes: a mean over 30 minutes is a less
    # noisy level than one over 10
    coarse_s: int = 1800
    smooth_s: int = 1860  # the baseline's moving average, in seconds (31 one-minute steps)
    baseline_periods: int = 3
    baseline_median: bool = False
    weigh_by_level: bool = True
    # 400 steps at 3e-3 forecast as well as 1,200 at 1e-3 (600 at 1e-3 did not), in a
    # third of the time (docs/benchmarks.md, "Forecasters")
    train_steps: int = 400
    # a fit that starts from an earlier fit's weights (fit_from: auto's later validation
    # folds and refits): fewer steps at a lower rate
    finetune_steps: int = 50
    finetune_learning_rate: float = 3.3e-4
    batch_size: int = 32
    learning_rate: float = 3e-3
    val_fraction: float = 0.15
    val_every: int = 100
    # two OpenMP threads that wait for a busy core made training 17x slower on a shared
    # machine; one thread loses about a third at best
    threads: int = 1
    anchor_blocks: int = 1
    # MSTL's share of the forecast (0: the transformer alone): fixed, or the prior of the
    # share that the errors since the fit set (adapt_weight); see docs/benchmarks.md
    mstl_weight: float = 0.5
    adapt_weight: bool = True

    def __post_init__(self) -> None:
        net = self.net
        if self.coarse_s <= 0 or net.seq_len < 8 or net.pred_len < 1:
            raise ConfigError("coarse_s, seq_len (>= 8) and pred_len must be positive")
        if not 0 < net.label_len <= net.seq_len:
            raise ConfigError("label_len must be in (0, seq_len]")
        if net.mark_dim != MARK_DIM:
            raise ConfigError(f"the forecaster's inputs have {MARK_DIM} time features")
        if self.train_steps < 1 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ConfigError("train_steps, batch_size and learning_rate must be positive")
        if self.finetune_steps < 0 or self.finetune_learning_rate <= 0:
            raise ConfigError("finetune_steps cannot be negative nor its learning rate zero")
        if not 0 < self.val_fraction < 0.5:
            raise ConfigError("val_fraction must be in (0, 0.5)")
        if self.threads < 1:
            raise ConfigError("threads must be at least 1")
        if not 0.0 <= self.mstl_weight < 1.0:
            raise ConfigError("mstl_weight must be in [0, 1): the transformer keeps a share")

    @classmethod
    def from_options(cls, **options: Any) -> FedformerSettings:
        """Settings from flat names: this class's fields and :class:`NetConfig`'s (all
        but ``mark_dim``); anything else is a :class:`ConfigError`."""
        options = dict(options)
        if "smooth_steps" in options:  # saved before the window was in seconds (1-min steps)
            options.setdefault("smooth_s", MINUTE_S * int(options.pop("smooth_steps")))
        unknown = sorted(set(options) - _NET_OPTIONS - _OWN_OPTIONS)
        if unknown:
            raise ConfigError(
                f"fedformer: unknown option(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(_NET_OPTIONS | _OWN_OPTIONS))}"
            )
        net = NetConfig(**{k: v for k, v in options.items() if k in _NET_OPTIONS})
        return cls(net, **{k: v for k, v in options.items() if k in _OWN_OPTIONS})

    def options(self) -> dict[str, Any]:
        """The flat names :meth:`from_options` takes (what a saved model stores)."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "net"}
        net = {k: v for k, v in asdict(self.net).items() if k in _NET_OPTIONS}
        return net | own


_NET_OPTIONS = frozenset(f.name for f in fields(NetConfig)) - {"mark_dim"}
_OWN_OPTIONS = frozenset(f.name for f in fields(FedformerSettings)) - {"net"}
