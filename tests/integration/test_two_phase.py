"""Two-phase start with real processes: the pool admits workers only after READY; a
worker that never says READY is not counted as capacity and is replaced."""

import sys
import textwrap
import time
import uuid
from pathlib import Path

from streamtrain.config import KafkaSettings
from streamtrain.executors.local import LocalProcessPool
from streamtrain.executors.readiness import Readiness

REPO = Path(__file__).resolve().parents[2]

# A stand-in worker: says READY on the states topic unless its slot is in SILENT, then
# waits for ADMITTED (as `streamtrain worker --admission-timeout-s` does) and records it.
FAKE_WORKER = textwrap.dedent(
    """
    import os, sys, time
    from streamtrain.config import KafkaSettings
    from streamtrain.ingest.settings import IngestSettings
    from streamtrain.worker.lifecycle import Lifecycle

    worker_id = os.environ["STREAMTRAIN_WORKER_ID"]
    if worker_id in os.environ.get("SILENT", "").split(","):
        time.sleep(120)  # never READY
        sys.exit(0)
    kafka = KafkaSettings(os.environ["BOOTSTRAP"])
    settings = IngestSettings(group=os.environ["JOB"], topics=("t",), worker_id=worker_id)
    with Lifecycle(kafka, settings, os.environ["TOPIC"]) as lifecycle:
        lifecycle.ready(admission_timeout_s=30)
        with open(os.path.join(os.environ["OUT"], worker_id), "w") as out:
            out.write("admitted")
        time.sleep(120)
    """
)


def pool_for(broker, tmp_path, readiness, job, topic, silent, prep_timeout_s):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    return LocalProcessPool(
        [sys.executable, str(script)],
        env={
            "PYTHONPATH": str(REPO),
            "BOOTSTRAP": broker.bootstrap,
            "JOB": job,
            "TOPIC": topic,
            "OUT": str(tmp_path),
            "SILENT": silent,
        },
        grace_s=2.0,
        readiness=readiness,
        prep_timeout_s=prep_timeout_s,
        size_path=tmp_path / "pool-size",
    )


def test_workers_are_admitted_together_after_ready(broker, tmp_path):
    job = f"two-phase-{uuid.uuid4().hex[:8]}"
    topic = f"{job}.worker-states"
    kafka = KafkaSettings(broker.bootstrap)
    with (
        Readiness(kafka, job, topic) as readiness,
        # waited out only if a worker is late: room for a busy machine
        pool_for(broker, tmp_path, readiness, job, topic, silent="", prep_timeout_s=60.0) as pool,
    ):
        assert pool.scale_to(3) == 3
        assert pool.current_workers() == 3
        assert pool.last_prep_s is not None and pool.last_prep_s > 0
        assert (tmp_path / "pool-size").read_text().strip() == "3"
        for index in range(3):
            assert readiness.is_ready(f"worker-{index}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(list(tmp_path.glob("worker-*"))) < 3:
            time.sleep(0.1)
        assert sorted(p.name for p in tmp_path.glob("worker-*")) == [
            "worker-0",
            "worker-1",
            "worker-2",
        ]


def test_a_worker_that_never_says_ready_is_not_capacity_and_is_replaced(broker, tmp_path):
    job = f"two-phase-{uuid.uuid4().hex[:8]}"
    topic = f"{job}.worker-states"
    kafka = KafkaSettings(broker.bootstrap)
    with (
        Readiness(kafka, job, topic) as readiness,
        # waited out twice for the silent worker (it and its replacement)
        pool_for(
            broker, tmp_path, readiness, job, topic, silent="worker-1", prep_timeout_s=15.0
        ) as pool,
    ):
        assert pool.scale_to(2) == 1  # worker-1 failed twice: given up
        assert pool.not_ready == 2  # the first one, then its replacement
        assert pool.current_workers() == 1
        assert [w.worker_id for w in pool.workers()] == ["worker-0"]
        assert (tmp_path / "pool-size").read_text().strip() == "1"
