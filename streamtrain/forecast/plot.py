"""The plot of ``forecast eval --plot``: actual vs forecast, with the quantile band.

Owned here: :func:`plot_eval`: one panel per model over the test period (the actual
series, and the forecast of each origin with its band between the two quantiles of the
:class:`~streamtrain.forecast.evaluate.Trail`), titled with the model's MASE; time in
days from the start of the test period. matplotlib is imported only here and only when
called (an optional dependency); without it a :class:`ConfigError` says how to get it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.forecast.evaluate import Scores
from streamtrain.plotting import pyplot
from streamtrain.units import DAY_S

__all__ = ["plot_eval"]


def plot_eval(
    values: NDArray[np.float64],
    results: Mapping[str, Scores],
    step_s: int,
    path: str | Path,
    *,
    title: str = "",
) -> Path:
    """Write the figure to ``path`` (PNG, or any format matplotlib knows)."""
    trails = {name: s.trail for name, s in results.items() if s.trail is not None}
    if not trails:
        raise ConfigError("nothing to plot: the evaluation kept no forecasts")
    plt = pyplot()
    first = min(int(t.origins[0]) for t in trails.values())
    horizon_steps = max(t.point.shape[1] for t in trails.values())
    last = max(int(t.origins[-1]) for t in trails.values()) + horizon_steps
    days = (np.arange(first, last) - first) * step_s / DAY_S
    fig, axes = plt.subplots(
        len(trails), 1, figsize=(13, 2.6 * len(trails)), sharex=True, squeeze=False
    )
    for ax, (name, trail) in zip(axes[:, 0], trails.items(), strict=True):
        ax.plot(days, values[first:last], color="#1f6feb", linewidth=0.7, label="actual")
        lo_q, hi_q = trail.levels
        for k, origin in enumerate(trail.origins):
            x = (origin + np.arange(trail.point.shape[1]) - first) * step_s / DAY_S
            ax.fill_between(x, trail.low[k], trail.high[k], color="#e36209", alpha=0.18, lw=0)
            ax.plot(x, trail.point[k], color="#e36209", linewidth=0.8)
        ax.plot([], [], color="#e36209", label=f"forecast, {lo_q:.0%}-{hi_q:.0%} band")
        ax.set_title(f"{name}: MASE {results[name].mase:.3f}", fontsize=10, loc="left")
        ax.set_ylabel("records/s")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("days into the test period")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
