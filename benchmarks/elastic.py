"""One model on elastic workers: the pause of a scaling action, torchft against
torch.distributed.elastic, with every record id checked.

Run: .venv/bin/python -m benchmarks.elastic [--rate 1200] [--hold-s 20] [--records N]
     [--json PATH] [--keep-dir DIR] [--runs torchft,torchelastic,fixed]

On the embedded broker, three runs of the same records (a producer thread writes
``--records`` of the demo's 200-byte CTR records, ids 0.., at a constant ``--rate``
records/s into a ``--partitions`` topic, one topic per run with the same content), each
a job of
``streamtrain worker --assignment shards`` processes training the demo's MMoE
(``benchmarks/elastic_app.py``) with the shard coordinator (``streamtrain lag run
--shards-job``):

* ``torchft``: ``--engine torchft`` with ``streamtrain lighthouse`` (``--min-replicas
  2``); workers 2 -> 4 (two joiners started together) -> 2 (the two joiners drained:
  SIGTERM, they finish their shards and leave) -> 3 -> a kill -9 of the third joiner
  mid-run (3 -> 2);
* ``torchelastic``: ``--engine torchelastic`` under one ``torchrun --nnodes 1:4``
  agent per worker (c10d rendezvous, ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, a
  checkpoint every ``--checkpoint-every`` steps, ``last_call_timeout=1``): the same
  actions (a leave is a SIGTERM to the agents; a worker hands its shards back at once on
  SIGTERM, which under torchrun is also how every restart begins; the kill -9 hits the
  worker process, which its agent restarts);
* ``fixed``: ``--engine torchft`` with 3 workers throughout.

``--hold-s`` seconds pass between actions. Once every record is produced the job drains
until every record is trained and its offset committed. Measured per run:
the pause of each action (the largest gap between committed steps of the workers that
stay, from the action until the next), ``join_to_first_step_s`` (a joiner's process
start to its first committed step), ``lost`` (produced ids that no step of the final
model trained: rolled-back steps do not count), ``rolled_back_committed`` (records
acknowledged in a step the final model does not contain), the final model's click AUC on
a held-out sample. The last line:
``torchft_pause_s=... torchelastic_pause_s=... pause_ratio=... lost=...
rolled_back_committed=... join_to_first_step_s=... auc_delta=...`` where the pauses are
the largest over the scale-up and drained scale-down actions, ``pause_ratio`` is
torchft's over torchelastic's, ``lost`` and ``rolled_back_committed`` are summed over the
runs, ``join_to_first_step_s`` is torchft's largest, ``auc_delta`` is torchft's AUC less
the fixed run's. Timing on a shared 2-core machine is noisy: repeat, report the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

import torch
from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.elastic_metrics import (
    Incarnation,
    lost_ids,
    pause_s,
    read_run,
    rolled_back,
    rolled_back_acked,
)
from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import KafkaSettings
from streamtrain.elastic.lighthouse import LighthouseProcess, LighthouseSettings
from streamtrain.elastic.statecodec import decode
from streamtrain.ingest.example import SyntheticCtr, split_records
from streamtrain.ingest.mmoe import MMoE, click_auc
from streamtrain.kafka import create_topic
from streamtrain.process import stop_child, stop_children

REPO = Path(__file__).resolve().parents[1]
SEED = 11


class Traffic(threading.Thread):
    """Constant-rate producer of the same CTR records (ids 0..) into one topic."""

    def __init__(
        self, kafka: KafkaSettings, topic: str, partitions: int, rate: float, total: int
    ) -> None:
        super().__init__(name="traffic", daemon=True)
        self.topic, self.partitions, self.rate, self.total = topic, partitions, rate, total
        self.producer = Producer(kafka.confluent_config(**{"linger.ms": 20}))
        self.source = SyntheticCtr(seed=SEED)
        self.stopping = threading.Event()
        self.produced = 0

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopping.is_set() and self.produced < self.total:
            due = min(self.total, int((time.monotonic() - started) * self.rate))
            if due > self.produced:
                table = self.source.sample(due - self.produced, first_id=self.produced, seed=SEED)
                for i, value in enumerate(split_records(table), start=self.produced):
                    self.producer.produce(self.topic, value, partition=i % self.partitions)
                self.produced = due
                self.producer.poll(0)
            time.sleep(0.05)
        self.producer.flush(30)

    def finish(self) -> int:
        """Wait until every record was produced; how many."""
        self.join()
        return self.produced

    def stop(self) -> None:
        self.stopping.set()
        self.join()


class Run:
    """One job: coordinator, lighthouse (torchft), workers; its actions and files."""

    def __init__(self, kind: str, broker: EmbeddedBroker, root: Path, args: argparse.Namespace):
        self.kind, self.args = kind, args
        self.kafka = broker.kafka_settings()
        self.bootstrap = broker.bootstrap
        self.name = f"elastic-{kind}-{uuid.uuid4().hex[:6]}"
        self.topic = f"{self.name}-data"
        self.dir = root / kind
        self.files = self.dir / "files"
        self.files.mkdir(parents=True)
        self.logs: list[IO[bytes]] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.started_at: dict[str, float] = {}
        self.actions: list[dict[str, Any]] = []
        self.rdzv_port = free_port()
        create_topic(self.kafka, self.topic, args.partitions)
        self.lighthouse: LighthouseProcess | None = None
        if kind != "torchelastic":
            self.lighthouse = LighthouseProcess(
                LighthouseSettings(port=0, min_replicas=2), log_path=self.dir / "lighthouse.log"
            )
            self.lighthouse.start()
        self.control = self._spawn(
            "control",
            [
                sys.executable, "-m", "streamtrain", "lag", "run", "--bootstrap", self.bootstrap,
                "--group", self.name, "--topic", self.topic, "--tick-s", "1",
                "--web-port", str(free_port()), "--shards-job", self.name,
                "--shard-records", "256", "--shard-max-wait-s", "0.5",
                "--app-id", f"{self.name}-control", "--data-dir", str(self.dir / "control"),
                "--reports-topic", f"{self.name}.reports", "--alerts-topic", f"{self.name}.alerts",
            ],
        )  # fmt: skip
        self.traffic = Traffic(self.kafka, self.topic, args.partitions, args.rate, args.records)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        log = (self.dir / f"{name}.log").open("ab")
        self.logs.append(log)
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
            cwd=REPO, start_new_session=True,
        )  # fmt: skip

    def start(self, worker: str) -> None:
        worker_argv = [
            "worker", "--bootstrap", self.bootstrap, "--topic", self.topic,
            "--group", self.name, "--worker-id", worker, "--assignment", "shards",
            "--entry", "benchmarks.elastic_app:make", "--app-dir", str(REPO),
            "--batch-records", str(self.args.batch_records), "--throughput-topic", "",
            "--step-wait-s", "0.1",
            # under torchrun a SIGTERM is a restart of the group as often as a leave:
            # hand the shards back at once rather than train on while the group stops
            "--drain-timeout-s", "0" if self.kind == "torchelastic" else "8",
        ]  # fmt: skip
        env = {"ELASTIC_BENCH_DIR": str(self.files), "STREAMTRAIN_WORKER_ID": worker,
               "PYTHONPATH": str(REPO)}  # fmt: skip
        if self.kind == "torchelastic":
            argv = [
                str(Path(sys.executable).with_name("torchrun")), "--nnodes", "1:4",
                "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.1:{self.rdzv_port}", "--rdzv-id", self.name,
                "--max-restarts", "100", "--monitor-interval", "0.5",
                "--rdzv-conf", "last_call_timeout=1",
                "-m", "streamtrain", *worker_argv, "--engine", "torchelastic",
                "--checkpoint-dir", str(self.dir / "checkpoints"),
                "--checkpoint-every-steps", str(self.args.checkpoint_every),
            ]  # fmt: skip
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        else:
            assert self.lighthouse is not None and self.lighthouse.address is not None
            argv = [sys.executable, "-m", "streamtrain", "--log-level", self.args.log_level,
                    *worker_argv, "--engine", "torchft",
                    "--lighthouse", self.lighthouse.address]  # fmt: skip
        self.started_at[worker] = time.time()
        self.workers[worker] = self._spawn(worker, argv, env)

    def act(self, kind: str, workers: list[str], staying: list[str]) -> None:
        at = time.time()
        if kind == "up":
            for worker in workers:
                self.start(worker)
        elif kind == "drain":
            for worker in workers:
                self.workers[worker].send_signal(signal.SIGTERM)
            for worker in workers:
                self.workers[worker].wait(120)
        elif kind == "kill":
            for worker in workers:
                self._kill_worker_process(worker)
        self.actions.append({"kind": kind, "workers": workers, "staying": staying, "t": at})
        print(f"  {self.kind}: {kind} {workers} at +{at - self.t0:.1f} s", flush=True)

    def _kill_worker_process(self, worker: str) -> None:
        process = self.workers[worker]
        if self.kind != "torchelastic":
            process.kill()
            return
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        for child in children:  # the agent's worker process: the agent restarts the group
            os.kill(int(child), signal.SIGKILL)

    def committed(self) -> int:
        consumer = Consumer(self.kafka.confluent_config(**{"group.id": self.name}))
        try:
            found = consumer.committed(
                [TopicPartition(self.topic, p) for p in range(self.args.partitions)], timeout=10
            )
        finally:
            consumer.close()
        return sum(max(tp.offset, 0) for tp in found)

    def wait_training(self, workers: list[str], timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready = {i.worker for i in read_run(self.files) if any(r.committed for r in i.rounds)}
            if set(workers) <= ready:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.kind}: {workers} did not start training in {timeout_s} s")

    def drain(self, produced: int, timeout_s: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.committed() >= produced:
                return time.monotonic() - started
            time.sleep(1.0)
        return float("nan")

    def close(self) -> None:
        self.traffic.stop()
        stop_children([(p, f"worker {w}") for w, p in self.workers.items()], 60)
        stop_child(self.control, "the control app", 30)
        if self.lighthouse is not None:
            self.lighthouse.stop()
        for log in self.logs:
            log.close()

    def scenario(self, hold_s: float, actions: list[tuple[str, list[str], list[str]]]) -> int:
        self.t0 = time.time()
        self.traffic.start()
        for worker in ("w1", "w2"):
            self.start(worker)
        self.wait_training(["w1", "w2"])
        time.sleep(hold_s / 2)
        for kind, workers, staying in actions:
            self.act(kind, workers, staying)
            if kind == "up":
                self.wait_training(workers)
            time.sleep(hold_s)
        produced = self.traffic.finish()
        drain_s = self.drain(produced, 300.0)
        print(f"  {self.kind}: {produced} records produced, drained in {drain_s:.1f} s",
              flush=True)  # fmt: skip
        self.end_t = time.time()
        return produced


def final_auc(files: Path) -> float:
    """The click AUC of the job's final model (the newest step any worker saved)."""
    states = [decode(p.read_bytes()) for p in files.glob("*.final")]
    if not states:
        return float("nan")
    state = max(states, key=lambda s: s["step"])
    model = MMoE()
    model.load_state_dict(state["model"])
    table = SyntheticCtr(seed=SEED).sample(20_000, first_id=10**9, seed=SEED + 1)
    return click_auc(model, table)


def measure(run: Run, produced: int) -> dict[str, Any]:
    incarnations: list[Incarnation] = read_run(run.files)
    gone = rolled_back(incarnations)
    pauses = []
    for i, action in enumerate(run.actions):
        end = run.actions[i + 1]["t"] if i + 1 < len(run.actions) else run.end_t
        pauses.append(round(pause_s(incarnations, set(action["staying"]), action["t"], end), 3))
    joins = []
    for worker, started in run.started_at.items():
        firsts = [r.t for inc in incarnations if inc.worker == worker for r in inc.rounds
                  if r.committed]  # fmt: skip
        if worker not in ("w1", "w2") and firsts:
            joins.append(round(min(firsts) - started, 2))
    return {
        "produced": produced,
        "actions": [a["kind"] for a in run.actions],
        "pauses_s": pauses,
        "join_to_first_step_s": joins,
        "lost": lost_ids(produced, incarnations, gone),
        "rolled_back_steps": len(gone),
        "rolled_back_committed": rolled_back_acked(incarnations, gone),
        "auc": round(final_auc(run.files), 5),
        "incarnations": len(incarnations),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1200.0, help="records/s")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch-records", type=int, default=256)
    parser.add_argument("--hold-s", type=float, default=20.0)
    parser.add_argument("--checkpoint-every", type=int, default=20)
    parser.add_argument("--records", type=int, default=None,
                        help="records per run (default: --rate x 5 x --hold-s)")  # fmt: skip
    parser.add_argument("--runs", default="torchft,torchelastic,fixed")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep-dir", type=Path, default=None, help="keep the runs' files here")
    parser.add_argument("--log-level", default="WARNING", help="the workers' --log-level")
    args = parser.parse_args(argv)
    args.records = args.records or int(args.rate * 5 * args.hold_s)
    torch.set_num_threads(1)
    scaling = [
        ("up", ["w3", "w4"], ["w1", "w2"]),
        ("drain", ["w3", "w4"], ["w1", "w2"]),
        ("up", ["w5"], ["w1", "w2"]),
        ("kill", ["w5"], ["w1", "w2"]),
    ]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp, EmbeddedBroker() as broker:
        root = args.keep_dir or Path(tmp)
        chosen = args.runs.split(",")
        for kind, actions in (("torchft", scaling), ("torchelastic", scaling), ("fixed", [])):
            if kind not in chosen:
                continue
            run = Run(kind, broker, root, args)
            try:
                if kind == "fixed":
                    run.t0 = time.time()
                    run.traffic.start()
                    for worker in ("w1", "w2", "w3"):
                        run.start(worker)
                    produced = run.traffic.finish()
                    run.drain(produced, 300.0)
                    run.end_t = time.time()
                else:
                    produced = run.scenario(args.hold_s, actions)
            finally:
                run.close()
            results[kind] = measure(run, produced)
            print(f"  {kind}: {json.dumps(results[kind])}", flush=True)
    nothing: dict[str, Any] = {"pauses_s": [float("nan")], "join_to_first_step_s": [],
                               "auc": float("nan")}  # fmt: skip
    ft, te = results.get("torchft", nothing), results.get("torchelastic", nothing)
    ft_pause = max(ft["pauses_s"][:3])  # the scale-ups and the drained scale-down
    te_pause = max(te["pauses_s"][:3])
    summary = {
        "torchft_pause_s": ft_pause,
        "torchelastic_pause_s": te_pause,
        "pause_ratio": round(ft_pause / te_pause, 3) if te_pause > 0 else float("nan"),
        "lost": sum(r["lost"] for r in results.values()),
        "rolled_back_committed": sum(r["rolled_back_committed"] for r in results.values()),
        "join_to_first_step_s": max(ft["join_to_first_step_s"] or [float("nan")]),
        "auc_delta": round(ft["auc"] - results.get("fixed", nothing)["auc"], 4),
    }
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": results, "summary": summary}, indent=2))
    print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 0 if summary["lost"] == 0 and summary["rolled_back_committed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
