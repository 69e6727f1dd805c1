"""KALE Table 2 with real training: runs the experiment and renders it beside the paper.

Run through ``python -m benchmarks.shuffle --table2 [--quick] [--runs N] [--out-dir
DIR]`` (see that module's docstring): :func:`run_table2` runs
:mod:`streamtrain.experiments.shuffle_table2` once per policy and run on the embedded
broker, from one pre-trained model, and writes ``shuffle_table2.md`` (per run: the
policies' rows with KALE's beside them, the forwarding counters, the relative changes),
``shuffle_table2_lag.csv``, ``shuffle_table2_auc.csv`` and ``shuffle_table2.png`` to
``DIR``; with ``--runs N``, every change over the runs with its 95 % interval (the AUC
differences against ``none`` among them), re-sent bytes apart from first sends; its
last line is ``key=value`` pairs of the means over the runs, the AUC differences with
their intervals (``auc_advanced_vs_none_pp``, ``_low``, ``_high``), the re-sent MB and
``runs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.shuffle.policy import ShufflePolicy

__all__ = ["run_table2"]


def run_table2(out_dir: Path, *, quick: bool, runs: int = 1) -> None:
    from streamtrain.broker import EmbeddedBroker
    from streamtrain.experiments.shuffle_table2 import (
        ExperimentConfig,
        PolicyResult,
        pretrain,
        run_policy,
    )

    config = ExperimentConfig()
    if quick:  # a third of the run, the same drift per second
        config = ExperimentConfig(
            produce_s=10.0, drain_timeout_s=40.0, drift_turns=config.drift_turns / 3
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    all_runs: list[list[PolicyResult]] = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as scratch:
        init_state = pretrain(config, Path(scratch) / "pretrained.pt")
        for run in range(runs):
            results: list[PolicyResult] = []
            for policy in ShufflePolicy:
                work = Path(scratch) / f"run{run}" / policy.value
                print(f"run {run + 1}/{runs}: policy {policy.value} ...", flush=True)
                results.append(
                    run_policy(broker.kafka_settings(), policy, config, work, init_state=init_state)
                )
            all_runs.append(results)
    tables = [_table2_rows(config, results, run + 1) for run, results in enumerate(all_runs)]
    results = all_runs[-1]
    header = _table2_header(config)
    summary, fields = _over_runs(all_runs)
    table = header + "\n\n".join(tables) + "\n\n" + summary + "\n"
    (out_dir / "shuffle_table2.md").write_text(table)
    csv = ["run,policy,time_s,partition,lag_records,lag_s"]
    auc_csv = ["run,policy,worker,at_s,auc"]
    for run, run_results in enumerate(all_runs, start=1):
        for result in run_results:
            for t, row, row_s in zip(
                result.times_s.tolist(),
                result.lag_records.tolist(),
                result.lag_s.tolist(),
                strict=True,
            ):
                csv.extend(
                    f"{run},{result.policy.value},{t:.2f},{p},{v},{s:.2f}"
                    for p, (v, s) in enumerate(zip(row, row_s, strict=True))
                )
            for worker, points in result.auc_series.items():
                auc_csv.extend(
                    f"{run},{result.policy.value},{worker},{x['at_s']:.2f},{x['auc']:.5f}"
                    for x in points
                )
    (out_dir / "shuffle_table2_lag.csv").write_text("\n".join(csv) + "\n")
    (out_dir / "shuffle_table2_auc.csv").write_text("\n".join(auc_csv) + "\n")
    _plot(results, config.hot_partitions, out_dir / "shuffle_table2.png")
    print(table)
    print(
        f"wrote {out_dir / 'shuffle_table2.md'}, shuffle_table2_lag.csv, "
        "shuffle_table2_auc.csv, shuffle_table2.png"
    )
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


def _over_runs(all_runs: list[list[Any]]) -> tuple[str, dict[str, str]]:
    """Every run's changes, their means with 95 % intervals (Student t over the runs),
    and the last line's fields (means over the runs)."""
    from streamtrain.sim.stats import interval

    def per_run(fn: Any) -> list[float]:
        return [float(fn({r.policy.value: r for r in results})) for results in all_runs]

    def total(policy: str) -> Any:
        return lambda by: by[policy].wire.total / 1e6

    rows = {
        "total MB, none": per_run(total("none")),
        "total MB, basic": per_run(total("basic")),
        "total MB, advanced": per_run(total("advanced")),
        "re-sent MB, basic": per_run(lambda by: by["basic"].wire.resent / 1e6),
        "re-sent MB, advanced": per_run(lambda by: by["advanced"].wire.resent / 1e6),
        "traffic, basic vs none (%)": per_run(
            lambda by: _pct(by["basic"].wire.total, by["none"].wire.total)
        ),
        "traffic, advanced vs basic (%)": per_run(
            lambda by: _pct(by["advanced"].wire.total, by["basic"].wire.total)
        ),
        "traffic without re-sends, advanced vs basic (%)": per_run(
            lambda by: _pct(
                by["advanced"].wire.total - by["advanced"].wire.resent,
                by["basic"].wire.total - by["basic"].wire.resent,
            )
        ),
        "AUC while producing, basic - none (points of %)": per_run(
            lambda by: 100 * (by["basic"].auc.during - by["none"].auc.during)
        ),
        "AUC while producing, advanced - none (points of %)": per_run(
            lambda by: 100 * (by["advanced"].auc.during - by["none"].auc.during)
        ),
        "worst worker's AUC, advanced - none (points of %)": per_run(
            lambda by: 100 * (by["advanced"].auc.min_during - by["none"].auc.min_during)
        ),
    }
    runs = len(all_runs)
    lines = [
        f"Over the {runs} run(s): each run's value, then the mean ± the 95 % interval "
        "(Student t over the runs):",
        "",
        "| quantity | per run | mean ± 95 % |",
        "|---|---|---:|",
    ]
    cells: dict[str, Any] = {}
    for name, values in rows.items():
        cells[name] = interval(values)
        half = cells[name].half_width
        spread = "" if cells[name].n < 2 else f" ± {half:.2f}"
        lines.append(
            f"| {name} | {', '.join(f'{v:+.2f}' for v in values)} | "
            f"{cells[name].mean:+.2f}{spread} |"
        )

    def mean(name: str, digits: int = 1, sign: str = "") -> str:
        return f"{cells[name].mean:{sign}.{digits}f}"

    adv = cells["AUC while producing, advanced - none (points of %)"]
    basic = cells["AUC while producing, basic - none (points of %)"]
    fields = {
        "total_mb_none": mean("total MB, none"),
        "total_mb_basic": mean("total MB, basic"),
        "total_mb_advanced": mean("total MB, advanced"),
        "basic_vs_none_pct": mean("traffic, basic vs none (%)", sign="+"),
        "advanced_vs_basic_pct": mean("traffic, advanced vs basic (%)", sign="+"),
        "auc_none": f"{np.mean([by.auc.during for by in _policy(all_runs, 'none')]):.4f}",
        "auc_basic": f"{np.mean([by.auc.during for by in _policy(all_runs, 'basic')]):.4f}",
        "auc_advanced": (f"{np.mean([by.auc.during for by in _policy(all_runs, 'advanced')]):.4f}"),
        "auc_advanced_vs_none_pp": f"{adv.mean:+.2f}",
        "auc_advanced_vs_none_pp_low": f"{adv.low:+.2f}",
        "auc_advanced_vs_none_pp_high": f"{adv.high:+.2f}",
        "auc_basic_vs_none_pp": f"{basic.mean:+.2f}",
        "auc_basic_vs_none_pp_low": f"{basic.low:+.2f}",
        "auc_basic_vs_none_pp_high": f"{basic.high:+.2f}",
        "resent_mb_advanced": mean("re-sent MB, advanced", 2),
        "resent_mb_basic": mean("re-sent MB, basic", 2),
        "runs": str(runs),
    }
    return "\n".join(lines), fields


def _policy(all_runs: list[list[Any]], policy: str) -> list[Any]:
    return [r for results in all_runs for r in results if r.policy.value == policy]


def _pct(new: float, old: float) -> float:
    from streamtrain.experiments.table2_metrics import relative_change

    return relative_change(new, old)


def _table2_header(config: Any) -> str:
    hot = list(config.hot_partitions)
    return (
        f"{config.workers} workers, each taking real MMoE Adam steps of "
        f"{config.batch_records} records, at most {config.train_records_per_s:,} records/s; "
        f"{config.partitions} partitions, producer {config.produce_records_per_s:,} CTR "
        f"records/s of {config.record_bytes} B for {config.produce_s:g} s, "
        f"{config.hot_share:.0%} of it on partitions {hot}; the hidden labelling model turns "
        f"{config.drift_turns:g} turn while it produces; every worker starts from one model "
        f"trained on {config.pretrain_records:,} records of the undrifted traffic\n\n"
    )


def _table2_rows(config: Any, results: list[Any], run: int) -> str:
    from streamtrain.experiments.table2_metrics import PAPER_TABLE2, accumulated_lag

    is_hot = np.isin(np.arange(config.partitions), list(config.hot_partitions))
    lines = [
        f"Run {run}:",
        "",
        "| policy | total MB on the wire (Kafka rx + tx + forwarded first + re-sent + "
        "answers + events) "
        "| worker CPU % | max lag hot / cold (s; cold: worst, mean of the partitions' max) "
        "| accumulated lag hot / cold (lag-s x s, sum over partitions) | max lag hot / cold "
        "(records) | drained, s after the "
        "producer stopped | AUC while producing (mean of workers / worst worker) | AUC when "
        "the producer stopped | AUC at the end | KALE: traffic MB, CPU %, AUC % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    by = {}
    for result in results:
        by[result.policy.value] = result
        w = result.wire
        acc = accumulated_lag(result.times_s, result.lag_s)
        drained = (
            f"{result.drained_after_s - result.produce_s:.1f}"
            if result.drained_after_s is not None
            else f"not within {config.drain_timeout_s:.0f}"
        )
        paper = PAPER_TABLE2[result.policy.value]
        lines.append(
            f"| {result.policy.value} | {w.total / 1e6:.2f} ({w.kafka_rx / 1e6:.2f} + "
            f"{w.kafka_tx / 1e6:.2f} + {w.forwarded / 1e6:.2f} + {w.resent / 1e6:.2f} + "
            f"{w.answers / 1e6:.3f} + {w.state_events / 1e6:.3f}) | {result.cpu_pct:.1f} | "
            f"{result.lag_s[:, is_hot].max():.1f} / {result.lag_s[:, ~is_hot].max():.1f}, "
            f"{result.lag_s[:, ~is_hot].max(axis=0).mean():.1f} | "
            f"{acc[is_hot].sum():,.0f} / {acc[~is_hot].sum():,.0f} | "
            f"{int(result.lag_records[:, is_hot].max()):,} / "
            f"{int(result.lag_records[:, ~is_hot].max()):,} | {drained} | "
            f"{result.auc.during:.4f} / {result.auc.min_during:.4f} | "
            f"{result.auc.at_stop:.4f} | {result.auc.final:.4f} | "
            f"{paper[0]:,.0f}, {paper[1]:.1f}, {paper[2]:.1f} |"
        )
    lines += [
        "",
        "| policy | trained records | forwarded records (batches; rejected, timed out) "
        "| of them re-sent (records, batches) | records received from peers "
        "| CPU s in MMoE steps / all (less evaluations) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        t = {
            k: sum(w[k] for w in result.per_worker.values())
            for k in next(iter(result.per_worker.values()))
        }
        lines.append(
            f"| {result.policy.value} | {t['trained_records']:,.0f} | {t['records_sent']:,.0f} "
            f"({t['batches_sent']:,.0f}; {t['batches_rejected']:,.0f}, "
            f"{t['batches_timed_out']:,.0f}) | {t['records_resent']:,.0f}, "
            f"{t['batches_resent']:,.0f} | {t['records_received']:,.0f} | "
            f"{t['step_cpu_s']:.1f} / {result.cpu_s:.1f} |"
        )
    p = dict(PAPER_TABLE2)
    none, basic, adv = by["none"], by["basic"], by["advanced"]
    lines += [
        "",
        "| change | ours | KALE |",
        "|---|---:|---:|",
        f"| traffic, basic vs none | {_pct(basic.wire.total, none.wire.total):+.1f} % | "
        f"{_pct(p['basic'][0], p['none'][0]):+.1f} % |",
        f"| traffic, advanced vs basic | {_pct(adv.wire.total, basic.wire.total):+.1f} % | "
        f"{_pct(p['advanced'][0], p['basic'][0]):+.1f} % |",
        f"| CPU, basic vs none (points) | {basic.cpu_pct - none.cpu_pct:+.1f} | "
        f"{p['basic'][1] - p['none'][1]:+.1f} |",
        f"| CPU, advanced vs none (points) | {adv.cpu_pct - none.cpu_pct:+.1f} | "
        f"{p['advanced'][1] - p['none'][1]:+.1f} |",
        f"| AUC while producing, basic vs none (points of %) | "
        f"{100 * (basic.auc.during - none.auc.during):+.2f} | "
        f"{p['basic'][2] - p['none'][2]:+.2f} |",
        f"| AUC while producing, advanced vs none (points of %) | "
        f"{100 * (adv.auc.during - none.auc.during):+.2f} | "
        f"{p['advanced'][2] - p['none'][2]:+.2f} |",
    ]
    return "\n".join(lines)


def _plot(results: list[Any], hot: tuple[int, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        2, len(results), figsize=(5 * len(results), 6.4), sharey="row", sharex=True
    )
    cold = next(p for p in range(99) if p not in hot)
    for axis, result in zip(axes[0], results, strict=True):
        for partition in range(result.lag_s.shape[1]):
            is_hot = partition in hot
            axis.plot(
                result.times_s,
                result.lag_s[:, partition],
                color="tab:red" if is_hot else "tab:blue",
                alpha=0.9 if is_hot else 0.35,
                linewidth=1.6 if is_hot else 0.8,
                label=("hot partition" if is_hot else "cold partition")
                if partition in (hot[0], cold)
                else None,
            )
        axis.axvline(result.produce_s, color="grey", linestyle=":", linewidth=0.8)
        axis.set_title(f"shuffle policy: {result.policy.value}")
    for axis, result in zip(axes[1], results, strict=True):
        for worker, points in sorted(result.auc_series.items()):
            axis.plot(
                [x["at_s"] for x in points], [x["auc"] for x in points], label=worker, linewidth=1
            )
        axis.axvline(result.produce_s, color="grey", linestyle=":", linewidth=0.8)
        axis.set_xlabel("time since the producer started (s)")
    axes[0][0].set_ylabel("lag per partition (s)")
    axes[0][0].legend(loc="upper left")
    axes[1][0].set_ylabel("click AUC, held-out sample of the moment")
    axes[1][0].legend(loc="lower right", fontsize=8)
    for axis in axes[1]:
        axis.set_xlim(left=-5)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
