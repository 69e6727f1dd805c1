"""The old import path of the shard coordinator and its Kafka I/O, kept for code written
against it: :mod:`streamtrain.control.shard_coordinator` and
:mod:`streamtrain.control.shard_offsets` are where they live."""

import warnings

from streamtrain.control.shard_coordinator import ShardCoordinator, ShardJobSettings
from streamtrain.control.shard_offsets import ShardOffsets

__all__ = ["ShardCoordinator", "ShardJobSettings", "ShardOffsets"]

warnings.warn(
    "streamtrain.control.shards is now streamtrain.control.shard_coordinator "
    "(ShardCoordinator, ShardJobSettings) and streamtrain.control.shard_offsets (ShardOffsets)",
    DeprecationWarning,
    stacklevel=2,
)
