"""A rolling upgrade of the shuffle: workers of older releases and of this
one exchange batches both ways without losing a record, over real ZeroMQ sockets on
127.0.0.1 (no broker). The older workers are :mod:`tests.integration.legacy_shuffle_peer`:
the first release (version-1 batches, bare routing ids, credit from grants only, any
answer but ACKED read as a rejection) and the routed release (version-1 batches,
RECEIVED, no grants)."""

import threading

import pytest

from streamtrain.shuffle.membership import MemberDirectory, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.testing import RecordingAcknowledger, records
from tests.integration.legacy_shuffle_peer import LegacyPeer
from tests.integration.waiting import wait_for

SETTINGS = {
    "low_watermark_records": 20,
    "high_watermark_records": 80,
    "overflow_capacity_records": 10_000,
    "batch_records": 50,
    "credit_window_records": 200,
    "ack_timeout_ms": 2_000,
    "state_rebroadcast_ms": 100,
}


def _node(directory, worker, acks, **overrides):
    settings = ShuffleSettings(job="job-u", worker_id=worker, **(SETTINGS | overrides))
    return ShuffleNode(settings, acks, StaticMembership(directory), seed=5)


class _Trainer:
    """Takes and acknowledges every batch of a node on a thread; keeps the offsets."""

    def __init__(self, node):
        self.node = node
        self.offsets: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            batch = self.node.take(1_000, timeout_s=0.05)
            if batch is not None:
                self.offsets.extend(batch.columns.offsets.tolist())
                self.node.ack(batch)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.mark.parametrize("routed", [False, True], ids=["first-release", "issue-18-release"])
def test_an_old_sender_forwards_to_a_new_receiver_without_loss(routed):
    """The first release regains credit only from grants and reads RECEIVED as a
    rejection: against a receiver that sent neither grants nor anything but RECEIVED
    first, it stalled after one credit window (200 of the 2,000 records here)."""
    directory = MemberDirectory()
    old = LegacyPeer("job-u", "old", window_records=200, routed=routed)
    directory.announce(old.info)
    new = _node(
        directory,
        "new",
        RecordingAcknowledger(),
        queue_capacity_records=10_000,
        low_watermark_records=4_000,
        high_watermark_records=8_000,
    )
    total = list(range(2_000))
    with new, _Trainer(new) as trainer:
        old.connect(new.me)
        old.send(total, batch_records=50)
        with old:
            wait_for(lambda: old.acked == set(total), timeout_s=60, what="every ACK at the old")
        stats = new.stats().forwarding
    assert sorted(set(trainer.offsets)) == total
    assert old.dropped_frames == 0
    assert stats.records_received >= len(total)
    assert old.answers["ACKED"] >= len(total) // 50  # one per batch at least
    if not routed:
        assert old.grants_received > 0  # its credit came back
        assert old.answers["RECEIVED"] == 0  # it would have read them as rejections
        assert "no credit" not in old.reasons  # the grants matched what the ledger freed


@pytest.mark.parametrize("routed", [False, True], ids=["first-release", "issue-18-release"])
def test_a_new_sender_forwards_to_an_old_receiver_without_loss(routed):
    """The new worker writes version-1 batches to a peer that announced no batch schema
    version, and finds out which routing id it accepts (the first release answers a
    routing id it does not know with silence: one ACK timeout, then the other kind)."""
    directory = MemberDirectory()
    old = LegacyPeer("job-u", "old", window_records=200, routed=routed)
    directory.announce(old.info)
    acks = RecordingAcknowledger()
    new = _node(directory, "new", acks, queue_capacity_records=100)
    total = 1_100  # 100 fit the new worker's queue, 1,000 overflow to the old one
    with new:
        old.connect(new.me)
        with old:
            wait_for(lambda: new.stats().forwarding.events_received > 0, what="old's state")
            assert new.put(records(0, total), timeout_s=10) is None
            wait_for(
                lambda: acks.acked_records("t", 0) == 1_000,
                timeout_s=60,
                what="every forwarded record ACKed back",
            )
        stats = new.stats().forwarding
    assert sorted(set(old.trained)) == list(range(100, total))
    assert old.newer_frames == 0  # nothing it cannot read was ever sent
    assert stats.records_acked == 1_000
    if routed:
        assert stats.batches_timed_out == 0
