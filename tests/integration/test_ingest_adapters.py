"""torch and Keras training steps on records read from the broker; commits follow the steps."""

import importlib
import time
import uuid
from typing import Any

import numpy as np
import pytest
import torch
from confluent_kafka import Producer
from torch.utils.data import DataLoader

from streamtrain.ingest import IngestConsumer, IngestSettings, StructDecoder
from streamtrain.ingest.example import CTR_RECORD, SyntheticCtr, split_records
from streamtrain.ingest.mmoe import MMoE, ctr_loss
from streamtrain.kafka import create_topic

BATCH = 128


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ctr_topic(broker):
    """2 partitions of 1,024 example CTR records each (ids 0..2047, even ids in partition 0)."""
    settings = broker.kafka_settings()
    topic = unique("ingest-ctr")
    create_topic(settings, topic, 2)
    producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
    for i, value in enumerate(split_records(SyntheticCtr(seed=5).sample(2048))):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(30) == 0
    return settings, topic


def consumer_for(settings, topic, group):
    ingest = IngestSettings(
        group=group, topics=(topic,), partitions=(0, 1), batch_records=BATCH, auto_ack=False
    )
    return IngestConsumer(settings, ingest, StructDecoder(CTR_RECORD))


def expected_commits(ids):
    """The commit positions after training exactly ``ids`` (a per-partition prefix)."""
    positions: dict[int, int] = {}
    for i in ids:
        partition, offset = i % 2, i // 2
        positions[partition] = max(positions.get(partition, 0), offset + 1)
    return positions


def test_torch_dataset_trains_mmoe_and_commits_what_was_trained(ctr_topic):
    settings, topic = ctr_topic
    torch.manual_seed(0)
    model = MMoE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    consumer = consumer_for(settings, topic, unique("torch"))
    trained_ids = []
    losses = []
    with consumer:
        dataset = consumer.as_torch_dataset(max_batches=6)
        for tensors in DataLoader(dataset, batch_size=None, num_workers=0):
            optimizer.zero_grad()
            loss = ctr_loss(
                model(tensors["sparse"], tensors["dense"]), tensors["click"], tensors["conversion"]
            )
            torch.autograd.backward(loss)
            optimizer.step()
            losses.append(float(loss.detach()))
            trained_ids += tensors["id"].tolist()
            # The step just taken is not acknowledged until the next batch is asked for.
            assert consumer.metrics.snapshot().records_trained == len(trained_ids) - BATCH
        assert consumer.metrics.snapshot().records_trained == len(trained_ids)
    assert len(trained_ids) == 6 * BATCH == len(set(trained_ids))
    assert all(np.isfinite(losses))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert {p: o for (_, p), o in consumer.last_committed.items()} == expected_commits(trained_ids)


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_keras_fit_on_a_tf_dataset_acks_one_batch_per_step(ctr_topic, steps_per_execution):
    """With ``steps_per_execution=2`` Keras calls back every second step (a callback
    that acknowledged one batch per call would leave half of them unacknowledged)."""
    tf: Any = importlib.import_module("tensorflow")  # no type stubs
    keras = tf.keras
    settings, topic = ctr_topic
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        steps_per_execution=steps_per_execution,
    )
    before = [w.copy() for w in model.get_weights()]
    consumer = consumer_for(settings, topic, unique("keras"))

    def to_xy(columns):
        return columns["dense"], tf.cast(columns["click"], tf.float32)

    with consumer:
        feed = consumer.tf_feed(ack="callback")
        dataset = feed.dataset.map(to_xy)
        history = model.fit(
            dataset,
            steps_per_epoch=4,
            epochs=1,
            shuffle=False,
            callbacks=[feed.ack_callback()],
            verbose=0,
        )
        deadline = time.monotonic() + 10
        while consumer.metrics.snapshot().records_trained < 4 * BATCH:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        trained = consumer.metrics.snapshot().records_trained
    assert trained == 4 * BATCH  # one batch acknowledged per step, prefetched ones not
    assert np.isfinite(history.history["loss"]).all()
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))
    committed = sum(consumer.last_committed.values())
    assert committed == 4 * BATCH
