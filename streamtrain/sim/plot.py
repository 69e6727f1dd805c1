"""Plots of a simulation (KALE Fig. 10 and the lag over the day).

Owned here: :func:`plot_report`: two panels sharing the time axis: workers held per
policy (step lines) over the traffic (shaded, right axis), and each policy's job lag in
minutes with the SLO line (the lag axis stops at 6x the SLO so that one runaway
policy does not flatten the others; the title says when it did). matplotlib is
imported only here and only when called (it is an optional dependency); without it a
:class:`ConfigError` says how to get it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from streamtrain.plotting import pyplot
from streamtrain.sim.metrics import SLO_LAG_S
from streamtrain.sim.runner import SimReport
from streamtrain.units import HOUR_S, MINUTE_S

__all__ = ["plot_report"]


def plot_report(report: SimReport, path: str | Path, *, slo_lag_s: float = SLO_LAG_S) -> Path:
    """Write the two-panel figure to ``path`` (PNG, or any format matplotlib knows)."""
    plt = pyplot()
    path = Path(path)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    hours = np.arange(report.rates_records_per_s.size) * report.step_s / HOUR_S
    traffic = top.twinx()
    traffic.fill_between(hours, report.rates_records_per_s, color="0.85", step="post")
    traffic.set_ylabel("traffic (records/s)")
    top.set_zorder(traffic.get_zorder() + 1)
    top.patch.set_visible(False)
    for name, run in report.runs.items():
        t = np.arange(run.workers.size) * run.tick_s / HOUR_S
        top.step(t, run.workers, where="post", label=name, linewidth=1.2)
        bottom.plot(t, run.lag_s / MINUTE_S, label=name, linewidth=1.0)
    bottom.axhline(slo_lag_s / MINUTE_S, color="red", linestyle="--", linewidth=0.8, label="SLO")
    peak_min = max(float(run.lag_s.max()) for run in report.runs.values()) / MINUTE_S
    ceiling_min = 6 * slo_lag_s / MINUTE_S
    if peak_min > ceiling_min:
        bottom.set_ylim(0, ceiling_min)
        bottom.set_title(
            f"lag axis cut at {ceiling_min:.0f} min (peak {peak_min:.0f} min)", fontsize=9
        )
    top.set_ylabel("workers")
    top.set_ylim(0, report.max_workers + 1)
    top.legend(loc="upper left", ncol=3, fontsize=8)
    top.set_title(f"{report.trace_name}: workers per policy over the traffic")
    bottom.set_ylabel("job lag (min)")
    bottom.set_xlabel("hours into the simulated window")
    bottom.legend(loc="upper left", ncol=4, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
