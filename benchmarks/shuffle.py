"""Shuffle forwarding throughput and latency against plain pyzmq, measured in one run.

Run: .venv/bin/python -m benchmarks.shuffle [--records N] [--record-bytes B]
     [--batch-records K] [--latency-batches L]

Two worker processes on loopback. Baseline: plain pyzmq PUSH/PULL of the same payload
bytes in frames of ``K`` records (``N`` records in all), and a plain DEALER/ROUTER round
trip of one such frame answered by a small reply. Measured: a ShuffleNode whose local
queue is full forwards ``N`` records to a receiving ShuffleNode whose trainer takes and
acknowledges them, including protobuf encode/decode, credit-based flow control, per-batch
ACKs and the origin's offset acknowledgements; records/s counts records ACKed back at
the origin. Latency: with one batch in flight at a time, the time from ``put()`` at the
origin until the origin holds the receiver's ACK (enqueue, forward, decode, queue,
trainer take and ack, ACK back), p99 over ``L`` batches; the raw round trip p99 is
printed beside it. The last line is machine-readable:
``forwarded_records_per_s=<n> raw_records_per_s=<n> ratio=<x> p99_ms=<x>``.

``--table2 [--runs N] --out-dir DIR`` runs the KALE Table 2 experiment instead
(:mod:`streamtrain.experiments.shuffle_table2`: 4 workers taking real MMoE steps, 16
skewed partitions on the embedded broker, drifting labels, policies none/basic/advanced,
``N`` times each) and writes its tables (beside KALE's row), CSVs and plot to ``DIR``;
its last line: ``total_mb_<policy>=… basic_vs_none_pct=… advanced_vs_basic_pct=…
auc_<policy>=…`` (of the last run).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from streamtrain.records import RecordColumns
from streamtrain.shuffle.membership import MemberDirectory, PeerInfo, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import ShuffleSettings

JOB = "bench-shuffle"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _payload(batch: int, size: int) -> tuple[bytes, np.ndarray]:
    payload = os.urandom(size) * batch
    bounds = np.arange(batch + 1, dtype=np.int64) * size
    return payload, bounds


def _spawn(role: str, spec: Mapping[str, object], *, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.shuffle", "--role", role, "--spec", json.dumps(spec)],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )


def _result(proc: subprocess.Popen[str], timeout_s: float = 300) -> dict[str, float]:
    assert proc.stdout is not None
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        out = proc.stdout.read()
        proc.wait()
    finally:
        timer.cancel()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark role exited with {proc.returncode}: {out[-2000:]}")
    return dict(json.loads(out.strip().splitlines()[-1]))


# raw pyzmq --------------------------------------------------------------------------------


def _role_raw_pull(spec: dict[str, int]) -> dict[str, float]:
    with zmq.Context() as context, context.socket(zmq.PULL) as pull:
        pull.linger = 0
        pull.bind(f"tcp://127.0.0.1:{spec['port']}")
        print(json.dumps({"ready": 1}), flush=True)
        first = pull.recv()
        started = time.perf_counter()
        received = 1
        del first
        while received < spec["frames"]:
            pull.recv(copy=False)
            received += 1
        return {"elapsed_s": time.perf_counter() - started, "frames": received}


def _role_raw_push(spec: dict[str, int]) -> dict[str, float]:
    payload, _ = _payload(spec["batch"], spec["size"])
    with zmq.Context() as context, context.socket(zmq.PUSH) as push:
        push.linger = -1
        push.connect(f"tcp://127.0.0.1:{spec['port']}")
        for _ in range(spec["frames"]):
            push.send(payload, copy=False)
    return {}


def _role_raw_echo(spec: dict[str, int]) -> dict[str, float]:
    with zmq.Context() as context, context.socket(zmq.ROUTER) as router:
        router.linger = 0
        router.bind(f"tcp://127.0.0.1:{spec['port']}")
        print(json.dumps({"ready": 1}), flush=True)
        for _ in range(spec["round_trips"]):
            ident, _frame = router.recv_multipart(copy=False)
            router.send_multipart([ident, b"ack"])
    return {}


def _raw(records: int, batch: int, size: int, round_trips: int) -> tuple[float, float]:
    frames = records // batch
    port = _free_port()
    pull = _spawn("raw-pull", {"port": port, "frames": frames})
    assert pull.stdout is not None
    pull.stdout.readline()
    push = _spawn("raw-push", {"port": port, "frames": frames, "batch": batch, "size": size})
    _result(push)
    elapsed = _result(pull)["elapsed_s"]
    rate = (frames - 1) * batch / elapsed

    port = _free_port()
    echo = _spawn("raw-echo", {"port": port, "round_trips": round_trips})
    assert echo.stdout is not None
    echo.stdout.readline()
    payload, _ = _payload(batch, size)
    rtts = []
    with zmq.Context() as context, context.socket(zmq.DEALER) as dealer:
        dealer.linger = 0
        dealer.connect(f"tcp://127.0.0.1:{port}")
        for _ in range(round_trips):
            started = time.perf_counter()
            dealer.send(payload, copy=False)
            dealer.recv()
            rtts.append((time.perf_counter() - started) * 1000)
    _result(echo)
    return rate, float(np.percentile(rtts, 99))


# shuffle ----------------------------------------------------------------------------------


class _CountingAcks:
    """Counts acknowledged records and wakes whoever waits for a total."""

    def __init__(self) -> None:
        self.records = 0
        self._changed = threading.Condition()

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int:
        with self._changed:
            self.records += last_offset - first_offset + 1
            self._changed.notify_all()
            return last_offset + 1

    def wait_for(self, total: int, timeout_s: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.records >= total, timeout_s):
                raise RuntimeError(f"only {self.records} of {total} records ACKed in {timeout_s} s")


def _settings(worker: str, spec: dict[str, int], *, receiver: bool) -> ShuffleSettings:
    batch = spec["batch"]
    queue: dict[str, Any]
    if receiver:
        queue = {
            "queue_capacity_records": 64 * batch,
            "low_watermark_records": 32 * batch,
            "high_watermark_records": 48 * batch,
        }
    else:
        queue = {
            "queue_capacity_records": batch,
            "low_watermark_records": 1,
            "high_watermark_records": batch,
        }
    return ShuffleSettings(
        job=JOB,
        worker_id=worker,
        policy=ShufflePolicy.ADVANCED,
        overflow_capacity_records=32 * batch,
        batch_records=batch,
        credit_window_records=16 * batch,
        ack_timeout_ms=60_000,
        data_port=spec[f"{worker}_data"],
        event_port=spec[f"{worker}_event"],
        **queue,
    )


def _peer(worker: str, spec: dict[str, int]) -> PeerInfo:
    return PeerInfo(
        worker,
        f"tcp://127.0.0.1:{spec[f'{worker}_data']}",
        f"tcp://127.0.0.1:{spec[f'{worker}_event']}",
        incarnation=1,
    )


def _role_receiver(spec: dict[str, int]) -> dict[str, float]:
    directory = MemberDirectory([_peer("sender", spec)])
    node = ShuffleNode(
        _settings("receiver", spec, receiver=True), _CountingAcks(), StaticMembership(directory)
    )
    stop = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    cpu = time.process_time()
    with node:
        print(json.dumps({"ready": 1}), flush=True)
        while not stop.is_set():
            batch = node.take(spec["batch"], timeout_s=0.05)
            if batch is not None:
                node.ack(batch)
        stats = node.stats().forwarding
    return {"records_received": stats.records_received, "cpu_s": time.process_time() - cpu}


def _role_sender(spec: dict[str, int]) -> dict[str, float]:
    batch, size = spec["batch"], spec["size"]
    directory = MemberDirectory([_peer("receiver", spec)])
    acks = _CountingAcks()
    node = ShuffleNode(_settings("sender", spec, receiver=False), acks, StaticMembership(directory))
    payload, bounds = _payload(batch, size)
    partitions = np.zeros(batch, dtype=np.int32)
    stamps = np.zeros(batch, dtype=np.int64)
    offset = 0

    def put() -> None:
        nonlocal offset
        columns = RecordColumns(
            "t",
            partitions,
            np.arange(offset, offset + batch, dtype=np.int64),
            stamps,
            payload,
            bounds,
        )
        offset += batch
        if node.put(columns, timeout_s=120) is not None:
            raise RuntimeError("the sender could not place a batch within 120 s")

    with node:
        deadline = time.monotonic() + 30
        while node.forwarding.stats().events_received == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("no state event from the receiver within 30 s")
            time.sleep(0.01)
        put()  # fills the local queue: everything after it is forwarded
        cpu = time.process_time()
        started = time.perf_counter()
        for _ in range(spec["records"] // batch):
            put()
        acks.wait_for(spec["records"], 300)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        latencies = []
        for _ in range(spec["latency_batches"]):
            target = acks.records + batch
            t0 = time.perf_counter()
            put()
            acks.wait_for(target, 60)
            latencies.append((time.perf_counter() - t0) * 1000)
        stats = node.forwarding.stats()
    return {
        "records_per_s": spec["records"] / elapsed,
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "p50_ms": float(np.percentile(latencies, 50)),
        "p99_ms": float(np.percentile(latencies, 99)),
        "batches_sent": stats.batches_sent,
        "bytes_sent": stats.bytes_sent,
        "timed_out": stats.batches_timed_out,
        "rejected": stats.batches_rejected,
    }


def _forwarded(records: int, batch: int, size: int, latency_batches: int) -> dict[str, float]:
    spec = {
        "records": records,
        "batch": batch,
        "size": size,
        "latency_batches": latency_batches,
        "sender_data": _free_port(),
        "sender_event": _free_port(),
        "receiver_data": _free_port(),
        "receiver_event": _free_port(),
    }
    receiver = _spawn("receiver", spec, stdin=True)
    assert receiver.stdout is not None and receiver.stdin is not None
    receiver.stdout.readline()
    try:
        sender = _result(_spawn("sender", spec))
    finally:
        receiver.stdin.close()
        received = _result(receiver)
    return sender | {"receiver_cpu_s": received["cpu_s"]}


ROLES = {
    "raw-pull": _role_raw_pull,
    "raw-push": _role_raw_push,
    "raw-echo": _role_raw_echo,
    "receiver": _role_receiver,
    "sender": _role_sender,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--batch-records", type=int, default=1_000)
    parser.add_argument("--latency-batches", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs each")
    parser.add_argument("--table2", action="store_true", help="run the Table 2 experiment")
    parser.add_argument("--out-dir", default="docs/img", help="where --table2 writes")
    parser.add_argument("--quick", action="store_true", help="--table2 with a short run")
    parser.add_argument("--runs", type=int, default=1, help="--table2: runs of each policy")
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        print(json.dumps(ROLES[args.role](json.loads(args.spec))), flush=True)
        return
    if args.table2:
        from benchmarks.table2 import run_table2

        run_table2(Path(args.out_dir), quick=args.quick, runs=args.runs)
        return
    records, batch, size = args.records, args.batch_records, args.record_bytes
    raw_runs = [_raw(records, batch, size, args.latency_batches) for _ in range(args.repeats)]
    raw_rate = max(rate for rate, _ in raw_runs)
    raw_p99 = min(p99 for _, p99 in raw_runs)
    runs = [_forwarded(records, batch, size, args.latency_batches) for _ in range(args.repeats)]
    best = max(runs, key=lambda r: r["records_per_s"])
    p99 = min(r["p99_ms"] for r in runs)
    rate = best["records_per_s"]
    all_runs = ", ".join(f"{r['records_per_s']:,.0f}" for r in runs)
    print(f"{records:,} records of {size} B, {batch} records per frame, best of {args.repeats}")
    print(f"plain pyzmq PUSH/PULL:        {raw_rate:>13,.0f} records/s")
    print(
        f"ShuffleNode → ShuffleNode:    {rate:>13,.0f} records/s ACKed at the origin "
        f"(all runs: {all_runs}; "
        f"CPU of the {best['elapsed_s']:.2f} s run: sender {best['cpu_s']:.2f} s, "
        f"receiver {best['receiver_cpu_s']:.2f} s incl. its latency phase)"
    )
    print(f"ratio forwarded/raw:          {rate / raw_rate:.3f}")
    print(
        f"forwarded batch put→ACK:      p50 {best['p50_ms']:.2f} ms, p99 {p99:.2f} ms "
        f"(plain pyzmq round trip of the same frame: p99 {raw_p99:.2f} ms)"
    )
    print(
        f"forwarded_records_per_s={rate:.0f} raw_records_per_s={raw_rate:.0f} "
        f"ratio={rate / raw_rate:.3f} p99_ms={p99:.2f}"
    )


if __name__ == "__main__":
    main()
