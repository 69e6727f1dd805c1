"""Offset-range shards (DLRover-RM §5.1), the pure bookkeeping of ``--assignment shards``.

* :mod:`streamtrain.shards.model`: the value types (:class:`ShardRange`, :class:`Grant`,
  :class:`ShardSettings`) and the reasons a report is refused (:class:`ShardRefusal`);
* :mod:`streamtrain.shards.book`: :class:`ShardBook`, the control app's state machine,
  with :mod:`~streamtrain.shards.view` (its state and what reading it shows: leases,
  positions, stats, the partitions with records not done),
  :mod:`~streamtrain.shards.partition` (one partition's shards and its table value),
  :mod:`~streamtrain.shards.queue` (which shard goes out next, cutting as the queue
  drains) and :mod:`~streamtrain.shards.rates` (each worker's training rate);
* :mod:`streamtrain.shards.client`: :class:`ShardClient`, a worker's side (grants in,
  updates out), with :mod:`~streamtrain.shards.holdings` (the shards it holds, records
  tagged by lease, acknowledgements counted per lease);
* :mod:`streamtrain.shards.ends`: :class:`~streamtrain.shards.ends.PartitionEnds`, where
  each partition ends (listed watermarks, and a probe of the last batch past them);
* :mod:`streamtrain.shards.messages`: shards to and from protobuf.

No Kafka, Faust or ZeroMQ here: time is an argument, the tests need no broker.
"""

from streamtrain.shards.book import ShardBook
from streamtrain.shards.client import ShardClient
from streamtrain.shards.holdings import Holdings
from streamtrain.shards.model import Grant, ShardRange, ShardRefusal, ShardSettings

__all__ = [
    "Grant",
    "Holdings",
    "ShardBook",
    "ShardClient",
    "ShardRange",
    "ShardRefusal",
    "ShardSettings",
]
