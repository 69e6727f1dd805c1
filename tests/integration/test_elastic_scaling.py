"""One model on many workers, scaled and restarted with real processes: `streamtrain worker
--engine torchft --assignment shards` (the job of test_elastic_worker.py: the embedded
broker, `streamtrain lighthouse`, the shard coordinator) under the two-phase local pool,
and the shard coordinator killed mid-run. Every record id is checked."""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest

from streamtrain.executors.local import LocalProcessPool
from streamtrain.executors.readiness import Readiness
from tests.integration.test_elastic_worker import DEADLINE_S, Job, ids


@pytest.fixture
def one_model(broker, tmp_path):
    running = Job(broker.bootstrap, tmp_path)
    yield running
    running.stop_all()


def trained_by_worker(job: Job) -> dict[str, set[int]]:
    return {
        path.name: {int(line.split()[0]) for line in path.read_text().splitlines() if line}
        for path in job.trained_dir.iterdir()
    }


EXPIRED = re.compile(r"sent no heartbeat for .* shard \S+\[(\d+)\]@(\d+)\.\.(\d+) back")


def expired_ids(job: Job) -> set[int]:
    """The record ids of every shard a coordinator of ``job`` logged as expired (ids are
    produced round-robin: id ``i`` is offset ``i // partitions`` of partition
    ``i % partitions``)."""
    found: set[int] = set()
    for path in job.dir.glob("control-*.log"):
        for match in EXPIRED.finditer(path.read_text(errors="replace")):
            partition, start, end = (int(g) for g in match.groups())
            found.update(o * job.partitions + partition for o in range(start, end))
    return found


def wait_trained(job: Job, count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while len(job.trained()) < count:
        assert time.monotonic() < deadline, f"fewer than {count} ids trained"
        time.sleep(0.2)


def test_control_app_restart_with_one_model_loses_no_shard_and_grants_none_twice(one_model):
    job = one_model
    job.produce(ids(0, 1500))
    for worker_id in ("w1", "w2"):
        job.start_worker(worker_id, ELASTIC_STEP_DELAY_S="0.05")
    wait_trained(job, 300)
    job.control.send_signal(signal.SIGKILL)  # the shard coordinator, mid-run
    job.control.wait(10)
    job.control_log.close()
    job.produce(ids(1500, 500))
    job.start_control()
    job.produce(ids(2000, 500))
    job.wait_all(set(range(2500)))
    assert job.committed_total() == 2500
    by_worker = trained_by_worker(job)
    # no worker died: a record trained by both workers means one shard was out to two
    # workers at once, unless its lease expired first (a heartbeat late by more than the
    # lease on a loaded machine: at-least-once allows the second grant, and the
    # coordinator logs it)
    both = by_worker["w1"] & by_worker["w2"]
    expired = expired_ids(job)
    assert both <= expired, (
        f"{len(both - expired)} records trained by both workers whose lease never "
        f"expired, e.g. {sorted(both - expired)[:5]}; expiries logged: {sorted(expired)[:5]}"
    )
    assert by_worker["w1"] | by_worker["w2"] == set(range(2500))
    for worker_id in ("w1", "w2"):
        assert job.workers[worker_id].poll() is None, job.output(worker_id)
    # one model: both workers' committed steps are the job's steps
    steps = {step for found in job.trained().values() for step in found}
    assert max(steps) > 10


def test_a_worker_that_never_says_ready_is_not_admitted_and_is_replaced(one_model, tmp_path):
    """The pool starts two joiners of a running torchft job together; one hangs before
    it holds the weights (never READY): the other is admitted at once, the silent one
    is not capacity, is replaced in its slot, and its replacement is admitted; every
    record is trained by the one model."""
    job = one_model
    hang_marks = tmp_path / "hang"
    hang_marks.mkdir()
    readiness = Readiness(job.kafka, job.name, f"{job.name}.worker-states").start()
    pool = LocalProcessPool(
        job.worker_argv("--admission-timeout-s", "60"),
        env=job.worker_env(
            ELASTIC_STEP_DELAY_S="0.02",
            ELASTIC_HANG_ONCE_DIR=str(hang_marks),
            ELASTIC_HANG_WORKERS="worker-2",
        ),
        name="workers",
        grace_s=5.0,
        log_dir=tmp_path / "pool-logs",
        readiness=readiness,
        # waited out in full for the silent worker: long enough for a torch worker to
        # start and heal on a busy 2-core machine (seconds on a quiet one), no longer
        prep_timeout_s=60.0,
    )
    try:
        job.produce(ids(0, 1000))
        assert pool.scale_to(1) == 1
        wait_trained(job, 100)
        counted: list[int] = []
        scaling = threading.Thread(target=lambda: counted.append(pool.scale_to(3)))
        scaling.start()
        # while the silent worker prepares, only the admitted ones are capacity
        deadline = time.monotonic() + DEADLINE_S
        while ("worker-1", "ADMITTED") not in job.states():
            assert time.monotonic() < deadline, "worker-1 was never admitted"
            assert pool.current_workers() <= 2
            time.sleep(1.0)
        scaling.join(DEADLINE_S)
        assert not scaling.is_alive() and counted == [3]
        assert pool.not_ready == 1 and pool.current_workers() == 3
        events = [state for worker, state in job.states() if worker == "worker-2"]
        # the first process said STARTING and nothing more; its replacement READY, then
        # the pool admitted it
        assert events.count("STARTING") == 2, events
        assert events.index("READY") > events.index("STARTING", 1), events
        assert events.index("ADMITTED") > events.index("READY"), events
        job.produce(ids(1000, 1000))
        job.wait_all(set(range(2000)))
        by_worker = trained_by_worker(job)
        assert by_worker.get("worker-2"), "the replacement trained nothing"
        assert set().union(*by_worker.values()) == set(range(2000))
    finally:
        pool.close()
        readiness.close()
