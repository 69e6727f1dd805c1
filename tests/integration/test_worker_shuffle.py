"""`streamtrain worker --shuffle advanced`: an overloaded worker's records are trained by an
idle peer, acknowledged back, and committed; no record is lost.

Two real worker processes on the embedded broker, one with a hot partition (most of the
topic) and one with three cold ones, each training at the same speed. Without the
shuffle the hot worker would train alone for as long as its backlog lasts.
"""

import json

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
