"""What the demo's lag cost in model quality: ``auc_lost_to_lag``, against a measured curve.

Owned here:

* :func:`auc_lost_to_lag` (pure): from the timeline's lag reports and an AUC-against-lag
  curve, the mean click AUC the run lost to its lag (KALE Fig. 1), weighted by time: each
  report's lag (wall seconds, converted to simulated minutes at the demo's speed) is
  looked up on the curve (:func:`~streamtrain.ingest.staleness.lost_auc`). Two
  lags per report: the mean over partitions (how late a typical partition's records
  were trained: the headline number) and the job lag (the largest partition lag: an
  upper bound, as if every record had waited as long as the worst partition's).
* :class:`LagCostCurve`: a thread that measures the curve for *this* run (the hidden
  model's drift per day and the mean records per simulated minute of the run's traffic)
  with :func:`~streamtrain.ingest.staleness.measure_staleness`, real MMoE training
  on one torch thread (a few CPU seconds), started before the demo's children so it
  is normally done when the day begins. Until it is done the loss is ``None``.

The curve is one model trained on all the traffic, as ``python -m benchmarks.staleness``
measures it: what the demo's workers train with ``--engine torchft`` (one model,
data-parallel, on the whole stream), so the loss is what the run's lag cost that model.
With ``--engine none`` each worker trains its own copy on its share, and the curve is
only an estimate for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamtrain.errors import StreamtrainError
from streamtrain.ingest.staleness import StalenessConfig, lost_auc, measure_staleness
from streamtrain.units import DAY_S, MINUTE_S

__all__ = ["LagCostCurve", "auc_lost_to_lag"]

log = logging.getLogger(__name__)

CURVE_LAGS_MIN = (0, 5, 10, 20, 40, 60, 90)


def auc_lost_to_lag(
    reports: Sequence[dict[str, Any]],
    curve: dict[int, float],
    *,
    started_at_s: float,
    ended_at_s: float,
    speed: float,
) -> dict[str, float | None]:
    """``{"mean_partition_lag": loss, "job_lag": loss, "mean_lag_min": …}`` over the
    reports between ``started_at_s`` and ``ended_at_s``; losses are AUC points (0.01 is
    one point of AUC %); ``None`` without two reports."""
    inside = [r for r in reports if started_at_s <= r["at_s"] <= ended_at_s]
    if len(inside) < 2:
        return {"mean_partition_lag": None, "job_lag": None, "mean_lag_min": None}
    times = np.array([r["at_s"] for r in inside], dtype=np.float64)
    weights = np.diff(times)  # each report stands for the interval it ends
    to_min = speed / MINUTE_S
    mean_lag = np.array(
        [np.mean([x or 0.0 for x in r.get("partition_lag_s") or [0.0]]) for r in inside[1:]]
    )
    job_lag = np.array([float(r.get("max_lag_s") or 0.0) for r in inside[1:]])
    if weights.sum() <= 0:
        return {"mean_partition_lag": None, "job_lag": None, "mean_lag_min": None}
    return {
        "mean_partition_lag": round(lost_auc(curve, mean_lag * to_min, weights), 5),
        "job_lag": round(lost_auc(curve, job_lag * to_min, weights), 5),
        "mean_lag_min": round(float(np.average(mean_lag * to_min, weights=weights)), 2),
    }


class LagCostCurve(threading.Thread):
    """Measures the run's AUC-against-lag curve in the background (module docstring)."""

    def __init__(self, *, drift_turns_per_day: float, records_per_day: float, seed: int = 0):
        super().__init__(name="demo-lag-cost", daemon=True)
        per_min = max(int(records_per_day / (DAY_S / MINUTE_S)), 100)
        self.config = StalenessConfig(
            drift_turns_per_day=drift_turns_per_day,
            records_per_min=per_min,
            minutes=200,
            warmup_min=max(CURVE_LAGS_MIN) + 10,
            lags_min=CURVE_LAGS_MIN,
            eval_records=1_500,
            batch_records=100,
            seed=seed,
        )
        self.curve: dict[int, float] | None = None
        self.error: str | None = None

    def run(self) -> None:
        try:
            result = measure_staleness(self.config)
        except (StreamtrainError, RuntimeError, ValueError) as exc:
            self.error = str(exc)
            log.warning("could not measure the AUC-against-lag curve: %s", exc)
            return
        self.curve = {lag: round(v, 5) for lag, v in result.mean_auc().items()}

    def basis(self) -> str:
        c = self.config
        return (
            f"measured curve: one MMoE trained on the whole stream (the demo's one model "
            f"with --engine torchft), hidden model turning "
            f"{c.drift_turns_per_day:g} times a day, {c.records_per_min:,} records per "
            f"simulated minute (the run's mean); lag looked up per lag report"
        )

    def loss(
        self,
        reports: Sequence[dict[str, Any]],
        *,
        started_at_s: float,
        ended_at_s: float,
        speed: float,
    ) -> dict[str, Any]:
        """The summary's ``auc_lost_to_lag`` (the mean-partition-lag loss, ``None`` until
        the curve is measured) and ``auc_lost_to_lag_detail``."""
        if self.curve is None:
            return {
                "auc_lost_to_lag": None,
                "auc_lost_to_lag_detail": {
                    "basis": self.basis(),
                    "curve": None,
                    "error": self.error,
                },
            }
        losses = auc_lost_to_lag(
            reports, self.curve, started_at_s=started_at_s, ended_at_s=ended_at_s, speed=speed
        )
        return {
            "auc_lost_to_lag": losses["mean_partition_lag"],
            "auc_lost_to_lag_detail": {
                "basis": self.basis(),
                "lag": "mean over partitions (job lag: upper bound)",
                "upper_bound_job_lag": losses["job_lag"],
                "mean_lag_simulated_min": losses["mean_lag_min"],
                "curve": {str(k): v for k, v in self.curve.items()},
            },
        }
