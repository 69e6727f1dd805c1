"""ShardCoordinator: wire messages in, grants out; bad input is logged and ignored."""

import logging

from streamtrain import wire
from streamtrain.control.shards import ShardCoordinator, ShardJobSettings
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards import ShardSettings

T = "clicks"


def coordinator():
    c = ShardCoordinator(
        ShardJobSettings(job="job", topics=(T,), book=ShardSettings(shard_records=10))
    )
    c.tick({(T, 0): 30, (T, 1): 10}, {(T, 0): 0, (T, 1): 0}, now_s=0.0)
    return c


def update(**kw):
    return wire.encode(pb.ShardUpdate(job="job", worker_id="w", **kw))


def rng(p, start, end, epoch=0):
    return pb.ShardUpdate.Range(
        topic=T, partition=p, start_offset=start, end_offset=end, epoch=epoch
    )


def test_a_request_is_answered_with_grants_and_done_reports_commit_the_prefix():
    c = coordinator()
    grant = c.handle(update(want_shards=2), now_s=0.1)
    assert grant is not None and grant.worker_id == "w"
    assert [(s.partition, s.start_offset, s.end_offset) for s in grant.shards] == [
        (0, 0, 10),
        (0, 10, 20),
    ]
    first = grant.shards[0]
    assert c.handle(update(done=[first], held=[grant.shards[1]]), now_s=0.2) is None
    assert c.book.committable() == {(T, 0): 10}


def test_bad_input_is_logged_ignored_and_commits_nothing(caplog):
    c = coordinator()
    grant = c.handle(update(want_shards=1), now_s=0.1)
    caplog.set_level(logging.WARNING)
    assert c.handle(b"\x00\xffgarbage", now_s=0.2) is None
    assert c.handle(wire.encode(pb.ShardUpdate(job="other", worker_id="w")), 0.2) is None
    assert c.handle(wire.encode(pb.ShardUpdate(job="job")), 0.2) is None
    bad = [
        rng(0, 0, 5),  # not a shard
        rng(0, 0, 10**9),  # past what was cut
        rng(7, 0, 10),  # no such partition
        pb.ShardUpdate.Range(topic="", partition=0, start_offset=0, end_offset=10),
    ]
    c.handle(update(done=bad), now_s=0.3)
    c.handle(update(done=[grant.shards[0]]), now_s=0.4)
    c.handle(update(done=[grant.shards[0]]), now_s=0.5)  # done twice
    assert c.book.committable() == {(T, 0): 10}
    assert c.refused == {
        "MALFORMED": 4,
        "UNKNOWN_SHARD": 1,
        "OUT_OF_RANGE": 1,
        "UNKNOWN_PARTITION": 1,
        "ALREADY_DONE": 1,
    }
    messages = [r.getMessage() for r in caplog.records]
    assert any("malformed shard update" in m for m in messages)
    assert any("already done" in m for m in messages)
    assert any("outside" in m for m in messages)


def test_a_leaving_worker_returns_its_shards_to_the_queue():
    c = coordinator()
    grant = c.handle(update(want_shards=2), now_s=0.1)
    assert c.handle(update(leaving=True, held=list(grant.shards)), now_s=0.2) is None
    assert c.book.leases() == []
    other = c.handle(
        wire.encode(pb.ShardUpdate(job="job", worker_id="v", want_shards=1)), now_s=0.3
    )
    assert other.shards[0].start_offset == 0


def test_a_holder_of_a_shard_leased_to_another_is_told_to_let_go():
    c = coordinator()
    grant = c.handle(update(want_shards=1), now_s=0.1)
    c.handle(wire.encode(pb.ShardUpdate(job="job", worker_id="v")), now_s=9.9)  # v is heard
    c.tick({}, {}, now_s=10.0)  # w went silent: its lease expired
    other = c.handle(
        wire.encode(pb.ShardUpdate(job="job", worker_id="v", want_shards=1)), now_s=10.1
    )
    assert other.shards[0].start_offset == grant.shards[0].start_offset
    answer = c.handle(update(held=[grant.shards[0]]), now_s=10.2)
    assert answer is not None and [r.start_offset for r in answer.revoked] == [0]
