"""Bounded helpers for tests that poll an HTTP API on 127.0.0.1 and read a whole topic."""

import json
import time
import urllib.error
import urllib.request

from confluent_kafka import Consumer, TopicPartition


def get_json(port, path):
    """(status, JSON body), or (None, None) while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None, None


def read_topic(settings, topic, max_s=10.0, partition=0):
    """Every value in ``partition`` of ``topic``, read without joining a group."""
    consumer = Consumer(settings.confluent_config(**{"group.id": f"reader-{time.monotonic_ns()}"}))
    values = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            batch = consumer.consume(num_messages=1000, timeout=0.5)
            values += [m.value() for m in batch if m.error() is None]
            if values and not batch:
                break
    finally:
        consumer.close()
    return values
