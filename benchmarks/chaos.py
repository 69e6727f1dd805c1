"""A fault-injection soak: every record id trained while workers, broker and control app die.

Run: .venv/bin/python -m benchmarks.chaos [--assignment shuffle|shards] [--duration-s 600]
     [--seed 18] [--workers 4] [--rate 600] [--linger-ms 1000] [--heartbeat-ms 2000]
     [--once] [--json PATH]

With ``--assignment shards`` the workers read shards the control app leases
(``--assignment shards``, no shuffle) and the faults are
:data:`~benchmarks.chaos_faults.SHARD_KINDS`: a worker killed -9, a worker stalled
(SIGSTOP) for three leases and woken, the broker killed -9, the control app killed -9.
The rest of this docstring describes the default, the shuffle job.

A demo-sized job on the durable embedded broker (Tansu with S3 storage on a local S3
server, so a kill -9 of the broker loses nothing it acknowledged): a topic of
``2 x workers`` partitions, one producer thread writing unique int64 ids at ``--rate``
records/s in batches of ``--linger-ms`` (1 s) with half of them on partition 0 (a hot
partition: its worker overflows and forwards to the others), ``--workers`` ``streamtrain
worker --shuffle advanced`` processes (worker i reads partitions i and i + workers; each
trains at most ``--capacity`` records/s (300: worker 0 gets 343 records/s and cannot keep up
alone, so the shuffle carries traffic all through the run), a sleeping device:
``benchmarks/scaling_app.py`` records each trained id before the batch is acknowledged,
and those a peer forwarded apart), and the control app
(``streamtrain lag run`` with the planner); the load, the children and their argv are
:mod:`benchmarks.chaos_job`'s. Once every worker trains, for
``--duration-s`` seconds a seeded schedule (:mod:`benchmarks.chaos_faults`) injects, in
turn:

* ``kill_sender``: kill -9 worker 0 (the hot partition's: it forwards), restart it 3 s
  later; ``kill_receiver``: the same for a worker that receives forwarded records;
* ``broker``: kill -9 the broker, restart it on the same port ``--broker-down-s`` later;
* ``control``: kill -9 the control app, start it again;
* ``partition``: the last worker binds 127.0.0.2 and announces 127.0.0.3, where a relay
  forwards to it; for 30 s the relay moves no byte (its shuffle traffic is dropped, as
  a network partition does; TCP holds the bytes).

``--once`` runs every kind exactly once (the test suite's short run). After the
producer stops, the job drains until every delivered id was trained, or until no id
was trained for ``--stuck-s`` (120 s; at most ``--drain-s``). Measured: ``lost``
(delivered ids never trained: must be 0), ``duplicates_pct`` (trained records beyond
the first of each id, in % of the ids: at-least-once's price of the faults),
``max_stall_s`` (the longest time no worker finished a training step, from the first
step until the backlog was drained), and the faults injected. A worker or control app
that exits by itself is restarted and counted (``unexpected_exits``); ``forwarded`` is
the records a worker trained for a peer (the shuffle forwarded them; counted from files
the app appends to before acknowledging, so incarnations killed -9 count too). Every 30 s
the S3 server's counters are printed (``s3_objects_per_s``: new objects; Tansu writes
one per produced record batch and lists all of a partition's at each fetch, which is why
the producer batches for ``--linger-ms`` and the members heartbeat every
``--heartbeat-ms``, see docs/benchmarks.md). The last line is machine-readable:
``lost=... duplicates_pct=... max_stall_s=... faults=... fault_kinds=... produced=...
unexpected_exits=... forwarded=... s3_objects_per_s=...``; the exit code is 1 when an id
was never trained. SIGTERM stops the run (and its children) like Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.chaos_faults import (
    KINDS,
    PARTITION_S,
    SHARD_KINDS,
    StallingRelay,
    schedule,
    stall,
    watch_victim,
)
from benchmarks.chaos_job import (
    RELAY_HOST,
    REPO,
    VICTIM_HOST,
    Child,
    Load,
    control_argv,
    worker_argv,
)
from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.demo.children import kafka_env
from streamtrain.kafka import create_topic
from streamtrain.process import stop_children


def _wait_until_all_train(workers: list[Child], out: Path, timeout_s: float) -> None:
    """Until every worker finished a training step (its start is slow on a busy machine)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [w.process.pid for w in workers if w.process is not None]
        steps = [out / f"worker-{pid}.steps" for pid in pids]
        if all(path.exists() and path.stat().st_size > 0 for path in steps):
            return
        time.sleep(0.5)
    print(f"  not every worker trains after {timeout_s:g} s; faults start anyway", flush=True)


def forwarded(out: Path) -> int:
    """Records a worker trained for a peer (the shuffle forwarded them), from the
    ``.peer`` files the app appends to before the batch is acknowledged: incarnations
    killed -9 count too."""
    return sum(path.stat().st_size // 8 for path in out.glob("*.peer"))


class StorageSampler(threading.Thread):
    """Every ``every_s``: what the durable broker's S3 storage gained (objects, list
    keys, GETs per s) and how many records the shuffle forwarded so far, printed, and
    kept for the result."""

    def __init__(self, broker: EmbeddedBroker, out: Path, every_s: float = 30.0) -> None:
        super().__init__(name="chaos-s3", daemon=True)
        self.broker, self.out, self.every_s = broker, out, every_s
        self.stop = threading.Event()
        self.samples: list[dict[str, float]] = []
        self.started = time.monotonic()

    def run(self) -> None:
        last, last_at = self.broker.storage_stats(), time.monotonic()
        while not self.stop.wait(self.every_s):
            try:
                now = self.broker.storage_stats()
            except OSError:
                continue  # the S3 server is busy or gone: the next sample says
            at = time.monotonic()
            if now is None or last is None:
                return
            span_s = at - last_at
            sample = {
                "t_s": round(at - self.started, 1),
                "objects": now.objects,
                "objects_per_s": round((now.creates - last.creates) / span_s, 1),
                "puts_per_s": round((now.puts - last.puts) / span_s, 1),
                "listed_keys_per_s": round((now.listed_keys - last.listed_keys) / span_s),
                "lists_per_s": round((now.lists - last.lists) / span_s, 1),
                "gets_per_s": round((now.gets - last.gets) / span_s, 1),
                "forwarded": forwarded(self.out),
            }
            self.samples.append(sample)
            print(f"  s3: {sample}", flush=True)
            last, last_at = now, at


def trained(out: Path) -> tuple[np.ndarray, list[float]]:
    ids = [np.fromfile(p, dtype="<i8") for p in out.glob("*.ids")]
    steps: list[float] = []
    for path in out.glob("*.steps"):
        steps += [float(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]
    return (np.concatenate(ids) if ids else np.zeros(0, dtype="<i8")), sorted(steps)


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    job = f"chaos-{uuid.uuid4().hex[:6]}"
    topic = f"{job}-data"
    partitions = 2 * args.workers
    out = root / "trained"
    logs = root / "logs"
    out.mkdir()
    logs.mkdir()
    shards = args.assignment == "shards"
    kinds = SHARD_KINDS if shards else KINDS
    faults = schedule(args.duration_s, args.seed, once=args.once, kinds=kinds)
    print(
        f"{job}: {args.workers} workers, {partitions} partitions, {args.rate:g} records/s, "
        f"{args.duration_s:g} s, faults: {faults}",
        flush=True,
    )
    done: list[dict[str, Any]] = []
    unexpected = 0
    with EmbeddedBroker(EmbeddedBrokerSettings(durable=True)) as broker:
        kafka = KafkaSettings(broker.bootstrap)
        create_topic(kafka, topic, partitions)
        env = {
            **os.environ,
            **kafka_env(kafka),
            "PYTHONPATH": str(REPO),
            "SCALING_CAPACITY_RECORDS_PER_S": str(args.capacity),
            "SCALING_OUT_DIR": str(out),
        }
        victim = args.workers - 1
        workers = [
            Child(f"w{i}", worker_argv(topic, job, i, args, i == victim and not shards), env, logs)
            for i in range(args.workers)
        ]
        control = Child(
            "control",
            control_argv(job, topic, free_port(), root / "control-data", args),
            env,
            logs,
        )
        relay = StallingRelay(RELAY_HOST, VICTIM_HOST)
        stop = threading.Event()
        load = Load(kafka, topic, partitions, args.rate, args.linger_ms)
        sampler = StorageSampler(broker, out)
        children = [control, *workers]
        try:
            sampler.start()
            control.start()
            for worker in workers:
                worker.start()
            if not shards:
                threading.Thread(
                    target=watch_victim, args=(kafka, job, f"w{victim}", relay, stop), daemon=True
                ).start()
            load.start()
            _wait_until_all_train(workers, out, timeout_s=180.0)
            began = time.monotonic()  # the faults' clock starts once every worker trains
            pending = list(faults)
            receivers = [w for w in workers[1:] if w is not workers[victim]] or workers[1:]
            while time.monotonic() - began < args.duration_s:
                for child in children:
                    if (code := child.exited()) is not None:
                        unexpected += 1
                        print(
                            f"  {child.name} exited by itself ({code}); restarting it",
                            flush=True,
                        )
                        child.start()
                if pending and time.monotonic() - began >= pending[0][0]:
                    _at_s, kind = pending.pop(0)
                    print(f"  t={time.monotonic() - began:5.1f} s: {kind}", flush=True)
                    done.append({"at_s": round(time.monotonic() - began, 1), "kind": kind})
                    if kind in ("kill_sender", "kill_receiver", "kill_worker"):
                        target = (
                            workers[0]
                            if kind == "kill_sender"
                            else receivers[len(done) % len(receivers)]
                        )
                        target.kill()
                        time.sleep(3.0)
                        target.start()
                    elif kind == "stall_worker":  # beside the schedule, like the partition
                        target = workers[len(done) % len(workers)]
                        threading.Thread(target=stall, args=(target, 3 * args.lease_s)).start()
                    elif kind == "broker":
                        broker.kill()
                        time.sleep(args.broker_down_s)
                        broker.restart()
                    elif kind == "control":
                        control.kill()
                        control.start()
                    else:  # the stall runs beside the schedule
                        threading.Thread(target=relay.stall, args=(PARTITION_S,)).start()
                time.sleep(0.2)
            load.stop.set()
            load.join(180)
            delivered = np.unique(np.array(load.delivered, dtype="<i8"))
            print(
                f"  producer stopped: {load.produced:,} produced, {delivered.size:,} "
                f"delivered, {load.failed} failed; draining",
                flush=True,
            )
            deadline = time.monotonic() + args.drain_s
            missing, progressed_at = delivered.size, time.monotonic()
            while time.monotonic() < deadline:
                for child in children:
                    if child.exited() is not None:
                        unexpected += 1
                        child.start()
                ids, _ = trained(out)
                left = np.setdiff1d(delivered, ids).size
                if left == 0 or time.monotonic() - progressed_at > args.stuck_s:
                    break  # all trained, or no id trained for --stuck-s: lost for good
                if left < missing:
                    missing, progressed_at = left, time.monotonic()
                time.sleep(2.0)
        finally:
            stop.set()
            load.stop.set()
            sampler.stop.set()
            stop_children([(c.process, c.name) for c in children if c.process is not None], 30)
            for child in children:
                child.close()
            relay.close()
    ids, steps = trained(out)
    unique = np.unique(ids)
    lost = np.setdiff1d(delivered, unique)
    gaps = np.diff(np.array(steps)) if len(steps) > 1 else np.zeros(1)
    return {
        "produced": int(delivered.size),
        "trained_records": int(ids.size),
        "lost": int(lost.size),
        "lost_examples": lost[:20].tolist(),
        "duplicates_pct": round(100.0 * (ids.size - unique.size) / max(1, unique.size), 2),
        "max_stall_s": round(float(gaps.max()), 1),
        "faults": done,
        "unexpected_exits": unexpected,
        "forwarded": forwarded(out),
        "s3": sampler.samples,
        "s3_objects_per_s": round(
            float(np.mean([x["objects_per_s"] for x in sampler.samples] or [0.0])), 1
        ),
        "starts": {c.name: c.starts for c in children},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--assignment",
        choices=("shuffle", "shards"),
        default="shuffle",
        help="workers on partitions sharing overflow through the shuffle, or on leased shards",
    )
    parser.add_argument(
        "--lease-s", type=float, default=3.0, help="--shard-lease-s of the control app (shards)"
    )
    parser.add_argument("--duration-s", type=float, default=600.0, help="seconds of faults")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=600.0, help="records/s produced")
    parser.add_argument("--capacity", type=float, default=300.0, help="records/s a worker")
    parser.add_argument("--broker-down-s", type=float, default=10.0)
    parser.add_argument(
        "--linger-ms", type=int, default=1000, help="the producer's linger (batch size)"
    )
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        default=2000,
        help="the workers' members heartbeat (their timeout: 5x this)",
    )
    parser.add_argument("--drain-s", type=float, default=1800.0, help="drain at most this")
    parser.add_argument(
        "--stuck-s",
        type=float,
        default=120.0,
        help="the drain ends when no id was trained for this long",
    )
    parser.add_argument("--once", action="store_true", help="every fault kind once")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument(
        "--out-dir", type=Path, default=None, help="keep the logs and trained ids here"
    )
    args = parser.parse_args()
    # SIGTERM ends the run like Ctrl-C: the children stop, the results so far are lost
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.workers < 4:
        parser.error("the soak needs at least 4 workers (a sender and receivers)")
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=False)
        result = run(args, args.out_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="streamtrain-chaos-") as tmp:
            result = run(args, Path(tmp))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    kinds = sorted({f["kind"] for f in result["faults"]})
    print(f"faults: {[(f['at_s'], f['kind']) for f in result['faults']]}")
    print(
        f"trained {result['trained_records']:,} records for {result['produced']:,} ids; "
        f"starts {result['starts']}; lost examples {result['lost_examples']}"
    )
    print(
        f"lost={result['lost']} duplicates_pct={result['duplicates_pct']} "
        f"max_stall_s={result['max_stall_s']} faults={len(result['faults'])} "
        f"fault_kinds={','.join(kinds)} produced={result['produced']} "
        f"unexpected_exits={result['unexpected_exits']} forwarded={result['forwarded']} "
        f"s3_objects_per_s={result['s3_objects_per_s']}",
        flush=True,
    )
    sys.exit(1 if result["lost"] else 0)


if __name__ == "__main__":
    main()
