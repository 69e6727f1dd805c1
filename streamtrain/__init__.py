"""streamtrain: keep online deep-learning training fed from Kafka and sized to its traffic.

Public entry points are re-exported here; subsystems live in their own packages
(``ingest``, ``shuffle``, ``lag``, ``forecast``, ``scale``, ``sim``). Importing
``streamtrain`` does no I/O and does not import torch.
"""

from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.errors import (
    BrokerBinaryNotFoundError,
    BrokerUnreachableError,
    ConfigError,
    EmbeddedBrokerError,
    KafkaError,
    PortInUseError,
    SchemaError,
    StreamtrainError,
)

__version__ = "0.1.0"

__all__ = [
    "BrokerBinaryNotFoundError",
    "BrokerUnreachableError",
    "ConfigError",
    "EmbeddedBrokerError",
    "EmbeddedBrokerSettings",
    "KafkaError",
    "KafkaSettings",
    "PortInUseError",
    "SchemaError",
    "StreamtrainError",
    "__version__",
]
