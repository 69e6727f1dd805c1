"""shuffle: KALE §3.5 global data shuffling between the workers of one job, over ZeroMQ.

The layer between a worker's consumer and its trainer. Each worker has a
:class:`ShuffleUnit` (bounded local queue, overflow buffer, receiver state with
watermark hysteresis) and a :class:`ForwardingUnit` (its own thread and sockets: state
events to every peer, protobuf record batches to a receiver drawn at random, per-batch
ACKs, credit-based flow control, re-routing on rejection, timeout or departure). Peers
are found through :class:`KafkaMembership` (the compacted ``<job>.members`` topic) or
:class:`StaticMembership`. The origin worker tells its offset tracker (anything with
the :class:`Acknowledger` ``ack`` method) about a record only once it was trained,
locally or by the receiver that ACKed it. :class:`ShuffleNode` assembles one worker.

Modules: ``settings``, ``acks``, ``watermarks``, ``receivers`` (pure), ``codec``,
``unit``, ``membership``, ``kafka_membership``, ``security``, ``sockets``, ``stats``,
``forwarding``, ``node``; ``testing`` (a recording acknowledger), ``harness`` (a scripted
worker process) and ``experiment`` (KALE Table 2 in shape).
"""

from streamtrain.shuffle.acks import Acknowledger, contiguous_runs
from streamtrain.shuffle.forwarding import ForwardingUnit
from streamtrain.shuffle.kafka_membership import KafkaMembership
from streamtrain.shuffle.membership import MemberDirectory, Membership, PeerInfo, StaticMembership
from streamtrain.shuffle.node import NodeStats, ShuffleNode
from streamtrain.shuffle.settings import CurveKeys, ShufflePolicy, ShuffleSettings
from streamtrain.shuffle.stats import ForwardingStats
from streamtrain.shuffle.unit import ShuffledBatch, ShuffleUnit, UnitStats

__all__ = [
    "Acknowledger",
    "CurveKeys",
    "ForwardingStats",
    "ForwardingUnit",
    "KafkaMembership",
    "MemberDirectory",
    "Membership",
    "NodeStats",
    "PeerInfo",
    "ShuffleNode",
    "ShufflePolicy",
    "ShuffleSettings",
    "ShuffleUnit",
    "ShuffledBatch",
    "StaticMembership",
    "UnitStats",
    "contiguous_runs",
]
