"""`streamtrain worker --shuffle advanced`: an overloaded worker's records are trained by an
idle peer, acknowledged back, and committed; no record is lost, also when either worker
is killed -9 mid-run.

Two real worker processes on the embedded broker, one with a hot partition (most of the
topic) and one with three cold ones, each training at the same speed. Without the
shuffle the hot worker would train alone for as long as its backlog lasts.
"""

import json
import signal
import time

from confluent_kafka import Producer

from streamtrain.ingest.example import SyntheticCtr, split_records
from streamtrain.kafka import create_topic
from tests.integration.test_ingest_reliability import (
    RECORDING_APP,
    committed,
    start_worker,
    trained_lines,
    unique,
)

DEADLINE_S = 120.0
HOT, COLD_EACH = 4_000, 200


def _shuffled(bootstrap, topic, group, app_dir, log, *partitions):
    return start_worker(
        bootstrap,
        topic,
        group,
        app_dir,
        log,
        *(arg for p in partitions for arg in ("--partition", str(p))),
        *("--shuffle", "advanced"),
        *("--shuffle-heartbeat-interval-ms", "300", "--shuffle-heartbeat-timeout-ms", "3000"),
        *("--idle-exit-s", "5"),
        delay_s=0.1,  # 50 records per 0.1 s: 500 records/s per worker
    )


def test_hot_workers_overflow_is_trained_by_an_idle_peer_and_committed(broker, tmp_path):
    settings = broker.kafka_settings()
    topic, group = unique("shuffle-worker"), unique("job")
    create_topic(settings, topic, 4)
    total = HOT + 3 * COLD_EACH
    producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
    for i, value in enumerate(split_records(SyntheticCtr(seed=5).sample(total))):
        partition = 0 if i < HOT else 1 + (i - HOT) % 3
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0
    (tmp_path / "ingest_recording_app.py").write_text(RECORDING_APP)
    hot_log, cold_log = tmp_path / "hot.log", tmp_path / "cold.log"

    hot = _shuffled(broker.bootstrap, topic, group, tmp_path, hot_log, 0)
    cold = _shuffled(broker.bootstrap, topic, group, tmp_path, cold_log, 1, 2, 3)
    outputs = {}
    try:
        for name, process in (("hot", hot), ("cold", cold)):
            outputs[name] = process.communicate(timeout=DEADLINE_S)
    finally:
        for process in (hot, cold):
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=10)
    for name, process in (("hot", hot), ("cold", cold)):
        assert process.returncode == 0, f"{name} worker failed: {outputs[name][1]}"
    hot_summary = json.loads(outputs["hot"][0].strip().splitlines()[-1])
    cold_summary = json.loads(outputs["cold"][0].strip().splitlines()[-1])

    forwarded = hot_summary["shuffle"]["records_forwarded"]
    assert forwarded > 0, hot_summary
    assert cold_summary["shuffle"]["records_received"] >= forwarded
    trained_hot, trained_cold = trained_lines(hot_log), trained_lines(cold_log)
    hot_partition_at_cold = [i for i, p, _ in trained_cold if p == 0]
    assert len(hot_partition_at_cold) >= forwarded  # the peer trained the hot partition
    assert hot_summary["records_consumed"] == HOT  # ...though only the hot worker read it
    assert cold_summary["records_trained"] == len(trained_cold)

    ids = {i for i, _, _ in trained_hot} | {i for i, _, _ in trained_cold}
    assert ids == set(range(total))  # every record trained at least once
    # The hot worker committed its partition to the end: the peer's ACKs came back.
    assert committed(settings, group, topic, range(4)) == {
        0: HOT,
        1: COLD_EACH,
        2: COLD_EACH,
        3: COLD_EACH,
    }


def _wait(what, predicate, processes, deadline_s=DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while not predicate():
        for name, process in processes.items():
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}: {_err(process)}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _err(process):
    if process.poll() is None or process.stderr is None:
        return ""
    return process.stderr.read()[-3000:]


def _kill(process):
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def test_kill_9_of_the_receiver_and_then_the_sender_mid_run_loses_no_record(broker, tmp_path):
    """Faults on the real end-to-end path: the idle
    peer is killed -9 while it trains the hot worker's records, and restarted; then the
    hot worker is killed -9 while batches of its are at the peer, and restarted. Every
    record is trained at least once and every partition is committed to its end."""
    settings = broker.kafka_settings()
    topic, group = unique("shuffle-kill"), unique("job")
    # The hot worker alone needs 32 s for its backlog (500 records/s): longer than a
    # restarted peer takes to start and be offered batches on a slow, busy machine.
    hot_records, cold_each = 16_000, 200
    create_topic(settings, topic, 4)
    total = hot_records + 3 * cold_each
    producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
    for i, value in enumerate(split_records(SyntheticCtr(seed=7).sample(total))):
        partition = 0 if i < hot_records else 1 + (i - hot_records) % 3
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0
    (tmp_path / "ingest_recording_app.py").write_text(RECORDING_APP)
    logs = {name: tmp_path / f"{name}.log" for name in ("hot", "cold", "cold2", "hot2")}

    def start(name, *partitions):
        return _shuffled(broker.bootstrap, topic, group, tmp_path, logs[name], *partitions)

    def forwarded_trained_at(name):
        return sum(1 for _, p, _ in trained_lines(logs[name]) if p == 0)

    processes = {"hot": start("hot", 0), "cold": start("cold", 1, 2, 3)}
    try:
        _wait(
            "the peer to train the hot partition", lambda: forwarded_trained_at("cold"), processes
        )
        _kill(processes.pop("cold"))
        processes["cold2"] = start("cold2", 1, 2, 3)
        _wait(
            "the restarted peer to train the hot partition",
            lambda: forwarded_trained_at("cold2"),
            processes,
        )
        hot_committed = committed(settings, group, topic, [0])[0]
        assert hot_committed < hot_records, "the hot worker finished before its kill"
        _kill(processes.pop("hot"))
        processes["hot2"] = start("hot2", 0)
        outputs = {name: p.communicate(timeout=DEADLINE_S) for name, p in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=10)
            for stream in (process.stdout, process.stderr):  # a process that exited early
                if stream is not None and not stream.closed:
                    stream.close()
    for name, process in processes.items():
        assert process.returncode == 0, f"{name} failed: {outputs[name][1][-3000:]}"
    ids = {i for log in logs.values() for i, _, _ in trained_lines(log)}
    assert ids == set(range(total))  # every record trained at least once
    assert committed(settings, group, topic, range(4)) == {
        0: hot_records,
        1: cold_each,
        2: cold_each,
        3: cold_each,
    }
