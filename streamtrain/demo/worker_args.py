"""The demo's worker pool command line and environment (pure).

Owned here: :func:`worker_argv` (``streamtrain worker --entry
streamtrain.demo.trainer:demo_app ...`` for a run), :func:`worker_env` (the Kafka
connection plus the :class:`~streamtrain.demo.trainer.DemoWorkerConfig` the trainer
reads) and the named constants behind the numbers in them.

The demo's consumer groups use short timeouts (:data:`FAST_GROUP_CONFIG`): a
compressed day cannot wait librdkafka's default 45 s for a dead worker's partitions,
so a worker killed mid-day is noticed within a few wall seconds. The workers and the
demo's ScaleCommand consumer share them.
"""

from __future__ import annotations

from pathlib import Path

from streamtrain.config import KafkaSettings
from streamtrain.demo.children import DemoNames, kafka_env, streamtrain_command
from streamtrain.demo.trainer import DemoWorkerConfig
from streamtrain.errors import ConfigError

__all__ = [
    "ADMISSION_TIMEOUT_S",
    "FAST_GROUP_CONFIG",
    "HEARTBEAT_INTERVAL_MS",
    "ONE_MODEL_BATCH_RECORDS",
    "SESSION_TIMEOUT_MS",
    "SHUFFLE_HEARTBEAT_INTERVAL_MS",
    "SHUFFLE_HEARTBEAT_TIMEOUT_MS",
    "STEP_WAIT_S",
    "THROUGHPUT_SAMPLE_INTERVAL_S",
    "WORKER_BATCH_RECORDS",
    "WORKER_NICENESS",
    "pool_size_path",
    "states_topic",
    "worker_argv",
    "worker_env",
]

# Records per training batch (a worker's queue must hold at least one).
WORKER_BATCH_RECORDS = 128
# ... with one model (torchft): every round pays for a quorum and the all-reduces (about
# 0.1 s with 2 workers, 0.4 s with 8, measured on the 2-core machine), so a round takes
# up to twice the records (0.64 s at 400 records/s) to spend less of it waiting.
ONE_MODEL_BATCH_RECORDS = 256
# Consumer-group liveness: a member silent for 6 s is out; heartbeats every 0.5 s.
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 500
FAST_GROUP_CONFIG = (
    ("session.timeout.ms", str(SESSION_TIMEOUT_MS)),
    ("heartbeat.interval.ms", str(HEARTBEAT_INTERVAL_MS)),
)
# Shuffle peers: a heartbeat every 0.5 s, a peer silent for 3 s is dropped.
SHUFFLE_HEARTBEAT_INTERVAL_MS = 500
SHUFFLE_HEARTBEAT_TIMEOUT_MS = 3_000
# The workers run at nice 10, below the traffic generator, the broker and the control
# app. On one machine they stand in for a pool of accelerators and the others for
# machines of their own. At the same priority, 6-8 workers on the 2-core machine starved
# the generator: in the evening it fell up to 38 wall seconds behind its plan, the
# planner read the delay as a drop in traffic (6 -> 3 workers at the peak) and the
# catch-up as a burst. `nice` replaces itself with the worker, so the pid is the worker's.
WORKER_NICENESS = 10
# One throughput sample a wall second (the control app buckets them, see control_args).
THROUGHPUT_SAMPLE_INTERVAL_S = 1


def pool_size_path(run_dir: Path) -> Path:
    """The file the pool writes its size to and the workers read (``--pool-size-file``)."""
    return run_dir / "pool-size"


# One model (torchft): a worker with no batch within this wait steps empty, so the
# others' all-reduce never waits long for it (the engine's default).
STEP_WAIT_S = 0.2
# Two-phase start: a new worker waits this long at most for the executor's ADMITTED.
ADMISSION_TIMEOUT_S = 60
# A leaving shard worker finishes its current shards for this long at most (below the
# pool's 10 s grace before SIGKILL).
DRAIN_TIMEOUT_S = 5


def states_topic(names: DemoNames) -> str:
    """Where the demo's workers say STARTING / READY / DRAINING / LEFT."""
    return f"{names.job}.worker-states"


def worker_argv(
    names: DemoNames,
    *,
    run_dir: Path,
    shuffle: str,
    queue_records: int,
    assignment: str = "group",
    engine: str = "none",
    lighthouse: str | None = None,
    niceness: int = WORKER_NICENESS,
) -> list[str]:
    """One demo worker's argv: ``streamtrain worker`` on the run's data topic and job
    (``--shuffle none`` with shards: free workers pulling shards balance hot partitions),
    training on ``engine`` (``torchft`` needs the ``lighthouse`` address), at
    ``niceness`` (:data:`WORKER_NICENESS` by default)."""
    engine_args: tuple[str, ...] = ("--engine", engine)
    if engine == "torchft":
        if lighthouse is None:
            raise ConfigError("the demo's torchft workers need the lighthouse's address")
        engine_args += ("--lighthouse", lighthouse, "--step-wait-s", str(STEP_WAIT_S))
    command = streamtrain_command(
        "worker",
        "--topic",
        names.topic,
        "--group",
        names.job,
        "--entry",
        "streamtrain.demo.trainer:demo_app",
        "--batch-records",
        str(WORKER_BATCH_RECORDS if engine == "none" else ONE_MODEL_BATCH_RECORDS),
        "--queue-records",
        str(queue_records),
        "--shuffle",
        "none" if assignment == "shards" else shuffle,
        "--assignment",
        assignment,
        "--states-topic",
        states_topic(names),
        "--admission-timeout-s",
        str(ADMISSION_TIMEOUT_S),
        "--drain-timeout-s",
        str(DRAIN_TIMEOUT_S),
        "--shuffle-heartbeat-interval-ms",
        str(SHUFFLE_HEARTBEAT_INTERVAL_MS),
        "--shuffle-heartbeat-timeout-ms",
        str(SHUFFLE_HEARTBEAT_TIMEOUT_MS),
        "--pool-size-file",
        str(pool_size_path(run_dir)),
        "--throughput-topic",
        names.control("throughput"),
        "--sample-interval-s",
        str(THROUGHPUT_SAMPLE_INTERVAL_S),
        "--session-timeout-ms",
        str(SESSION_TIMEOUT_MS),
        "--heartbeat-interval-ms",
        str(HEARTBEAT_INTERVAL_MS),
        *engine_args,
    )
    return ["nice", "-n", str(niceness), *command]


# torchft's manager logs every quorum and commit at INFO: a line a step per worker.
ENGINE_LOG_FILTER = "warn"


def worker_env(kafka: KafkaSettings, config: DemoWorkerConfig) -> dict[str, str]:
    """A demo worker's environment: the connection, the trainer's settings, and the
    engine's log filter (torchft's Rust side reads ``RUST_LOG``)."""
    return {**kafka_env(kafka), **config.to_env(), "RUST_LOG": ENGINE_LOG_FILTER}
