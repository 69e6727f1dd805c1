"""The worker count from the workers' own reports: distinct ids within the expiry, the
newest stated pool size overriding, bounded memory (a model-based test against a plain
dictionary of last-heard times)."""

import random

import pytest

from streamtrain.errors import ConfigError
from streamtrain.roster import RosterSettings, WorkerRoster


def test_distinct_ids_are_counted_once_and_expire():
    roster = WorkerRoster(RosterSettings(expiry_s=30))
    assert roster.count(0.0) is None  # nobody heard yet: unknown, not 0
    for worker, at_s in (("a", 0.0), ("b", 1.0), ("a", 5.0)):
        roster.heard(worker, at_s)
    assert roster.count(5.0) == 2
    assert roster.count(31.5) == 1  # b last heard at 1 s
    assert roster.count(100.0) == 0  # everyone gone


def test_a_stated_pool_size_overrides_and_the_newest_live_one_wins():
    roster = WorkerRoster(RosterSettings(expiry_s=30))
    roster.heard("a", 0.0, 5)
    roster.heard("b", 1.0)
    assert roster.count(2.0) == 5
    roster.heard("a", 3.0, 7)
    assert roster.count(4.0) == 7
    assert roster.count(34.0) == 0  # a (and its claim) and b expired


def test_an_older_report_and_nonsense_are_ignored():
    roster = WorkerRoster()
    roster.heard("a", 10.0, 3)
    roster.heard("a", 5.0, 9)
    roster.heard("", 11.0)
    roster.heard("b", float("nan"))
    assert roster.count(12.0) == 3 and len(roster) == 1


def test_memory_is_bounded_whatever_is_sent():
    roster = WorkerRoster(RosterSettings(expiry_s=1e9, max_workers=100))
    for index in range(10_000):
        roster.heard(f"fake-{index}", float(index))
    assert len(roster) == 100 and roster.dropped == 9_900
    assert roster.count(10_000.0) == 100


def test_bad_settings():
    with pytest.raises(ConfigError):
        RosterSettings(expiry_s=0)
    with pytest.raises(ConfigError):
        RosterSettings(max_workers=0)


@pytest.mark.parametrize("seed", range(200))
def test_the_count_matches_a_plain_model(seed):
    rng = random.Random(seed)  # noqa: S311 - a test's reproducible draws
    expiry = 30.0
    roster = WorkerRoster(RosterSettings(expiry_s=expiry))
    model: dict[str, tuple[float, int]] = {}
    for _ in range(rng.randrange(60)):
        worker, at_s, claim = rng.choice("abcdef"), float(rng.randrange(200)), rng.randrange(4)
        roster.heard(worker, at_s, claim)
        if worker not in model or model[worker][0] <= at_s:
            model[worker] = (at_s, claim)
    newest = max((at for at, _ in model.values()), default=None)
    now = float(rng.randrange(300))
    query = now if newest is None else max(now, newest)  # time moves on
    live = [v for v in model.values() if v[0] >= query - expiry]
    claims = [(at, claim) for at, claim in live if claim > 0]
    expected = None if not model else (max(claims)[1] if claims else len(live))
    assert roster.count(query) == expected
