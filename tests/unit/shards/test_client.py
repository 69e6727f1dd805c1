"""ShardClient: a worker's grants in, its updates out."""

import numpy as np

from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards import ShardClient

T = "clicks"


def rng(p, start, end, epoch):
    return pb.ShardUpdate.Range(
        topic=T, partition=p, start_offset=start, end_offset=end, epoch=epoch
    )


def grant(*shards, revoked=()):
    return pb.ShardGrant(job="job", worker_id="w", shards=list(shards), revoked=list(revoked))


def client():
    return ShardClient("job", "w", prefetch_shards=2, batch_records=10, heartbeat_interval_s=1.0)


def test_updates_are_sent_when_something_changed_or_a_heartbeat_is_due():
    c = client()
    first = c.update(0.0)
    assert first is not None and first.want_shards == 4  # nothing held: twice ahead
    assert c.update(0.5) is None  # nothing new, heartbeat not due
    assert c.update(1.0) is not None  # heartbeat
    assert c.apply(grant(rng(0, 0, 100, 1))) == 1
    update = c.update(1.1)  # a grant came: what it still wants is said at once
    assert update is not None and update.want_shards == 1
    assert [(h.start_offset, h.epoch) for h in update.held] == [(0, 1)]
    assert c.apply(grant(rng(0, 100, 200, 2))) == 1
    assert c.update(1.2) is None  # wants nothing more: the next heartbeat lists it


def test_done_reports_carry_the_grant_and_revoked_shards_are_let_go():
    c = client()
    c.apply(grant(rng(0, 0, 10, 1), rng(1, 0, 10, 2)))
    c.ack(c.accept(T, 0, np.arange(0, 10, dtype=np.int64)))
    c.accept(T, 1, np.arange(0, 10, dtype=np.int64))
    c.apply(grant(revoked=[rng(1, 0, 10, 0)]))
    update = c.update(0.0)
    assert [(d.partition, d.epoch) for d in update.done] == [(0, 1)]
    assert list(update.held) == []
    assert c.shards_done == 1


def test_leaving_hands_back_unstarted_shards_and_finishes_the_rest():
    c = client()
    c.apply(grant(rng(0, 0, 10, 1), rng(0, 10, 20, 2)))
    leases = c.accept(T, 0, np.arange(0, 5, dtype=np.int64))
    assert c.leave() == 1
    assert not c.drained
    c.apply(grant(rng(0, 20, 30, 3)))  # a late grant goes straight back
    update = c.update(0.0)
    assert update.want_shards == 0
    assert sorted(r.start_offset for r in update.returned) == [10, 20]
    c.accept(T, 0, np.arange(5, 10, dtype=np.int64))
    c.ack(leases)
    c.ack(np.full(5, leases[0]))
    assert [d.start_offset for d in c.update(5.0).done] == [0]
    assert c.drained
    last = c.last_update(6.0)
    assert last.leaving and list(last.returned) == []


def test_a_grant_that_overlaps_a_held_shard_is_handed_back_at_once():
    c = client()
    c.apply(grant(rng(0, 0, 10, 1)))
    assert c.apply(grant(rng(0, 5, 15, 7))) == 0
    update = c.update(0.0)
    assert [(r.start_offset, r.epoch) for r in update.returned] == [(5, 7)]
    assert [(h.start_offset, h.epoch) for h in update.held] == [(0, 1)]
