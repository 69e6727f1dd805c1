"""shuffle: KALE §3.5 global data shuffling between the workers of one job, over ZeroMQ.

The layer between a worker's consumer and its trainer. Each worker has a
:class:`ShuffleUnit` (bounded local queue, overflow buffer, receiver state with
watermark hysteresis) and a :class:`ForwardingUnit` (its own thread and sockets: state
events to every peer, protobuf record batches to a receiver drawn at random, per-batch
ACKs, credit-based flow control, re-routing on rejection, timeout or departure). Peers
are found through :class:`KafkaMembership` (the compacted ``<job>.members`` topic) or
:class:`StaticMembership`. The origin worker tells its offset tracker (anything with
the :class:`~streamtrain.records.Acknowledger` ``ack`` method) about a record only once
it was trained, locally or by the receiver that ACKed it. :class:`ShuffleNode`
assembles one worker. It imports nothing of ingest: both share
:mod:`streamtrain.records`, and the worker package (:mod:`streamtrain.worker`) joins
them.

Modules: ``policy`` (no ZeroMQ: the command line imports it), ``settings``,
``announcements``, ``watermarks``, ``receivers``, ``inflight``, ``frames`` (pure),
``codec``, ``unit``, ``membership``, ``kafka_membership``, ``security``, ``sockets``,
``replies``, ``stats``, ``mailbox``, ``forwarding``, ``node``. The scripted worker
process and the KALE Table 2 experiment that drive it live in
:mod:`streamtrain.experiments`.

The names below are imported on first use (PEP 562), so that importing
``streamtrain.shuffle.policy`` loads no ZeroMQ.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamtrain.shuffle.forwarding import ForwardingUnit
    from streamtrain.shuffle.kafka_membership import KafkaMembership
    from streamtrain.shuffle.membership import (
        MemberDirectory,
        Membership,
        PeerInfo,
        StaticMembership,
    )
    from streamtrain.shuffle.node import NodeStats, ShuffleNode
    from streamtrain.shuffle.policy import ShufflePolicy
    from streamtrain.shuffle.settings import CurveKeys, ShuffleSettings
    from streamtrain.shuffle.stats import ForwardingStats
    from streamtrain.shuffle.unit import ShuffledBatch, ShuffleUnit, UnitStats

__all__ = [
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
]

_HOMES = {
    "CurveKeys": "settings",
    "ForwardingStats": "stats",
    "ForwardingUnit": "forwarding",
    "KafkaMembership": "kafka_membership",
    "MemberDirectory": "membership",
    "Membership": "membership",
    "NodeStats": "node",
    "PeerInfo": "membership",
    "ShuffleNode": "node",
    "ShufflePolicy": "policy",
    "ShuffleSettings": "settings",
    "ShuffleUnit": "unit",
    "ShuffledBatch": "unit",
    "StaticMembership": "membership",
    "UnitStats": "unit",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
