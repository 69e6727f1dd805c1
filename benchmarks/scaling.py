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

Measured per action (:func:`streamtrain.scale.handover.action_costs`): the records x
seconds of extra waiting it caused (``lost_rs``, the backlog above its steady level,
integrated until the next action), its pause as full-stop seconds, and the executor's
preparation time. Every produced id is checked trained (``lost`` must be 0). The last
line is machine-readable:
``group_lost_rs=... cooperative_lost_rs=... shards_lost_rs=... cooperative_ratio=...
shards_ratio=...`` (sums over the four common actions; ratios against ``group``).
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

from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import KafkaSettings
from streamtrain.demo.children import kafka_env
from streamtrain.executors.local import LocalProcessPool
from streamtrain.executors.readiness import Readiness
from streamtrain.kafka import create_topic
from streamtrain.process import stop_child
from streamtrain.scale.handover import ActionCost, action_costs, cumulative
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

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            if due > self.produced:
                for i in range(self.produced, due):
                    self.producer.produce(
                        self.topic, int(i).to_bytes(8, "little"), partition=i % self.partitions
                    )
                self.producer.poll(0)
                self.times.append(time.time())
                self.counts.append(due - self.produced)
                self.produced = due
            self.stop.wait(0.02)
        self.producer.flush(30)


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


def trained_series(out: Path) -> tuple[tuple[Any, Any], set[int], int]:
    times: list[float] = []
    counts: list[int] = []
    for path in out.glob("*.steps"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                times.append(float(parts[0]))
                counts.append(int(parts[1]))
    ids: set[int] = set()
    total = 0
    for path in out.glob("*.ids"):
        array = np.fromfile(path, dtype="<i8")
        total += array.size
        ids.update(array.tolist())
    return cumulative(times, counts), ids, total


def run_mode(
    kafka: KafkaSettings, mode: str, args: argparse.Namespace, root: Path
) -> dict[str, Any]:
    job = f"scaling-{mode}-{uuid.uuid4().hex[:6]}"
    topic = f"{job}-data"
    out = root / mode
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
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, ids, _ = trained_series(out)
            if len(ids) >= produced:
                break
            time.sleep(1)
    trained, ids, total = trained_series(out)
    costs = action_costs(
        cumulative(load.times, load.counts),
        trained,
        [a["at_s"] for a in actions],
        window_s=args.hold_s,
    )
    for action, cost in zip(actions, costs, strict=True):
        action.update(_cost_json(cost))
        del action["at_s"]
    lost = produced - len(ids & set(range(produced)))
    return {
        "mode": mode,
        "produced": produced,
        "trained_unique": len(ids),
        "duplicates": total - len(ids),
        "lost": lost,
        "actions": actions,
        "lost_rs_common": round(sum(a["lost_rs"] for a in actions[: len(COMMON_STEPS)]), 1),
    }


def _cost_json(cost: ActionCost) -> dict[str, Any]:
    return {
        "lost_rs": round(cost.lost_record_s, 1),
        "pause_s": round(cost.pause_s, 2),
        "records_per_s_before": round(cost.records_per_s_before, 1),
        "records_per_s_after": round(cost.records_per_s_after, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="group,cooperative,shards")
    parser.add_argument("--rate", type=float, default=800.0, help="records/s produced")
    parser.add_argument("--capacity", type=float, default=300.0, help="records/s a worker")
    parser.add_argument("--hold-s", type=float, default=20.0, help="seconds at each size")
    parser.add_argument("--partitions", type=int, default=16)
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
    results: dict[str, dict[str, Any]] = {}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        kafka = KafkaSettings(broker.bootstrap)
        for mode in modes:
            print(f"{mode}: {args.partitions} partitions, {args.rate:g} records/s", flush=True)
            results[mode] = run_mode(kafka, mode, args, Path(tmp))
            r = results[mode]
            for a in r["actions"]:
                print(
                    f"  {a['from']:>2} -> {a['to']:>2}: lost {a['lost_rs']:>9,.0f} record·s, "
                    f"pause {a['pause_s']:5.2f} s, prep {a['prep_s']:5.2f} s, "
                    f"{a['records_per_s_before']:6.0f} -> {a['records_per_s_after']:6.0f} rec/s"
                )
            print(
                f"  produced {r['produced']:,}, trained {r['trained_unique']:,} unique "
                f"({r['duplicates']:,} duplicates), lost {r['lost']}",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    line = {f"{m}_lost_rs": results[m]["lost_rs_common"] for m in modes}
    base = results.get("group", {}).get("lost_rs_common")
    for m in modes:
        if m != "group" and base:
            line[f"{m}_ratio"] = round(results[m]["lost_rs_common"] / base, 3)
    if "shards" in results:
        extra = results["shards"]["actions"][len(COMMON_STEPS) :]
        line["shards_24_lost_rs"] = round(sum(a["lost_rs"] for a in extra), 1)
    line["lost"] = sum(r["lost"] for r in results.values())
    print(" ".join(f"{k}={v}" for k, v in line.items()))


if __name__ == "__main__":
    main()
