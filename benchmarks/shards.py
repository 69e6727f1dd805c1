"""The shard coordinator at scale: table value size, heartbeat and grant cost, memory.

Run: .venv/bin/python -m benchmarks.shards [--partitions 10000] [--workers 64]
     [--backlog 1000000000] [--rounds 60] [--e2e [--e2e-records 5000000]]

**Pure** (always): the control app's :class:`ShardCoordinator` with ``--partitions``
partitions, each with a backlog of ``--backlog`` records, and ``--workers`` workers,
each a real :class:`~streamtrain.shards.client.ShardClient` (the worker side): every
round, every worker sends its update through the wire encoding (a heartbeat listing what
it holds, done reports, a wish for more), applies the answer, "trains" the shards it
holds (tags the records, acknowledges them), and the coordinator ticks over every
partition and commits. The same run is made first with a backlog of 10^6 records per
partition (the baseline): what the table holds must not grow with the backlog.
Measured: the largest table value written (``max_value_bytes``, JSON bytes: one Kafka
message of the changelog), the 99th percentile of the time to handle a heartbeat that
grants nothing (``heartbeat_p99_ms``) and one that grants shards (``grant_p99_ms``), of
a tick over every partition (``tick_p99_ms``), and the peak resident memory
(``rss_mib``). Goals: ``max_value_bytes`` <= 65,536 whatever the backlog,
``heartbeat_p99_ms`` <= 1, ``grant_p99_ms`` <= 1, ``rss_mib`` <= 300.

**End to end** (``--e2e``): the embedded broker, a 4-partition topic with
``--e2e-records`` records waiting before anything starts, ``streamtrain lag run
--shards-job`` and two ``streamtrain worker --assignment shards`` processes that record
every id they train; measured: the largest value of the shard table's changelog
(``e2e_max_value_bytes``, goal <= 64 KiB), whether the control app stayed up, the time
to drain, and every id trained (``e2e_lost``, goal 0).

The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from streamtrain import wire
from streamtrain.control.shard_coordinator import ShardCoordinator, ShardJobSettings
from streamtrain.shards import ShardClient, ShardSettings

TOPIC = "clicks"


def percentile_ms(samples_s: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples_s) * 1000, q)) if samples_s else float("nan")


def run_pure(partitions: int, workers: int, backlog: int, rounds: int) -> dict[str, float]:
    """One run of the pure coordinator (module docstring); its measurements."""
    job = ShardJobSettings(job="bench", topics=(TOPIC,), book=ShardSettings())
    coordinator = ShardCoordinator(job)
    coordinator.book.restore([], now_s=0.0)
    highs = {(TOPIC, p): backlog for p in range(partitions)}
    starts = {(TOPIC, p): 0 for p in range(partitions)}
    clients = [ShardClient("bench", f"w{i:03d}", prefetch_shards=4) for i in range(workers)]
    heartbeat_s: list[float] = []
    grant_s: list[float] = []
    tick_s: list[float] = []
    max_value = 0
    now = 1.0

    def persist() -> None:
        nonlocal max_value
        for value in coordinator.book.take_dirty().values():
            max_value = max(max_value, len(json.dumps(value, separators=(",", ":"))))

    for round_ in range(rounds):
        now += 0.25
        started = time.thread_time()
        coordinator.tick(highs, starts, now)
        tick_s.append(time.thread_time() - started)
        persist()
        for client in clients:
            update = client.update(now + round_)  # due every round
            if update is None:
                continue
            data = wire.encode(update)
            started = time.thread_time()
            answer = coordinator.handle(data, now)
            took = time.thread_time() - started
            (grant_s if answer is not None and answer.shards else heartbeat_s).append(took)
            persist()
            if answer is not None:
                client.apply(answer)
            if round_ % 2:
                continue  # trains one shard every other round: a heartbeat in between
            for grant in client.holdings.grants()[:1]:
                shard = grant.shard
                offsets = np.arange(shard.start_offset, shard.end_offset, dtype=np.int64)
                client.ack(client.accept(shard.topic, shard.partition, offsets))
        positions = coordinator.book.committable()
        coordinator.book.mark_committed(positions)
        persist()
    assert coordinator.failed == 0, "an update or tick raised"
    committed = sum(base for base, _, _ in coordinator.book.positions().values())
    return {
        "max_value_bytes": max_value,
        "heartbeat_p99_ms": percentile_ms(heartbeat_s, 99),
        "heartbeat_p50_ms": percentile_ms(heartbeat_s, 50),
        "grant_p99_ms": percentile_ms(grant_s, 99),
        "tick_p99_ms": percentile_ms(tick_s, 99),
        "tick_p50_ms": percentile_ms(tick_s, 50),
        "heartbeats": len(heartbeat_s),
        "grants": len(grant_s),
        "committed_records": committed,
    }


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--backlog", type=int, default=10**9)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--e2e", action="store_true", help="also the embedded-broker run")
    parser.add_argument("--e2e-records", type=int, default=5_000_000)
    args = parser.parse_args(argv)

    results = {}
    for backlog in (10**6, args.backlog):
        print(
            f"pure coordinator: {args.partitions} partitions x {backlog:,} records, "
            f"{args.workers} workers, {args.rounds} rounds",
            file=sys.stderr,
            flush=True,
        )
        results[backlog] = run_pure(args.partitions, args.workers, backlog, args.rounds)
        print(f"  {results[backlog]}", file=sys.stderr, flush=True)
    big, small = results[args.backlog], results[10**6]
    line = {
        "max_value_bytes": big["max_value_bytes"],
        "max_value_bytes_1e6": small["max_value_bytes"],
        "heartbeat_p99_ms": round(big["heartbeat_p99_ms"], 3),
        "grant_p99_ms": round(big["grant_p99_ms"], 3),
        "tick_p99_ms": round(big["tick_p99_ms"], 1),
        "tick_p50_ms": round(big["tick_p50_ms"], 2),
        "heartbeats": big["heartbeats"],
        "grants": big["grants"],
        "committed_records": big["committed_records"],
        "rss_mib": round(rss_mib(), 1),
    }
    if args.e2e:
        from benchmarks.shards_e2e import run_e2e

        line.update(run_e2e(args.e2e_records))
    line.update(partitions=args.partitions, workers=args.workers, backlog=args.backlog)
    print(" ".join(f"{k}={v}" for k, v in line.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
