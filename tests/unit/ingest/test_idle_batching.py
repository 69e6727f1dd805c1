"""The fetch thread's carry (MessageBatcher) and the one idle clock (IdleClock): pure."""

import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.batching import MessageBatcher
from streamtrain.ingest.idle import IdleClock


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_idle_time_counts_from_the_first_assignment():
    clock = Clock()
    idle = IdleClock(5.0, clock=clock)
    clock.now += 60
    assert not idle.expired(assigned=False)  # not joined yet: not idle, the clock restarts
    clock.now += 4.9
    assert not idle.expired(assigned=True)
    clock.now += 0.1
    assert idle.expired(assigned=True)


def test_a_record_restarts_the_idle_time():
    clock = Clock()
    idle = IdleClock(5.0, clock=clock)
    clock.now += 4
    idle.busy()
    clock.now += 4
    assert not idle.expired()
    clock.now += 1
    assert idle.expired()


def test_records_on_their_way_are_not_idle_and_settled_is_asked_only_once_assigned():
    clock = Clock()
    idle = IdleClock(1.0, clock=clock)
    asked = []

    def settled():
        asked.append(clock.now)
        return len(asked) > 1

    clock.now += 10
    assert not idle.expired(assigned=False, settled=settled)
    assert asked == []
    clock.now += 10
    assert not idle.expired(assigned=True, settled=settled)  # still in flight: restart
    clock.now += 0.5
    assert not idle.expired(assigned=True, settled=settled)
    clock.now += 0.5
    assert idle.expired(assigned=True, settled=settled)


def test_no_limit_never_expires():
    clock = Clock()
    idle = IdleClock(None, clock=clock)
    clock.now += 1e9
    assert not idle.expired()


def test_whole_batches_go_out_at_once_and_a_remainder_waits_for_more():
    batcher = MessageBatcher[int](batch_records=4, linger_s=0.5)
    assert batcher.add(list(range(10)), now=0.0) == [[0, 1, 2, 3, 4, 5, 6, 7]]  # 2 batches
    assert len(batcher) == 2
    assert batcher.add([10, 11], now=0.1) == [[8, 9, 10, 11]]
    assert len(batcher) == 0
    assert batcher.add([], now=0.2) == []


def test_a_remainder_goes_out_after_linger_or_when_consume_came_back_empty():
    batcher = MessageBatcher[int](batch_records=4, linger_s=0.5)
    assert batcher.add([1], now=0.0) == []
    assert batcher.add([2], now=0.4) == []
    assert batcher.add([3], now=0.5) == [[1, 2, 3]]  # the oldest waited linger_s
    assert batcher.add([4], now=1.0) == []
    assert batcher.add([], now=1.01) == [[4]]  # nothing more came: no waiting


def test_cutting_a_whole_batch_restarts_the_linger_of_the_remainder():
    batcher = MessageBatcher[int](batch_records=3, linger_s=0.5)
    assert batcher.add([1], now=0.0) == []
    assert batcher.add([2, 3, 4], now=0.4) == [[1, 2, 3]]
    assert batcher.add([5], now=0.8) == []  # 4 has waited only since the cut at 0.4
    assert batcher.add([6, 7], now=0.9) == [[4, 5, 6]]
    assert batcher.add([8], now=1.5) == [[7, 8]]
    batcher.add([1, 2], now=2.0)
    assert batcher.add([3, 4, 5, 6, 7, 8], now=2.1) == [[1, 2, 3, 4, 5, 6]]  # two batches
    assert len(batcher) == 2


def test_drop_forgets_carried_messages_of_revoked_partitions():
    batcher = MessageBatcher[tuple[int, int]](batch_records=10, linger_s=1.0)
    batcher.add([(0, 1), (1, 1), (0, 2)], now=0.0)
    assert batcher.drop(lambda m: m[0] == 0) == 2
    assert batcher.drop(lambda m: m[0] == 0) == 0
    assert batcher.add([], now=0.1) == [[(1, 1)]]
    with pytest.raises(ConfigError):
        MessageBatcher[int](batch_records=0, linger_s=0.0)


def test_consume_blocks_no_longer_than_the_carried_remainder_may_wait():
    batcher = MessageBatcher[int](batch_records=4, linger_s=0.5)
    assert batcher.wait_s(now=0.0, longest_s=0.1) == 0.1  # nothing carried
    batcher.add([1, 2], now=10.0)
    assert batcher.wait_s(now=10.0, longest_s=1.0) == 0.5
    assert batcher.wait_s(now=10.0, longest_s=0.1) == 0.1
    assert batcher.wait_s(now=10.3, longest_s=1.0) == pytest.approx(0.2)
    assert batcher.wait_s(now=11.0, longest_s=1.0) == 0.0  # overdue: do not block at all
    assert batcher.add([], now=11.0) == [[1, 2]]
    assert batcher.wait_s(now=11.0, longest_s=1.0) == 1.0
