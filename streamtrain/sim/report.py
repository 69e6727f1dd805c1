"""Turning simulation results into KALE Table 3 text.

Owned here:

* :func:`format_table` / :func:`format_markdown`: one row per policy, in the order
  simulated, each cell the mean over seeds and, with more than one seed, ``± `` the
  95 % interval's half-width; units in the header;
* :func:`format_paper_table`: Table 3's metrics with the paper's cell beside ours
  (:data:`~streamtrain.sim.paper.TABLE3`; a row labelled ``kale-tuned`` or ``kale
  (...)`` sits beside the paper's ``kale``), and a mark (``*``) where the two differ by
  more than both intervals (not on the AUC: ours is a different model's, on the curve
  measured with real training, :mod:`streamtrain.sim.auc`);
* :func:`paper_claims`: Table 3's claims about KALE against the baselines, each
  ``reproduced`` / ``reversed`` / ``mixed`` / ``not distinguishable`` on our cells;
* :func:`headline_ratios`: the ratios that matter: how much less accumulated lag KALE
  has than HPA, and streamtrain against KALE and HPA (lag, worker-hours).

The JSON form is :meth:`~streamtrain.sim.runner.SimReport.as_json`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streamtrain.sim.metrics import PolicyMetrics
from streamtrain.sim.paper import TABLE3, TABLE3_METRICS
from streamtrain.sim.stats import Interval, differs

__all__ = [
    "COLUMNS",
    "Claim",
    "format_markdown",
    "format_paper_table",
    "format_table",
    "headline_ratios",
    "paper_claims",
    "paper_row",
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
    ("auc_pct", "AUC % (measured curve)", _two),
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


def paper_row(label: str) -> str:
    """The Table 3 row a label stands for: ``kale-tuned`` and ``kale (tuned)`` are
    ``kale``."""
    return label.split(" ")[0].split("-")[0]


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
        paper = TABLE3.get(paper_row(name))
        for key in TABLE3_METRICS:
            ours = values[key]
            fmt = _FORMAT[key]
            if paper is None:
                row += [_cell(ours, fmt), "-"]
                continue
            mean, half = paper[key]
            mark = " *" if key != "auc_pct" and differs(ours, mean, half) else ""
            row += [_cell(ours, fmt) + mark, _cell(Interval(mean, half or math.nan, 20), fmt)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _cut_pct(better: float, base: float) -> float:
    return 100.0 * (base - better) / base if base else math.nan


def headline_ratios(cells: Cells) -> dict[str, float]:
    """Reductions in percent (positive: the first policy has less) and ratios, for the
    policies present: ``kale_vs_hpa_lag_pct`` (Table 3: 69.2; ``kale_tuned_vs_hpa_lag_pct``
    for a ``kale-tuned`` row), ``streamtrain_vs_kale_*``
    and ``streamtrain_vs_hpa_*`` for lag and worker-hours, and
    ``streamtrain_wh_ratio`` (streamtrain's worker-hours over the lower of HPA's and
    KALE's)."""
    s = _as_summary(cells)
    out: dict[str, float] = {}

    def mean(policy: str, metric: str) -> float:
        return s[policy][metric].mean

    for kale in ("kale", "kale-tuned"):
        if {kale, "hpa"} <= s.keys():
            out[f"{kale.replace('-', '_')}_vs_hpa_lag_pct"] = _cut_pct(
                mean(kale, "accumulated_lag_min"), mean("hpa", "accumulated_lag_min")
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


@dataclass(frozen=True, slots=True)
class Claim:
    """One of KALE Table 3's claims about KALE against the baselines, checked on our
    cells: ``verdict`` is ``reproduced`` (KALE better than every baseline named, beyond
    both intervals), ``reversed`` (worse than at least one, better than none),
    ``mixed`` (better than some, worse than others), ``partly`` (better than some, not
    distinguishable from the rest) or ``not distinguishable`` (no difference beyond the
    intervals)."""

    key: str
    text: str
    verdict: str
    detail: str


# (key, claim, metric, lower is better, the baselines it is made against)
_CLAIMS: tuple[tuple[str, str, str, bool, tuple[str, ...]], ...] = (
    (
        "lag",
        "KALE's accumulated lag below HPA's (Table 3: 2,204 vs 7,151, 69 % below)",
        "accumulated_lag_min",
        True,
        ("hpa",),
    ),
    (
        "violations",
        "KALE violates the SLO less than HPA and Autopilot (2.60 % vs 19.57 %, 5.49 %)",
        "violation_rate",
        True,
        ("hpa", "autopilot"),
    ),
    (
        "worker_hours",
        "KALE holds the fewest worker-hours (242 vs HPA 268, Autopilot 303, Madu 455)",
        "worker_hours",
        True,
        ("hpa", "autopilot", "madu"),
    ),
    (
        "downtime",
        "KALE has the least downtime (109 min vs 163, 269, 190)",
        "downtime_min",
        True,
        ("hpa", "autopilot", "madu"),
    ),
    (
        "auc",
        "KALE has the highest AUC (95.8 % vs 95.1, 95.2, 95.3)",
        "auc_pct",
        False,
        ("hpa", "autopilot", "madu"),
    ),
)


def _compare(ours: Interval, theirs: Interval, lower_is_better: bool) -> int:
    """+1: ours better beyond both intervals, -1: worse, 0: not distinguishable."""
    half = 0.0 if math.isnan(theirs.half_width) else theirs.half_width
    if not differs(ours, theirs.mean, half):
        return 0
    better = ours.mean < theirs.mean if lower_is_better else ours.mean > theirs.mean
    return 1 if better else -1


def paper_claims(cells: Cells, kale: str = "kale") -> list[Claim]:
    """Table 3's claims about KALE (row ``kale``, e.g. ``kale-tuned``) on ``cells``;
    claims whose rows are missing are left out."""
    s = _as_summary(cells)
    out = []
    for key, text, metric, lower, others in _CLAIMS:
        if kale not in s or any(o not in s for o in others):
            continue
        fmt = _FORMAT.get(metric, _one)
        mine = s[kale][metric]
        signs = [_compare(mine, s[o][metric], lower) for o in others]
        better, worse = signs.count(1), signs.count(-1)
        if better == len(signs):
            verdict = "reproduced"
        elif worse and better:
            verdict = "mixed"
        elif worse:
            verdict = "reversed"
        elif better:
            verdict = "partly (not distinguishable from some)"
        else:
            verdict = "not distinguishable"
        detail = f"{kale} {_cell(mine, fmt)} vs " + ", ".join(
            f"{o} {_cell(s[o][metric], fmt)}" for o in others
        )
        out.append(Claim(key, text, verdict, detail))
    return out
