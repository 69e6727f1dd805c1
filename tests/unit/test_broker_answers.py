"""streamtrain.kafka.broker_answers: the plain TCP check that keeps long-lived admin
clients from sending requests into a broker outage (librdkafka aborts the
process when such requests are in flight as a killed broker comes back)."""

import socket

import pytest

from streamtrain.config import KafkaSettings
from streamtrain.errors import BrokerUnreachableError
from streamtrain.kafka import broker_answers
from streamtrain.lag.offsets import OffsetsReader


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_listening_server_answers_and_a_closed_port_does_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert broker_answers(KafkaSettings(f"127.0.0.1:{port}"), 1.0)
    assert not broker_answers(KafkaSettings(f"127.0.0.1:{_closed_port()}"), 1.0)


def test_any_of_several_bootstrap_servers_is_enough():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        bootstrap = f"127.0.0.1:{_closed_port()},127.0.0.1:{port}"
        assert broker_answers(KafkaSettings(bootstrap), 1.0)


def test_after_a_failed_snapshot_the_reader_asks_tcp_before_librdkafka():
    """Once a snapshot failed, the next one fails at once on the TCP check: no admin
    client is even created while nothing listens."""
    reader = OffsetsReader(
        KafkaSettings(f"127.0.0.1:{_closed_port()}"), groups=("g",), request_timeout_s=0.5
    )
    reader._failing = True
    with pytest.raises(BrokerUnreachableError):
        reader.snapshot_sync()
    assert reader._admin is None
