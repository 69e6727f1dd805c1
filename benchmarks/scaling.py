"""What scaling a live job costs per assignment mode, against `group`, in one run.

Run: .venv/bin/python -m benchmarks.scaling [--modes group,cooperative,shards]
     [--rate N] [--capacity N] [--hold-s S] [--partitions P]

On the embedded broker, per mode: a fresh topic of ``P`` partitions (16) fed at a
constant ``N`` records/s (800) by one producer; ``streamtrain worker`` processes of the
default two-phase executor (:class:`~streamtrain.executors.local.LocalProcessPool`
with :class:`~streamtrain.executors.readiness.Readiness`: new workers prepare,
say READY and are admitted together) whose training step sleeps ``len(batch) /
capacity`` seconds (300 records/s a worker: a slow device, not a busy CPU, so the
measurement is of the hand-over and not of CPU contention on a 2-core machine); shards
mode adds the control app (``streamtrain lag run --shards-job``). The job goes
4 -> 8 -> 4 -> 12 -> 4 workers, ``--hold-s`` seconds (20) at each size after a warm-up;
shards mode then also goes 4 -> 24 -> 4 (only it can use more workers than partitions).

Before the first action the job holds 4 workers for ``--hold-s`` seconds with no action:
the control window, measured the same way as an action (``noaction_rs``: what the
metric reads when nothing happens, against the median delay of the 5 s before it).

Measured per action (:func:`streamtrain.scale.handover.action_delays`, from every
record's production and first training time): ``lost_rs``, the record x seconds the
records produced in the window after the action waited beyond the job's delay at rest
(the median delay of the records produced in the control window, at 4 workers, no
action), never less than ``stop_rs``, the full stop weighted by the arrival rate
(``λ·stop_s²/2``: a stop the delay at rest hides still costs), so an action with a full
stop never reads 0; ``stop_s``, the longest time in the
window in which no training step finished anywhere (a full stop, measured directly);
``pause_s``, the backlog's peak above its steady level over the arrival rate
(:func:`streamtrain.scale.handover.action_costs`, what the planner and the simulator
call an action's pause); and the executor's preparation time. Every produced id is
checked trained (``lost`` must be 0); records the broker never acknowledged to the
producer (a starved broker times them out) are not in Kafka and are counted apart
(``undelivered``).

``--repeat N`` runs every mode ``N`` times, interleaved (mode after mode, then again),
each on a fresh topic and pool. Per mode: the loss of the four common actions summed,
per repetition, their mean with its 95 % interval (Student t) and range; the ratio of
a mode's mean to ``group``'s with its 95 % interval (the delta method over the
repetitions, :func:`streamtrain.sim.stats.ratio_interval`). The last line is
machine-readable: ``group_lost_rs=<mean> group_lost_rs_min=... group_lost_rs_max=...
cooperative_lost_rs=... shards_lost_rs=... cooperative_ratio=<x>
cooperative_ratio_low=... cooperative_ratio_high=... shards_ratio=... shards_24_lost_rs=...
noaction_rs=<mean of the control windows> zero_with_stop=<actions with a full stop of
>= 0.5 s read as 0: must be 0> repeat=<N> lost=<records in Kafka never trained>
undelivered=<records the broker never acknowledged>``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer
from numpy.typing import NDArray

from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import KafkaSettings
from streamtrain.demo.children import kafka_env
from streamtrain.executors.local import LocalProcessPool
from streamtrain.executors.readiness import Readiness
from streamtrain.kafka import create_topic
from streamtrain.process import stop_child
from streamtrain.scale.handover import (
    ActionCost,
    ActionDelay,
    action_costs,
    action_delays,
    cumulative,
    median_delay,
    record_delays,
)
from streamtrain.sim.stats import interval, ratio_interval
from streamtrain.worker.lifecycle import default_states_topic

REPO = Path(__file__).resolve().parents[1]
COMMON_STEPS = (8, 4, 12, 4)
SHARDS_EXTRA_STEPS = (24, 4)
WARMUP_S = 15.0


class ConstantLoad(threading.Thread):
    """Produces ``rate`` records/s (int64 ids, round robin) in 20-ms batches."""

    def __init__(self, kafka: KafkaSettings, topic: str, partitions: int, rate: float) -> None:
        super().__init__(name="constant-load", daemon=True)
        self.producer = Producer(kafka.confluent_config(**{"linger.ms": 5}))
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.stop = threading.Event()
        self.times: list[float] = []
        self.counts: list[int] = []
        self.produced = 0
        # ids the broker never acknowledged (delivery failed, e.g. timed out on a starved
        # broker): not in Kafka, so not the job's to train
        self.undelivered: list[int] = []

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            if due > self.produced:
                done = self.produced
                while done < due and self._produce(done):
                    done += 1
                self.producer.poll(0)
                self.times.append(time.time())
                self.counts.append(done - self.produced)
                self.produced = done
            self.stop.wait(0.02)
        self.producer.flush(30)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.undelivered.append(int.from_bytes(msg.value(), "little"))

    def _produce(self, i: int) -> bool:
        """Produce record ``i``; while the producer's queue is full (a broker slower than
        the load), wait for room until the load is stopped (then False: not produced)."""
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    int(i).to_bytes(8, "little"),
                    partition=i % self.partitions,
                    on_delivery=self._delivered,
                )
            except BufferError:
                if self.stop.is_set():
                    return False
                self.producer.poll(0.1)
            else:
                return True


DRAIN_MAX_S = 600.0  # at most this long after the producer stops, for the last records


def worker_argv(
    topic: str, job: str, mode: str, session_timeout_ms: int = 6000, heartbeat_ms: int = 500
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamtrain.commands.worker",
        "--topic",
        topic,
        "--group",
        job,
        "--assignment",
        mode,
        "--entry",
        "benchmarks.scaling_app:make",
        "--app-dir",
        str(REPO),
        "--batch-records",
        "50",
        "--queue-records",
        "500",
        "--commit-interval-s",
        "0.5",
        "--session-timeout-ms",
        str(session_timeout_ms),
        "--heartbeat-interval-ms",
        str(heartbeat_ms),
        "--throughput-topic",
        "",
        "--states-topic",
        default_states_topic(job),
        "--admission-timeout-s",
        "60",
    ]


@contextlib.contextmanager
def control_app(kafka: KafkaSettings, job: str, topic: str, out: Path) -> Iterator[None]:
    log = (out / "control.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamtrain",
            "lag",
            "run",
            "--group",
            job,
            "--topic",
            topic,
            "--shards-job",
            job,
            "--app-id",
            f"{job}-control",
            "--web-port",
            str(free_port()),
            "--data-dir",
            str(out / "control-data"),
            "--reports-topic",
            f"{job}.reports",
            "--alerts-topic",
            f"{job}.alerts",
        ],
        env={**os.environ, **kafka_env(kafka), "PYTHONPATH": str(REPO)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(8.0)  # the Faust app's start (its agent and timer), before any worker
        yield
    finally:
        stop_child(process, "control app", 30.0)
        log.close()


def trained_series(out: Path) -> tuple[NDArray[np.int64], NDArray[np.float64], int]:
    """Every trained record id with the time its step finished (workers' files)."""
    ids: list[NDArray[np.int64]] = []
    at: list[NDArray[np.float64]] = []
    for path in out.glob("*.ids"):
        worker_ids = np.fromfile(path, dtype="<i8")
        steps = path.with_suffix(".steps")
        times: list[float] = []
        counts: list[int] = []
        if steps.exists():
            for line in steps.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    times.append(float(parts[0]))
                    counts.append(int(parts[1]))
        step_at = np.repeat(np.asarray(times, dtype=np.float64), counts)
        n = min(worker_ids.size, step_at.size)  # a step's ids are written before its line
        ids.append(worker_ids[:n])
        at.append(step_at[:n])
    all_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    all_at = np.concatenate(at) if at else np.zeros(0, dtype=np.float64)
    return all_ids, all_at, int(all_ids.size)


def run_mode(
    kafka: KafkaSettings, mode: str, args: argparse.Namespace, root: Path
) -> dict[str, Any]:
    job = f"scaling-{mode}-{uuid.uuid4().hex[:6]}"
    topic = f"{job}-data"
    out = root / job
    out.mkdir(parents=True)
    create_topic(kafka, topic, args.partitions)
    steps = COMMON_STEPS + (SHARDS_EXTRA_STEPS if mode == "shards" else ())
    env = {
        **kafka_env(kafka),
        "PYTHONPATH": str(REPO),
        "SCALING_CAPACITY_RECORDS_PER_S": str(args.capacity),
        "SCALING_OUT_DIR": str(out),
    }
    actions: list[dict[str, Any]] = []
    load = ConstantLoad(kafka, topic, args.partitions, args.rate)
    with contextlib.ExitStack() as stack:
        if mode == "shards":
            stack.enter_context(control_app(kafka, job, topic, out))
        readiness = stack.enter_context(Readiness(kafka, job, default_states_topic(job)))
        pool = stack.enter_context(
            LocalProcessPool(
                worker_argv(topic, job, mode, args.session_timeout_ms, args.heartbeat_interval_ms),
                env=env,
                name=f"{mode}-workers",
                grace_s=20.0,
                log_dir=out / "logs",
                readiness=readiness,
            )
        )
        pool.scale_to(4)
        load.start()
        stack.callback(load.join, 60)
        stack.callback(load.stop.set)
        time.sleep(WARMUP_S)
        control_at = time.time()  # the control window: the same length, no action
        time.sleep(args.hold_s)
        for target in steps:
            before = pool.current_workers()
            at = time.time()
            began = time.monotonic()
            pool.scale_to(target)
            took = time.monotonic() - began
            actions.append(
                {
                    "from": before,
                    "to": target,
                    "at_s": at,
                    "prep_s": round(pool.last_prep_s or 0.0, 2) if target > before else 0.0,
                    "apply_s": round(took, 2),
                }
            )
            print(f"  {mode}: {before} -> {target} workers (executor {took:.1f} s)", flush=True)
            time.sleep(max(0.0, args.hold_s - took))
        load.stop.set()
        load.join(60)
        produced = load.produced
        # Drain: wait while the job still trains records (a backlog left by a slow
        # action on a busy machine takes longer than any fixed wait), giving up after
        # 60 s without progress or DRAIN_MAX_S in all.
        started, progressed, seen = time.monotonic(), time.monotonic(), -1
        while time.monotonic() - started < DRAIN_MAX_S:
            ids, _, _ = trained_series(out)
            trained = int(np.unique(ids).size)
            if trained >= produced - len(set(load.undelivered)):
                break
            if trained > seen:
                seen, progressed = trained, time.monotonic()
            elif time.monotonic() - progressed > 60:
                break
            time.sleep(1)
    ids, trained_at, total = trained_series(out)
    produced_at, delay = record_delays((load.times, load.counts), ids, trained_at)
    starts = [control_at] + [a["at_s"] for a in actions]
    at_rest_s = median_delay(produced_at, delay, control_at, starts[1])
    control = action_delays(produced_at, delay, trained_at, starts[:2], window_s=args.hold_s)[0]
    measured = action_delays(
        produced_at, delay, trained_at, starts[1:], window_s=args.hold_s, reference_s=at_rest_s
    )
    delays = [control, *measured]
    produced_series = cumulative(load.times, load.counts)
    order = np.argsort(trained_at, kind="stable")
    trained_series_ = (trained_at[order], np.arange(1, order.size + 1, dtype=np.float64))
    costs = action_costs(produced_series, trained_series_, starts, window_s=args.hold_s)
    for action, one, cost in zip(actions, delays[1:], costs[1:], strict=True):
        action.update(_cost_json(one, cost))
        del action["at_s"]
    unique = np.unique(ids)
    undelivered = np.unique(np.asarray(load.undelivered, dtype=np.int64))
    in_kafka = np.setdiff1d(np.arange(produced, dtype=np.int64), undelivered)
    lost = int(in_kafka.size - np.isin(in_kafka, unique).sum())
    return {
        "mode": mode,
        "produced": produced,
        "trained_unique": int(unique.size),
        "duplicates": total - int(unique.size),
        "lost": lost,
        "undelivered": int(undelivered.size),
        "noaction": _cost_json(control, costs[0]),
        "actions": actions,
        "lost_rs_common": round(sum(a["lost_rs"] for a in actions[: len(COMMON_STEPS)]), 1),
    }


def _cost_json(measured: ActionDelay, cost: ActionCost) -> dict[str, Any]:
    return {
        "lost_rs": round(measured.lost_record_s, 1),
        "stop_s": round(measured.stop_s, 2),
        "stop_rs": round(measured.stop_record_s, 1),
        "reference_delay_s": round(measured.reference_s, 3),
        "records": measured.records,
        "pause_s": round(cost.pause_s, 2),
        "records_per_s_before": round(cost.records_per_s_before, 1),
        "records_per_s_after": round(cost.records_per_s_after, 1),
    }


def _print_run(r: dict[str, Any]) -> None:
    c = r["noaction"]
    print(
        f"  no action: lost {c['lost_rs']:>9,.0f} record·s, stop {c['stop_s']:5.2f} s, "
        f"median delay {c['reference_delay_s']:.3f} s"
    )
    for a in r["actions"]:
        print(
            f"  {a['from']:>2} -> {a['to']:>2}: lost {a['lost_rs']:>9,.0f} record·s, "
            f"stop {a['stop_s']:5.2f} s, pause {a['pause_s']:5.2f} s, prep {a['prep_s']:5.2f} s, "
            f"delay at rest {a['reference_delay_s']:.3f} s, "
            f"{a['records_per_s_before']:6.0f} -> {a['records_per_s_after']:6.0f} rec/s"
        )
    print(
        f"  produced {r['produced']:,}, trained {r['trained_unique']:,} unique "
        f"({r['duplicates']:,} duplicates), lost {r['lost']}, never acknowledged by the "
        f"broker {r['undelivered']:,}",
        flush=True,
    )


def summary_fields(results: dict[str, list[dict[str, Any]]], modes: list[str]) -> dict[str, str]:
    """The last line's keys from every repetition of every mode (module docstring)."""
    line: dict[str, str] = {}
    sums = {m: [r["lost_rs_common"] for r in results[m]] for m in modes}
    for m in modes:
        line[f"{m}_lost_rs"] = f"{float(np.mean(sums[m])):.1f}"
        line[f"{m}_lost_rs_min"] = f"{min(sums[m]):.1f}"
        line[f"{m}_lost_rs_max"] = f"{max(sums[m]):.1f}"
    if "group" in sums and float(np.mean(sums["group"])) > 0:
        for m in modes:
            if m == "group":
                continue
            ratio = ratio_interval(sums[m], sums["group"])
            line[f"{m}_ratio"] = f"{ratio.mean:.3f}"
            if ratio.n > 1:
                line[f"{m}_ratio_low"] = f"{ratio.low:.3f}"
                line[f"{m}_ratio_high"] = f"{ratio.high:.3f}"
    if "shards" in results:
        extra = [
            sum(a["lost_rs"] for a in r["actions"][len(COMMON_STEPS) :]) for r in results["shards"]
        ]
        line["shards_24_lost_rs"] = f"{float(np.mean(extra)):.1f}"
    runs = [r for m in modes for r in results[m]]
    line["noaction_rs"] = f"{float(np.mean([r['noaction']['lost_rs'] for r in runs])):.1f}"
    line["zero_with_stop"] = str(
        sum(1 for r in runs for a in r["actions"] if a["stop_s"] >= 0.5 and a["lost_rs"] <= 0)
    )
    line["repeat"] = str(max(len(results[m]) for m in modes))
    line["lost"] = str(sum(r["lost"] for r in runs))
    line["undelivered"] = str(sum(r.get("undelivered", 0) for r in runs))
    return line


def _print_modes(results: dict[str, list[dict[str, Any]]], modes: list[str]) -> None:
    print(
        "\n| mode | lost record·s, 4 common actions (per repetition) | mean ± 95 % | range | "
        "no action (control window) |\n|---|---|---|---|---|"
    )
    for m in modes:
        sums = [r["lost_rs_common"] for r in results[m]]
        i = interval(sums)
        half = "" if i.n < 2 else f" ± {i.half_width:,.0f}"
        control = ", ".join(f"{r['noaction']['lost_rs']:,.0f}" for r in results[m])
        print(
            f"| {m} | {', '.join(f'{x:,.0f}' for x in sums)} | {i.mean:,.0f}{half} | "
            f"{min(sums):,.0f}-{max(sums):,.0f} | {control} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="group,cooperative,shards")
    parser.add_argument("--rate", type=float, default=800.0, help="records/s produced")
    parser.add_argument("--capacity", type=float, default=300.0, help="records/s a worker")
    parser.add_argument("--hold-s", type=float, default=20.0, help="seconds at each size")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1, help="runs of every mode")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=6000,
        help="the workers' consumer-group session timeout (Tansu's rebalances take longer "
        "with a longer one)",
    )
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        kafka = KafkaSettings(broker.bootstrap)
        for repetition in range(args.repeat):
            for mode in modes:
                print(
                    f"{mode} (repetition {repetition + 1}/{args.repeat}): {args.partitions} "
                    f"partitions, {args.rate:g} records/s",
                    flush=True,
                )
                result = run_mode(kafka, mode, args, Path(tmp))
                results[mode].append(result)
                _print_run(result)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    _print_modes(results, modes)
    line = summary_fields(results, modes)
    print("\n" + " ".join(f"{k}={v}" for k, v in line.items()))


if __name__ == "__main__":
    main()
