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
import tempfile
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


# KALE Table 2 -----------------------------------------------------------------------------


def _table2(out_dir: Path, *, quick: bool, runs: int = 1) -> None:
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
    table = header + "\n\n".join(tables) + "\n"
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
    by = {r.policy.value: r for r in results}
    print(
        " ".join(
            [
                f"total_mb_none={by['none'].wire.total / 1e6:.1f}",
                f"total_mb_basic={by['basic'].wire.total / 1e6:.1f}",
                f"total_mb_advanced={by['advanced'].wire.total / 1e6:.1f}",
                f"basic_vs_none_pct={_pct(by['basic'].wire.total, by['none'].wire.total):+.1f}",
                "advanced_vs_basic_pct="
                f"{_pct(by['advanced'].wire.total, by['basic'].wire.total):+.1f}",
                f"auc_none={by['none'].auc.during:.4f}",
                f"auc_basic={by['basic'].auc.during:.4f}",
                f"auc_advanced={by['advanced'].auc.during:.4f}",
            ]
        )
    )


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
        "| policy | total MB on the wire (Kafka rx + tx + forwarded + answers + events) "
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
            f"{w.kafka_tx / 1e6:.2f} + {w.forwarded / 1e6:.2f} + {w.answers / 1e6:.3f} + "
            f"{w.state_events / 1e6:.3f}) | {result.cpu_pct:.1f} | "
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
        "| records received from peers | CPU s in MMoE steps / all (less evaluations) |",
        "|---|---:|---:|---:|---:|",
    ]
    for result in results:
        t = {
            k: sum(w[k] for w in result.per_worker.values())
            for k in next(iter(result.per_worker.values()))
        }
        lines.append(
            f"| {result.policy.value} | {t['trained_records']:,.0f} | {t['records_sent']:,.0f} "
            f"({t['batches_sent']:,.0f}; {t['batches_rejected']:,.0f}, "
            f"{t['batches_timed_out']:,.0f}) | {t['records_received']:,.0f} | "
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
        _table2(Path(args.out_dir), quick=args.quick, runs=args.runs)
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
