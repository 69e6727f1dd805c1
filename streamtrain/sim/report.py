"""Turning a :class:`~streamtrain.sim.runner.SimReport` into KALE Table 3 text.

Owned here: :func:`format_table` (one row per policy, in the order simulated, with
units in the header) and :func:`format_markdown` (the same as a Markdown table, for
docs/benchmarks.md). The JSON form is :meth:`SimReport.as_json`.
"""

from __future__ import annotations

from collections.abc import Callable

from streamtrain.sim.metrics import PolicyMetrics

__all__ = ["COLUMNS", "format_markdown", "format_table"]

Formatter = Callable[[PolicyMetrics], str]


def _pct(m: PolicyMetrics) -> str:
    return f"{m.violation_rate * 100:.2f}"


def _lag(m: PolicyMetrics) -> str:
    return f"{m.accumulated_lag_min:,.0f}"


def _down(m: PolicyMetrics) -> str:
    return f"{m.downtime_min:,.0f}"


def _hours(m: PolicyMetrics) -> str:
    return f"{m.worker_hours:,.1f}"


def _actions(m: PolicyMetrics) -> str:
    return f"{m.scaling_actions:d}"


def _peak(m: PolicyMetrics) -> str:
    return f"{m.peak_lag_min:,.1f}"


COLUMNS: tuple[tuple[str, Formatter], ...] = (
    ("violation %", _pct),
    ("acc. lag (min)", _lag),
    ("downtime (min)", _down),
    ("worker-hours", _hours),
    ("actions", _actions),
    ("peak lag (min)", _peak),
)


def _cells(metrics: dict[str, PolicyMetrics]) -> list[list[str]]:
    return [[name, *(fmt(m) for _, fmt in COLUMNS)] for name, m in metrics.items()]


def format_table(metrics: dict[str, PolicyMetrics]) -> str:
    """A fixed-width table, numbers right-aligned."""
    header = ["policy", *(title for title, _ in COLUMNS)]
    rows = _cells(metrics)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        first = row[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        lines.append("  ".join([first, *rest]))
    return "\n".join(lines)


def format_markdown(metrics: dict[str, PolicyMetrics]) -> str:
    header = ["policy", *(title for title, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in _cells(metrics)]
    return "\n".join(lines)
