"""Offset-range shards (DLRover-RM §5.1), the pure bookkeeping of ``--assignment shards``.

* :mod:`streamtrain.shards.model`: the value types (:class:`ShardRange`, :class:`Grant`,
  :class:`ShardSettings`) and the reasons a report is refused (:class:`Refusal`);
* :mod:`streamtrain.shards.book`: :class:`ShardBook`, the control app's state machine
  (cut, lease, heartbeat, expire, done, committable prefix, snapshot and restore);
* :mod:`streamtrain.shards.table`: the book's per-partition records and their form in
  the control app's changelogged table;
* :mod:`streamtrain.shards.holdings`: :class:`Holdings`, a worker's side (which shards it
  holds, where each one ends, when every record of one was acknowledged).

No Kafka, Faust or ZeroMQ here: time is an argument, the tests need no broker.
"""

from streamtrain.shards.book import ShardBook
from streamtrain.shards.holdings import Holdings
from streamtrain.shards.model import Grant, Refusal, ShardRange, ShardSettings

__all__ = ["Grant", "Holdings", "Refusal", "ShardBook", "ShardRange", "ShardSettings"]
