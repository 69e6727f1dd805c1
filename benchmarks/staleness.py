"""KALE Fig. 1 measured: click AUC against training lag, with real MMoE training.

Run: .venv/bin/python -m benchmarks.staleness [--drift-turns-per-day 6]
     [--records-per-min 1000] [--minutes 300] [--lags 0,5,10,20,40] [--out-dir docs/img]

A stream of synthetic CTR records (``--records-per-min`` per simulated minute) whose
hidden labelling model turns ``--drift-turns-per-day`` times a simulated day. One MMoE
model trains on the fresh stream (real Adam steps, one torch thread); copies held back
by each lag are the fresh model's snapshots of that many minutes ago
(:mod:`streamtrain.ingest.staleness`). After a warm-up, every 5 simulated minutes
all copies are scored on one held-out sample of the next minute's traffic. The baseline,
measured in the same run, is lag 0: the fresh model. Printed: the mean AUC per lag,
its drop against lag 0 and the drop's standard error; written: ``staleness.md``,
``staleness.csv`` (every evaluation) and ``staleness.png`` to ``--out-dir``. The last
line is machine-readable: ``auc_lag0=<x> auc_lag<L>min=<x> ... drop_pct=<x>
monotone=<0|1>`` (``drop_pct``: the relative drop at 20 minutes, KALE's SLO, or at the
largest lag if 20 is not measured).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from streamtrain.ingest.staleness import StalenessConfig, StalenessResult, measure_staleness


def _render(result: StalenessResult, elapsed_s: float) -> str:
    config = result.config
    means, errors = result.mean_auc(), result.stderr_auc()
    lines = [
        f"{config.records_per_min:,} records per simulated minute, hidden model turning "
        f"{config.drift_turns_per_day:g} times a day ({360 * config.drift_turns_per_day / 1440:.2f}"
        f" degrees a minute), {config.minutes} simulated minutes ({result.trained_records:,} "
        f"records trained), {len(result.eval_minutes)} evaluations of {config.eval_records:,} "
        f"held-out records after a {config.warmup_min}-minute warm-up; {elapsed_s:.0f} s",
        "",
        "| lag (simulated min) | click AUC (mean) | drop vs lag 0 (AUC points) | drop, % of "
        "lag 0 | standard error of the drop |",
        "|---:|---:|---:|---:|---:|",
    ]
    for lag in config.lags_min:
        drop = means[0] - means[lag]
        lines.append(
            f"| {lag} | {means[lag]:.4f} | {drop:.4f} | {100 * drop / means[0]:.2f} | "
            f"{errors[lag]:.4f} |"
        )
    return "\n".join(lines) + "\n"


def _plot(result: StalenessResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means, errors = result.mean_auc(), result.stderr_auc()
    lags = list(result.config.lags_min)
    figure, axis = plt.subplots(figsize=(5.5, 3.6))
    axis.errorbar(
        lags,
        [means[lag] for lag in lags],
        yerr=[2 * errors[lag] for lag in lags],
        marker="o",
        capsize=3,
        color="tab:purple",
    )
    axis.axvline(20, color="grey", linestyle=":", linewidth=0.8, label="KALE's SLO (20 min)")
    axis.set_xlabel("training lag (simulated minutes)")
    axis.set_ylabel("click AUC on fresh traffic")
    axis.set_title(
        f"AUC against lag (drift {result.config.drift_turns_per_day:g} turns/day)", fontsize=10
    )
    axis.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    defaults = StalenessConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drift-turns-per-day", type=float, default=defaults.drift_turns_per_day)
    parser.add_argument("--records-per-min", type=int, default=defaults.records_per_min)
    parser.add_argument("--minutes", type=int, default=defaults.minutes)
    parser.add_argument("--warmup-min", type=int, default=defaults.warmup_min)
    parser.add_argument("--lags", default=",".join(str(x) for x in defaults.lags_min))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default="docs/img")
    args = parser.parse_args()
    config = StalenessConfig(
        drift_turns_per_day=args.drift_turns_per_day,
        records_per_min=args.records_per_min,
        minutes=args.minutes,
        warmup_min=args.warmup_min,
        lags_min=tuple(int(x) for x in args.lags.split(",")),
        seed=args.seed,
    )
    started = time.monotonic()

    def progress(minute: int) -> None:
        if (minute + 1) % 60 == 0:
            print(f"  {minute + 1}/{config.minutes} simulated minutes trained", flush=True)

    result = measure_staleness(config, progress=progress)
    table = _render(result, time.monotonic() - started)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "staleness.md").write_text(table)
    rows = ["minute," + ",".join(f"auc_lag{lag}min" for lag in config.lags_min)]
    rows += [
        f"{m}," + ",".join(f"{v:.5f}" for v in row)
        for m, row in zip(result.eval_minutes.tolist(), result.auc.tolist(), strict=True)
    ]
    (out / "staleness.csv").write_text("\n".join(rows) + "\n")
    _plot(result, out / "staleness.png")
    print(table)
    print(f"wrote {out / 'staleness.md'}, staleness.csv, staleness.png")
    means = result.mean_auc()
    reference = 20 if 20 in means else max(means)
    values = [means[lag] for lag in config.lags_min]
    monotone = bool(np.all(np.diff(values) <= 0))
    print(
        " ".join(
            [f"auc_lag0={means[0]:.4f}"]
            + [f"auc_lag{lag}min={means[lag]:.4f}" for lag in config.lags_min if lag]
            + [
                f"drop_pct={100 * (means[0] - means[reference]) / means[0]:.2f}",
                f"monotone={int(monotone)}",
            ]
        )
    )


if __name__ == "__main__":
    main()
