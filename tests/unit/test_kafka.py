"""kafka_error: a confluent-kafka exception as a KafkaError, reason and retriable kept."""

import pytest
from confluent_kafka import KafkaError as ClientError
from confluent_kafka import KafkaException

from streamtrain.errors import KafkaError
from streamtrain.kafka import kafka_error


@pytest.mark.parametrize("retriable", [True, False])
def test_the_reason_and_whether_to_retry_are_kept(retriable):
    exc = KafkaException(ClientError(ClientError._TIMED_OUT, "no answer", retriable=retriable))
    error = kafka_error(exc, "cannot read shard grants on g.grants")
    assert isinstance(error, KafkaError)
    assert str(error).startswith("cannot read shard grants on g.grants: no answer")
    assert error.retriable is retriable
