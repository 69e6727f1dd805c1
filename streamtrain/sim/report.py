"""Turning simulation results into KALE Table 3 text.

Owned here:

* :func:`format_table` / :func:`format_markdown`: one row per policy, in the order
  simulated, each cell the mean over seeds and, with more than one seed, ``± `` the
  95 % interval's half-width; units in the header;
* :func:`format_paper_table`: Table 3's metrics with the paper's cell beside ours
  (:data:`~streamtrain.sim.paper.TABLE3`), and a mark (``*``) where the two differ by
  more than both intervals;
* :func:`headline_ratios`: the ratios that matter: how much less accumulated lag KALE
  has than HPA, and streamtrain against KALE and HPA (lag, worker-hours).

The JSON form is :meth:`~streamtrain.sim.runner.SimReport.as_json`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from streamtrain.sim.metrics import PolicyMetrics
from streamtrain.sim.paper import TABLE3, TABLE3_METRICS
from streamtrain.sim.stats import Interval, differs

__all__ = [
    "COLUMNS",
    "format_markdown",
    "format_paper_table",
    "format_table",
    "headline_ratios",
]

Summary = Mapping[str, Mapping[str, Interval]]
Cells = Mapping[str, PolicyMetrics] | Summary
Formatter = Callable[[float], str]


def _pct(x: float) -> str:
    return f"{x * 100:.2f}"


def _count(x: float) -> str:
    return f"{x:,.0f}"


def _one(x: float) -> str:
    return f"{x:,.1f}"


def _two(x: float) -> str:
    return f"{x:,.2f}"


def _pp(x: float) -> str:
    return f"{x:.2f}"


COLUMNS: tuple[tuple[str, str, Formatter], ...] = (
    ("violation_rate", "violation %", _pct),
    ("accumulated_lag_min", "acc. lag (min)", _count),
    ("downtime_min", "downtime (min)", _count),
    ("worker_hours", "worker-hours", _one),
    ("auc_pct", "AUC %", _two),
    ("scaling_actions", "actions", _one),
    ("peak_lag_min", "peak lag (min)", _one),
    ("forwarded_pct", "forwarded %", _one),
)
_FORMAT = {name: fmt for name, _, fmt in COLUMNS}
_FORMAT["violation_rate"] = _pct
_FORMAT["auc_pct"] = _pp


def _as_summary(cells: Cells) -> dict[str, dict[str, Interval]]:
    out: dict[str, dict[str, Interval]] = {}
    for name, value in cells.items():
        if isinstance(value, PolicyMetrics):
            out[name] = {k: Interval(float(v), math.nan, 1) for k, v in value.as_dict().items()}
        else:
            out[name] = dict(value)
    return out


def _cell(interval: Interval, fmt: Formatter) -> str:
    if math.isnan(interval.half_width):
        return fmt(interval.mean)
    return f"{fmt(interval.mean)} ± {fmt(interval.half_width)}"


def _rows(cells: Cells) -> tuple[list[str], list[list[str]]]:
    summary = _as_summary(cells)
    header = ["policy", *(title for _, title, _ in COLUMNS)]
    rows = [
        [name, *(_cell(values[key], fmt) for key, _, fmt in COLUMNS)]
        for name, values in summary.items()
    ]
    return header, rows


def format_table(cells: Cells) -> str:
    """A fixed-width table, numbers right-aligned."""
    header, rows = _rows(cells)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        first = row[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        lines.append("  ".join([first, *rest]))
    return "\n".join(lines)


def format_markdown(cells: Cells) -> str:
    header, rows = _rows(cells)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def format_paper_table(cells: Cells) -> str:
    """Markdown: per Table 3 metric, our cell and the paper's (``*``: they differ by
    more than both intervals); policies the paper has no row for get ``-``."""
    summary = _as_summary(cells)
    titles = {key: title for key, title, _ in COLUMNS}
    header = ["policy"]
    for key in TABLE3_METRICS:
        header += [f"{titles[key]} ours", "paper"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, values in summary.items():
        row = [name]
        paper = TABLE3.get(name)
        for key in TABLE3_METRICS:
            ours = values[key]
            fmt = _FORMAT[key]
            if paper is None:
                row += [_cell(ours, fmt), "-"]
                continue
            mean, half = paper[key]
            mark = " *" if differs(ours, mean, half) else ""
            row += [_cell(ours, fmt) + mark, _cell(Interval(mean, half or math.nan, 20), fmt)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _cut_pct(better: float, base: float) -> float:
    return 100.0 * (base - better) / base if base else math.nan


def headline_ratios(cells: Cells) -> dict[str, float]:
    """Reductions in percent (positive: the first policy has less) and ratios, for the
    policies present: ``kale_vs_hpa_lag_pct`` (Table 3: 69.2), ``streamtrain_vs_kale_*``
    and ``streamtrain_vs_hpa_*`` for lag and worker-hours, and
    ``streamtrain_wh_ratio`` (streamtrain's worker-hours over the lower of HPA's and
    KALE's)."""
    s = _as_summary(cells)
    out: dict[str, float] = {}

    def mean(policy: str, metric: str) -> float:
        return s[policy][metric].mean

    if {"kale", "hpa"} <= s.keys():
        out["kale_vs_hpa_lag_pct"] = _cut_pct(
            mean("kale", "accumulated_lag_min"), mean("hpa", "accumulated_lag_min")
        )
    for base in ("kale", "hpa"):
        if {"streamtrain", base} <= s.keys():
            out[f"streamtrain_vs_{base}_lag_pct"] = _cut_pct(
                mean("streamtrain", "accumulated_lag_min"), mean(base, "accumulated_lag_min")
            )
            out[f"streamtrain_vs_{base}_wh_pct"] = _cut_pct(
                mean("streamtrain", "worker_hours"), mean(base, "worker_hours")
            )
    if {"streamtrain", "kale", "hpa"} <= s.keys():
        lower = min(mean("kale", "worker_hours"), mean("hpa", "worker_hours"))
        out["streamtrain_wh_ratio"] = mean("streamtrain", "worker_hours") / lower
    return out
