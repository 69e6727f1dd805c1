"""``streamtrain worker``: one training worker on a topic's partitions.

All of the work lives in :mod:`streamtrain.worker` (and the ingest and shuffle packages
it assembles); this module parses options (each from its ``STREAMTRAIN_*`` variable),
builds the settings, runs :func:`~streamtrain.worker.run.run_worker`, and prints one
JSON summary line on stdout when the worker stops (Ctrl-C and SIGTERM stop it cleanly,
committing every acknowledged record).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streamtrain.commands.common import (
    OptionGroup,
    graceful_stop,
    handle_errors,
    kafka_connection,
    kafka_options,
    option,
)
from streamtrain.commands.engine_options import elastic_settings, engine_options
from streamtrain.shuffle.policy import ShufflePolicy

if TYPE_CHECKING:
    from streamtrain.ingest.settings import ColumnBuilder
    from streamtrain.shuffle.settings import ShuffleSettings

__all__ = ["worker"]

F = TypeVar("F", bound=Callable[..., Any])

# IngestSettings.column_builder's values (streamtrain.ingest.settings.COLUMN_BUILDERS),
# spelled out so that the command line does not import ingest (and confluent-kafka).
_COLUMN_BUILDERS = ("c", "python")


def shuffle_options(command: F) -> F:
    """``--shuffle`` and its tuning: the shuffle layer between the consumer and the trainer."""
    options = [
        option(
            "--shuffle",
            env="WORKER_SHUFFLE",
            type=click.Choice([p.value for p in ShufflePolicy]),
            default="none",
            show_default=True,
            help="Share records with the job's other workers over ZeroMQ (KALE §3.5): "
            "`advanced` forwards what overflows a full local queue (--queue-records) to "
            "peers below their low watermark; `basic` forwards an even share to every "
            "peer; `none` trains only what this worker reads. Peers find each other on "
            "the compacted <group>.members topic.",
        ),
        option(
            "--shuffle-host",
            env="WORKER_SHUFFLE_HOST",
            default="127.0.0.1",
            show_default=True,
            help="Address the shuffle sockets bind to and announce to peers. Beyond "
            "loopback the shuffle authenticates with CURVE (see --shuffle-curve).",
        ),
        option(
            "--shuffle-advertise-host",
            env="WORKER_SHUFFLE_ADVERTISE_HOST",
            default=None,
            help="Address peers connect to, when it is not --shuffle-host (needed when "
            "binding a wildcard such as 0.0.0.0).",
        ),
        option(
            "--shuffle-low-watermark-records",
            env="WORKER_SHUFFLE_LOW_WATERMARK_RECORDS",
            type=click.IntRange(min=1),
            default=None,
            help="Accept peers' records again below this queue length. Default: 20 %% of "
            "--queue-records.",
        ),
        option(
            "--shuffle-high-watermark-records",
            env="WORKER_SHUFFLE_HIGH_WATERMARK_RECORDS",
            type=click.IntRange(min=1),
            default=None,
            help="Refuse peers' records above this queue length. Default: 80 %% of "
            "--queue-records.",
        ),
        option(
            "--shuffle-ack-timeout-ms",
            env="WORKER_SHUFFLE_ACK_TIMEOUT_MS",
            type=click.IntRange(min=1),
            default=10_000,
            show_default=True,
            help="A forwarded batch the receiver has not queued this long, or whose "
            "receiver fell silent this long, goes to another peer or is trained here (the "
            "wait in a live receiver's queue does not count).",
        ),
        option(
            "--shuffle-heartbeat-interval-ms",
            env="WORKER_SHUFFLE_HEARTBEAT_INTERVAL_MS",
            type=click.IntRange(min=1),
            default=1_000,
            show_default=True,
            help="How often this worker renews its <group>.members record.",
        ),
        option(
            "--shuffle-heartbeat-timeout-ms",
            env="WORKER_SHUFFLE_HEARTBEAT_TIMEOUT_MS",
            type=click.IntRange(min=1),
            default=5_000,
            show_default=True,
            help="A peer whose members record is older than this is gone.",
        ),
        option(
            "--shuffle-curve/--no-shuffle-curve",
            env="WORKER_SHUFFLE_CURVE",
            default=None,
            help="Encrypt and authenticate shuffle traffic with ZeroMQ CURVE (a key pair "
            "per run; peers accept only keys announced on <group>.members). Default: on "
            "whenever --shuffle-host is not a loopback address, which requires it.",
        ),
    ]
    return OptionGroup(*options)(command)


def shuffle_settings(
    group: str, worker_id: str, batch_records: int, queue_records: int, opts: dict[str, Any]
) -> ShuffleSettings | None:
    """The worker's shuffle settings from the ``--shuffle*`` options (popped from
    ``opts``; see :func:`~streamtrain.worker.settings.worker_shuffle_settings`), or
    ``None`` for ``--shuffle none``. Bad values raise ``ConfigError`` here, before any
    broker is contacted."""
    from streamtrain.worker.settings import worker_shuffle_settings

    return worker_shuffle_settings(
        group,
        worker_id,
        policy=opts.pop("shuffle"),
        batch_records=batch_records,
        queue_records=queue_records,
        host=opts.pop("shuffle_host"),
        advertise_host=opts.pop("shuffle_advertise_host"),
        low_watermark_records=opts.pop("shuffle_low_watermark_records"),
        high_watermark_records=opts.pop("shuffle_high_watermark_records"),
        ack_timeout_ms=opts.pop("shuffle_ack_timeout_ms"),
        heartbeat_interval_ms=opts.pop("shuffle_heartbeat_interval_ms"),
        heartbeat_timeout_ms=opts.pop("shuffle_heartbeat_timeout_ms"),
        curve=opts.pop("shuffle_curve"),
    )


@click.command("worker")
@option(
    "--topic",
    "topics",
    env="WORKER_TOPIC",
    multiple=True,
    required=True,
    help="Topic to read (repeatable).",
)
@option("--group", env="WORKER_GROUP", required=True, help="Consumer group: the training job.")
@option(
    "--partition",
    "partitions",
    env="WORKER_PARTITION",
    type=click.IntRange(min=0),
    multiple=True,
    help="Read exactly these partitions of each topic (repeatable) instead of joining the "
    "group's rebalancing; offsets are still committed under --group.",
)
@option(
    "--entry",
    env="WORKER_ENTRY",
    default=None,
    metavar="MODULE:FUNCTION",
    help="A function returning the training app (a `decoder` and a `step(batch)`). Default: "
    "the built-in MMoE CTR model on 200-byte example records.",
)
@option(
    "--app-dir",
    env="WORKER_APP_DIR",
    default=".",
    show_default=True,
    help="Directory put first on the import path for --entry.",
)
@option("--worker-id", env="WORKER_ID", default=None, help="Default: HOSTNAME-PID.")
@option(
    "--batch-records",
    env="WORKER_BATCH_RECORDS",
    type=click.IntRange(min=1),
    default=1_024,
    show_default=True,
    help="Records per training step: the model's step batch and ingest's batch in one. "
    "benchmarks/ingest.py measures 512 to 5,000 close to a raw consume loop; larger "
    "batches cost less per record, smaller ones give more, fresher steps. The default, "
    '1,024, is in the middle (docs/benchmarks.md, "Ingest").',
)
@option(
    "--queue-records",
    env="WORKER_QUEUE_RECORDS",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Local queue bound; fetching pauses when it is full.",
)
@option(
    "--prefetch-kbytes",
    env="WORKER_PREFETCH_KBYTES",
    type=click.IntRange(min=1),
    default=None,
    help="Bound of librdkafka's pre-fetch queue (queued.max.messages.kbytes). Default: "
    "--queue-records x 256 B, within 1-64 MiB, so a full worker holds about as many "
    "records in librdkafka as in its queue.",
)
@option(
    "--commit-interval-s",
    env="WORKER_COMMIT_INTERVAL_S",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Commit the acknowledged offsets this often (and on rebalance and exit).",
)
@option(
    "--max-record-bytes",
    env="WORKER_MAX_RECORD_BYTES",
    type=click.IntRange(min=1),
    default=1 << 20,
    show_default=True,
    help="Larger records go to the dead-letter topic.",
)
@option(
    "--dlq-suffix",
    env="WORKER_DLQ_SUFFIX",
    default=".dlq",
    show_default=True,
    help="Undecodable records go to <topic><suffix>.",
)
@option(
    "--auto-offset-reset",
    env="WORKER_AUTO_OFFSET_RESET",
    type=click.Choice(["earliest", "latest"]),
    default="earliest",
    show_default=True,
    help="Where a partition without a committed offset starts.",
)
@option(
    "--session-timeout-ms",
    env="WORKER_SESSION_TIMEOUT_MS",
    type=click.IntRange(min=1),
    default=45_000,
    show_default=True,
)
@option(
    "--heartbeat-interval-ms",
    env="WORKER_HEARTBEAT_INTERVAL_MS",
    type=click.IntRange(min=1),
    default=3_000,
    show_default=True,
)
@option(
    "--max-records",
    env="WORKER_MAX_RECORDS",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after training this many records.",
)
@option(
    "--idle-exit-s",
    env="WORKER_IDLE_EXIT_S",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without a record.",
)
@option(
    "--throughput-topic",
    env="WORKER_THROUGHPUT_TOPIC",
    default="streamtrain.throughput",
    show_default=True,
    help="Topic for ThroughputSample messages; empty to publish none.",
)
@option(
    "--sample-interval-s",
    env="WORKER_SAMPLE_INTERVAL_S",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
)
@option(
    "--pool-size",
    env="WORKER_POOL_SIZE",
    type=click.IntRange(min=1),
    default=None,
    help="Workers in the pool, as the executor knows it. Default: the group's member count.",
)
@option(
    "--pool-size-file",
    env="WORKER_POOL_SIZE_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the pool size from this file (the local executor's --pool-size-file).",
)
@option(
    "--column-builder",
    env="INGEST_BUILDER",
    type=click.Choice(_COLUMN_BUILDERS),
    default="c",
    show_default=True,
    help="How consumed messages become columns: `c`, the C extension where it is built "
    "(else the accessors); `python`, always the accessors.",
)
@option(
    "--metrics-host",
    env="WORKER_METRICS_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Address of the Prometheus /metrics endpoint.",
)
@option(
    "--metrics-port",
    env="WORKER_METRICS_PORT",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus /metrics on this port (0: a free one). Default: no HTTP.",
)
@option(
    "--assignment",
    env="WORKER_ASSIGNMENT",
    type=click.Choice(["group", "cooperative", "shards"]),
    default="group",
    show_default=True,
    help="How partitions reach this worker: `group`, consumer-group membership with the "
    "eager assignor (every join or leave pauses every worker); `cooperative`, "
    "incremental cooperative-sticky rebalancing (only the partitions that change hands "
    "pause); `shards`, no group: the control app (`streamtrain lag run --shards-job`) "
    "leases offset-range shards, so joining and leaving move nothing and more workers "
    "than partitions all train.",
)
@option(
    "--static-membership/--no-static-membership",
    env="WORKER_STATIC_MEMBERSHIP",
    default=False,
    show_default=True,
    help="Join with group.instance.id = --worker-id (a restarted worker gets its "
    "partitions back without a rebalance). Off by default: the embedded broker (Tansu "
    "0.6.0) orphans partitions with cooperative + static membership and notices an "
    "eager static member leave only after --session-timeout-ms.",
)
@option(
    "--states-topic",
    env="WORKER_STATES_TOPIC",
    default=None,
    help="Announce STARTING / READY / DRAINING / LEFT (WorkerStateEvent) on this topic. "
    "Default: none.",
)
@option(
    "--admission-timeout-s",
    env="WORKER_ADMISSION_TIMEOUT_S",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="After READY, wait this long at most for the executor's ADMITTED on "
    "--states-topic before taking data (two-phase start). Default: do not wait.",
)
@option(
    "--drain-timeout-s",
    env="WORKER_DRAIN_TIMEOUT_S",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="With --assignment shards, a stopping worker finishes the shards it reads for "
    "this long (the ones it has not started go back at once).",
)
@shuffle_options
@engine_options
@kafka_options
@handle_errors
def worker(
    topics: tuple[str, ...],
    group: str,
    partitions: tuple[int, ...],
    entry: str | None,
    app_dir: str,
    worker_id: str | None,
    batch_records: int,
    queue_records: int,
    prefetch_kbytes: int | None,
    commit_interval_s: float,
    max_record_bytes: int,
    dlq_suffix: str,
    auto_offset_reset: str,
    session_timeout_ms: int,
    heartbeat_interval_ms: int,
    max_records: int | None,
    idle_exit_s: float | None,
    throughput_topic: str,
    sample_interval_s: float,
    pool_size: int | None,
    pool_size_file: Path | None,
    column_builder: ColumnBuilder,
    metrics_host: str,
    metrics_port: int | None,
    assignment: str,
    static_membership: bool,
    states_topic: str | None,
    admission_timeout_s: float | None,
    drain_timeout_s: float,
    **opts: Any,
) -> None:
    """Run a training worker on its share of --topic as a member of --group.

    Records are read in batches, decoded, trained on (one step per batch) and
    acknowledged; only acknowledged records are ever committed (at-least-once).
    Undecodable records go to <topic>.dlq. SIGINT/SIGTERM stop it after the current
    step (a second signal at once). Prints a JSON summary line on exit.
    With --shuffle, records of this worker that overflow its queue are trained by idle
    peers of the same --group, and acknowledged back before they are committed.
    With --engine torchft (or torchelastic) every worker of the job trains one model:
    a joiner takes the current weights before it says READY, every worker steps every
    round (with no data if it has none), and a record is committed only once its step
    committed everywhere.
    """
    from streamtrain.config import AssignmentMode
    from streamtrain.ingest.settings import IngestSettings, default_worker_id
    from streamtrain.worker import WorkerRun, load_app, run_worker
    from streamtrain.worker.run import check_modes

    worker_id = worker_id or default_worker_id()
    queue_records = max(queue_records, batch_records)
    shuffle = shuffle_settings(group, worker_id, batch_records, queue_records, opts)
    elastic = elastic_settings(worker_id, opts)
    settings = IngestSettings(
        group=group,
        topics=topics,
        partitions=partitions,
        worker_id=worker_id,
        batch_records=batch_records,
        queue_records=queue_records,
        commit_interval_s=commit_interval_s,
        max_record_bytes=max_record_bytes,
        dlq_suffix=dlq_suffix or None,
        auto_offset_reset=auto_offset_reset,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        column_builder=column_builder,
        assignment=AssignmentMode(assignment),
        static_membership=static_membership,
        prefetch_kbytes=prefetch_kbytes,
    )
    run = WorkerRun(
        max_records=max_records,
        idle_exit_s=idle_exit_s,
        throughput_topic=throughput_topic or None,
        sample_interval_s=sample_interval_s,
        pool_size=pool_size,
        pool_size_file=pool_size_file,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        states_topic=states_topic,
        admission_timeout_s=admission_timeout_s,
        drain_timeout_s=drain_timeout_s,
    )
    check_modes(settings.assignment, shuffle, elastic)
    app = load_app(entry, app_dir)
    stop = threading.Event()
    with kafka_connection(opts) as kafka, graceful_stop(stop):
        summary = run_worker(
            kafka,
            settings,
            app,
            run,
            stop=stop,
            on_metrics_url=lambda url: click.echo(f"worker metrics at {url}", err=True),
            shuffle=shuffle,
            elastic=elastic,
        )
    click.echo(json.dumps(summary.to_json()))
    if stop.is_set():
        raise KeyboardInterrupt  # stopped by a signal: exit 130, as every command does


if __name__ == "__main__":  # pragma: no cover - `python -m streamtrain.commands.worker`
    import logging

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    worker()
