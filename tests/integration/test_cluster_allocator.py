"""Two jobs' planners and the cluster allocator on the embedded broker: the pool is
smaller than what they want together; the commands respect it and the guarantee job
wins. Bad requests are refused with a logged reason."""

import json
import subprocess
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import free_port
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.wire import decode, encode
from tests.integration.cli_process import SCRIPT, run_cli
from tests.integration.http_kafka import get_json, read_topic
from tests.integration.lag_process import start_lag_app, stop_process

CAPACITY = 5


class Traffic(threading.Thread):
    """Records into each job's topic (nobody consumes: lag grows), and each job's one
    worker reporting 5 records/s trained."""

    def __init__(self, settings, jobs):
        super().__init__(daemon=True)
        self.producer = Producer(settings.confluent_config(**{"batch.num.messages": 1}))
        self.jobs = jobs  # job -> (events topic, samples topic)
        self.stop = threading.Event()

    def run(self):
        tick = 0
        while not self.stop.wait(0.05):
            for events, _ in self.jobs.values():
                self.producer.produce(events, value=b"r")
            tick += 1
            if tick % 20 == 0:
                now_ms = int(time.time() * 1000)
                for job, (_, samples) in self.jobs.items():
                    sample = cp.ThroughputSample(
                        job=job,
                        worker_id=f"{job}-0",
                        workers=1,
                        records_per_s_trained=5.0,
                        window_s=1.0,
                        observed_at_ms=now_ms,
                    )
                    self.producer.produce(samples, value=encode(sample))
            self.producer.poll(0)
        self.producer.flush(10)


def _planner(broker, names, job, job_class, tmp_path):
    port = free_port()
    return start_lag_app(
        broker.bootstrap,
        names[f"{job}-group"],
        port,
        tmp_path / f"{job}.log",
        "--app-id",
        names[f"{job}-app"],
        "--reports-topic",
        names[f"{job}-reports"],
        "--alerts-topic",
        names[f"{job}-alerts"],
        "--plan-job",
        job,
        "--policy-setting",
        "decision_interval_s=1",
        "--samples-topic",
        names[f"{job}-samples"],
        "--plan-step-s",
        "1",
        "--sample-bucket-s",
        "1",
        "--action-pause-s",
        "5",
        "--max-workers",
        "4",
        "--allocator",
        "--requests-topic",
        names["requests"],
        "--job-class",
        job_class,
    )


@pytest.fixture
def names():
    suffix = time.monotonic_ns()
    keys = ["requests", "commands", "decisions", "allocator"]
    for job in ("ads", "batch"):
        keys += [f"{job}-{k}" for k in ("events", "group", "samples", "alerts", "reports", "app")]
    return {k: f"{k}-{suffix}" for k in keys}


def _allocator_commands(settings, topic):
    return [
        c
        for c in (decode(cp.ScaleCommand, v) for v in read_topic(settings, topic, 3.0))
        if c.explanation.startswith("cluster allocator")
    ]


def test_two_planners_share_a_short_pool_and_the_guarantee_job_wins(broker, names, tmp_path):
    settings = broker.kafka_settings()
    for key in names:
        if key.endswith(("events", "samples", "alerts", "reports")) or key in (
            "requests",
            "commands",
            "decisions",
        ):
            create_topic(settings, names[key], 1, exist_ok=True)
    for job in ("ads", "batch"):
        committer = Consumer(settings.confluent_config(**{"group.id": names[f"{job}-group"]}))
        committer.commit(offsets=[TopicPartition(names[f"{job}-events"], 0, 0)], asynchronous=False)
        committer.close()
    traffic = Traffic(
        settings,
        {job: (names[f"{job}-events"], names[f"{job}-samples"]) for job in ("ads", "batch")},
    )
    traffic.start()
    web_port = free_port()
    allocator_log = open(tmp_path / "allocator.log", "w")  # noqa: SIM115 - closed below
    allocator = subprocess.Popen(
        [
            SCRIPT,
            "--log-level",
            "INFO",
            "cluster",
            "run",
            "--bootstrap",
            broker.bootstrap,
            "--capacity",
            str(CAPACITY),
            "--guarantee-job",
            "ads",
            "--opportunistic-job",
            "batch",
            "--requests-topic",
            names["requests"],
            "--commands-topic",
            names["commands"],
            "--decisions-topic",
            names["decisions"],
            "--app-id",
            names["allocator"],
            "--tick-s",
            "1",
            "--interval-s",
            "5",
            "--web-port",
            str(web_port),
            "--connect-timeout-s",
            "2",
        ],
        stdout=allocator_log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    planners = [
        _planner(broker, names, "ads", "guarantee", tmp_path),
        _planner(broker, names, "batch", "opportunistic", tmp_path),
    ]

    def logs():
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-2500:]}" for p in sorted(tmp_path.glob("*.log"))
        )

    try:
        # Both planners want 4 of the 5 workers; the guarantee job gets its 4.
        deadline = time.monotonic() + 180
        commands: list[cp.ScaleCommand] = []
        while time.monotonic() < deadline:
            assert allocator.poll() is None, logs()
            for process, _ in planners:
                assert process.poll() is None, logs()
            commands = _allocator_commands(settings, names["commands"])
            if any(c.job == "ads" and c.target_workers == 4 for c in commands):
                break
            time.sleep(1.0)
        assert any(c.job == "ads" and c.target_workers == 4 for c in commands), logs()
        # Both requests reached the allocator before we judge the batch job's share.
        deadline = time.monotonic() + 90
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = get_json(web_port, "/cluster")[1] or {}
            if set(status.get("requests", {})) == {"ads", "batch"} and status.get("decision"):
                wanted = {j["job"]: j["wanted_workers"] for j in status["decision"]["jobs"]}
                if wanted.get("batch", 0) > 1:
                    break
            time.sleep(1.0)
        decision = status["decision"]
        jobs = {j["job"]: j for j in decision["jobs"]}
        assert jobs["ads"]["granted_workers"] == 4
        assert jobs["batch"]["wanted_workers"] > 1
        assert jobs["batch"]["granted_workers"] == CAPACITY - 4
        assert jobs["batch"]["reason"].startswith("opportunistic")
        assert decision["granted_workers"] <= CAPACITY

        # Every command the allocator sent kept the pool within its capacity.
        counts = {"ads": 1, "batch": 1}
        for command in _allocator_commands(settings, names["commands"]):
            counts[command.job] = command.target_workers
            assert sum(counts.values()) <= CAPACITY, counts
        assert counts["ads"] == 4 and counts["batch"] <= 1

        # Bad input: refused with a reason in the log and in the next decision.
        decided_at_ms = decision["decided_at_ms"]
        producer = Producer(settings.confluent_config())
        bad = [
            cp.ScaleRequest(request_id="ghost-1", job="ghost", wanted_workers=2),
            cp.ScaleRequest(
                request_id="neg-1",
                job="ads",
                wanted_workers=-3,
                created_at_ms=int(time.time() * 1000),
            ),
            cp.ScaleRequest(
                request_id="old-1",
                job="ads",
                wanted_workers=2,
                created_at_ms=decided_at_ms - 60_000,
            ),
        ]
        for request in bad:
            producer.produce(names["requests"], key=request.job.encode(), value=encode(request))
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 60
        refused: dict[str, str] = {}
        while time.monotonic() < deadline and len(refused) < 3:
            for value in read_topic(settings, names["decisions"], 2.0):
                for r in decode(cp.AllocationDecision, value).refusals:
                    refused[r.request_id] = r.reason
            time.sleep(0.5)
        assert "unknown job 'ghost'" in refused.get("ghost-1", ""), refused
        assert refused.get("neg-1") == "negative worker count -3", refused
        assert refused.get("old-1", "").startswith("stale"), refused
        text = (tmp_path / "allocator.log").read_text()
        assert "refused scale request ghost-1 for job 'ghost'" in text

        # `cluster status --json` shows the newest decision and its reasons.
        shown = run_cli(
            "cluster",
            "status",
            "--json",
            "--bootstrap",
            broker.bootstrap,
            "--decisions-topic",
            names["decisions"],
        )
        assert shown.returncode == 0, shown.stderr
        body = json.loads(shown.stdout)
        assert {j["job"]: j["granted_workers"] for j in body["jobs"]} == {"ads": 4, "batch": 1}
        assert all(j["reason"] for j in body["jobs"])
    finally:
        traffic.stop.set()
        traffic.join(timeout=15)
        codes = [stop_process(process, log) for process, log in planners]
        codes.append(stop_process(allocator, allocator_log))
    assert codes == [0, 0, 0], logs()


def _start_allocator(broker, names, port, log_path):
    log = open(log_path, "a")  # noqa: SIM115 - closed by stop_process
    process = subprocess.Popen(
        [
            SCRIPT,
            "cluster",
            "run",
            "--bootstrap",
            broker.bootstrap,
            "--capacity",
            "6",
            "--guarantee-job",
            "ads",
            "--opportunistic-job",
            "batch",
            "--requests-topic",
            names["requests"],
            "--commands-topic",
            names["commands"],
            "--decisions-topic",
            names["decisions"],
            "--app-id",
            names["allocator"],
            "--tick-s",
            "1",
            "--interval-s",
            "3",
            "--web-port",
            str(port),
            "--connect-timeout-s",
            "2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, log


def _wait_for_grants(port, want, process, log_path, timeout_s=90):
    deadline = time.monotonic() + timeout_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        assert process.poll() is None, log_path.read_text()[-3000:]
        body = get_json(port, "/cluster")[1] or {}
        decision = body.get("decision") or {}
        granted = {j["job"]: j["granted_workers"] for j in decision.get("jobs", [])}
        if granted == want:
            return body
        time.sleep(0.5)
    raise AssertionError(
        f"no grants {want} in {timeout_s} s: {body}\n{log_path.read_text()[-3000:]}"
    )


def test_a_killed_allocator_restores_its_requests_and_grants(broker, names, tmp_path):
    settings = broker.kafka_settings()
    for key in ("requests", "commands", "decisions"):
        create_topic(settings, names[key], 1, exist_ok=True)
    producer = Producer(settings.confluent_config())
    now_ms = int(time.time() * 1000)
    for job, wanted in (("ads", 4), ("batch", 5)):
        request = cp.ScaleRequest(
            request_id=f"{job}-1",
            job=job,
            current_workers=1,
            wanted_workers=wanted,
            max_workers=8,
            remaining_work=1e5 if job == "batch" else None,
            created_at_ms=now_ms,
        )
        producer.produce(names["requests"], key=job.encode(), value=encode(request))
    assert producer.flush(10) == 0
    log_path = tmp_path / "allocator.log"
    port = free_port()
    process, log = _start_allocator(broker, names, port, log_path)
    try:
        _wait_for_grants(port, {"ads": 4, "batch": 2}, process, log_path)
        before = _allocator_commands(settings, names["commands"])
        assert {(c.job, c.target_workers) for c in before} == {("ads", 4), ("batch", 2)}
        process.kill()  # kill -9: no clean shutdown
        process.wait(timeout=10)
        log.close()
        process, log = _start_allocator(broker, names, port, log_path)
        body = _wait_for_grants(port, {"ads": 4, "batch": 2}, process, log_path)
        assert set(body["requests"]) == {"ads", "batch"}
        assert body["restored"] == {"requests": 2, "grants": 2}
        # The restored grants are the jobs' current counts: two more re-plans after the
        # restart (--interval-s 3) command nothing again.
        seen = {body["decision"]["decision_id"]}
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            decision = (get_json(port, "/cluster")[1] or {}).get("decision") or {}
            seen.add(decision.get("decision_id", ""))
            time.sleep(0.5)
        assert len(seen) >= 3
        after = _allocator_commands(settings, names["commands"])
        assert [c.command_id for c in after] == [c.command_id for c in before]
    finally:
        code = stop_process(process, log)
    assert code == 0
