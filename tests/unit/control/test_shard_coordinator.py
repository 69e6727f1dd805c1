"""ShardCoordinator: wire messages in, grants out; bad input is logged and ignored."""

import logging

import numpy as np

from streamtrain import wire
from streamtrain.control.shard_coordinator import ShardCoordinator, ShardJobSettings
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards import ShardClient, ShardSettings

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


def test_a_stalled_worker_that_gets_a_split_piece_back_commits_nothing_untrained():
    """Through the coordinator and a worker's client: A stalls past its lease with
    1000..1599 of [1000,2000) queued; a slow peer takes a split piece; one answer to A
    revokes [1000,2000) and grants [1200,2000). A's stale records count for nothing, so
    [1200,2000) is done only once A trained its own 1200..1999."""
    c = ShardCoordinator(ShardJobSettings(job="ctr", topics=(T,)))
    c.tick({(T, 0): 3000}, {(T, 0): 0}, now_s=0.0)

    def send(client, now_s, want=None):
        message = client.update(now_s * 10)  # due: ten heartbeat intervals a second
        if want is not None:
            message.want_shards = want
        answer = c.handle(wire.encode(message), now_s)
        if answer is not None:
            client.apply(answer)
        return answer

    a = ShardClient("ctr", "A", prefetch_shards=1)
    b = ShardClient("ctr", "B", prefetch_shards=1)
    send(b, 0.0, want=1)
    b.ack(b.accept(T, 0, np.arange(0, 1000, dtype=np.int64)))
    send(b, 10.0, want=0)  # 1000 records in 10 s: a slow worker
    send(a, 10.0, want=1)
    stale = a.accept(T, 0, np.arange(1000, 1600, dtype=np.int64))
    for t in (11.0, 12.0, 13.0, 14.0):  # A stalls; B heartbeats
        send(b, t, want=0)
        c.tick({(T, 0): 3000}, {}, t)
    send(b, 14.1, want=1)
    [piece] = b.holdings.grants()
    assert piece.shard.end_offset < 2000
    answer = send(a, 14.2, want=1)
    assert [r.start_offset for r in answer.revoked] == [1000]
    [again] = a.holdings.grants()
    assert again.shard.start_offset == piece.shard.end_offset
    fresh = a.accept(T, 0, np.arange(again.shard.start_offset, 2000, dtype=np.int64))
    a.ack(stale)  # the stale batch is trained first: counts for nothing
    a.ack(fresh[: 1600 - again.shard.start_offset])  # then the new copies up to 1599
    b.ack(b.accept(T, 0, np.arange(piece.shard.start_offset, piece.shard.end_offset)))
    send(b, 14.3, want=0)
    send(a, 14.3, want=0)
    assert c.book.committable() == {(T, 0): piece.shard.end_offset}  # 1600.. untrained
    a.ack(fresh[1600 - again.shard.start_offset :])
    send(a, 14.4, want=0)
    assert c.book.committable() == {(T, 0): 2000}


def test_one_update_that_raises_is_counted_and_the_next_is_served(monkeypatch, caplog):
    c = coordinator()

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(c.book, "heartbeat", broken)
    caplog.set_level(logging.ERROR)
    assert c.handle(update(want_shards=1), now_s=0.1) is None
    assert c.failed == 1 and "could not be applied" in caplog.text
    monkeypatch.undo()
    assert c.handle(update(want_shards=1), now_s=0.2) is not None
    assert c.state_json(0.0)["failed"] == 1


def test_an_epoch_the_coordinator_never_issued_is_refused_and_grants_go_on(caplog):
    c = coordinator()
    caplog.set_level(logging.WARNING)
    answer = c.handle(update(held=[rng(0, 0, 10, epoch=2**64 - 1)]), now_s=0.1)
    assert [r.start_offset for r in answer.revoked] == [0]
    assert "did not issue" in caplog.text
    grant = c.handle(
        wire.encode(pb.ShardUpdate(job="job", worker_id="v", want_shards=2)), now_s=0.2
    )
    assert [s.epoch for s in grant.shards] == [1, 2]
    assert c.failed == 0


def test_after_a_restore_old_requests_are_not_served_and_holders_reclaim_first():
    """A restarted app reads the updates sent while it was down first: their requests
    are old and must not hand out a shard whose grant the old process sent (its table
    write lost) before the holder's live heartbeat reclaims it."""
    old = coordinator()
    [lost] = old.handle(update(want_shards=1), now_s=0.1).shards  # its write was lost
    table: list[dict[str, object]] = []  # nothing of it reached the table
    new = ShardCoordinator(old.settings)
    assert new.restore(table, now_s=100.0) == 0
    new.tick({(T, 0): 30, (T, 1): 10}, {(T, 0): 0, (T, 1): 0}, now_s=100.0)
    restored = ShardCoordinator(old.settings)
    restored.restore(list(new.book.snapshot().values()), now_s=200.0)

    def sent(at_s, **kw):
        return wire.encode(
            pb.ShardUpdate(
                job="job", worker_id=kw.pop("worker", "v"), sent_at_ms=int(at_s * 1000), **kw
            )
        )

    # the backlog of old updates is read slowly: past the book's own grace
    assert restored.handle(sent(150.0, want_shards=3), now_s=204.0) is None  # old: not served
    assert restored.handle(sent(204.1, want_shards=3), now_s=204.2) is None  # live; held back
    assert restored.handle(sent(204.3, worker="w", held=[lost]), now_s=204.4) is None
    grant = restored.handle(sent(208.0, want_shards=3), now_s=208.0)
    assert grant is not None and lost not in list(grant.shards)
    assert [g.worker_id for g in restored.book.held_by("w")] == ["w"]


def test_a_late_leaving_update_of_an_earlier_process_takes_nothing_from_its_replacement(caplog):
    c = coordinator()
    grant = c.handle(update(want_shards=1, sent_at_ms=2_000), now_s=0.1)  # the replacement
    # the executor's hand-back for the dead process of the same id, sent before the
    # replacement's first update, read after it
    assert c.handle(update(leaving=True, sent_at_ms=1_000), now_s=0.2) is None
    assert [g.shard.start_offset for g in c.book.held_by("w")] == [grant.shards[0].start_offset]
    assert c.refused == {"STALE_LEAVING": 1}
    assert any("leaving update" in r.getMessage() for r in caplog.records)
    # the replacement's own leaving, newer than everything it sent, is honoured
    assert c.handle(update(leaving=True, sent_at_ms=3_000), now_s=0.3) is None
    assert c.book.held_by("w") == []
