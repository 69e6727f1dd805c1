"""The forecast feed's scoring, as the simulator's replays use it: the ratios and
one-step pairs it keeps, and the quantile factors it derives from them, equal those of
the plain definition (every new step, oldest first, against every issued prediction
that covers it, oldest first, into bounded deques)."""

import bisect
from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtrain.scale.policies.feed import _BUCKETS, Forecast, ForecastFeed, _Recent
from streamtrain.scale.policy import Observation
from streamtrain.scale.trigger import relative_error


def _never(history_steps):
    raise AssertionError("every prediction comes from the cache")


class _Reference:
    """The plain definition of the feed's scoring, with deques."""

    def __init__(self, horizon, kept):
        self.horizon = horizon
        self.issued: deque[tuple[int, np.ndarray]] = deque(maxlen=horizon)
        self.ratios: list[deque[float]] = [deque(maxlen=kept) for _ in _BUCKETS[:-1]]
        self.pairs: deque[tuple[float, float]] = deque(maxlen=30)
        self.scored = 0

    def observe(self, history, end, point):
        for k in range(max(self.scored, end - self.horizon, 0), end):
            actual = float(history[k])
            for start, prediction in self.issued:
                lead = k - start
                if 0 <= lead < len(prediction):
                    forecast = float(prediction[lead])
                    if lead == 0:
                        self.pairs.append((actual, forecast))
                    if forecast > 0:
                        bucket = bisect.bisect_right(_BUCKETS, lead) - 1
                        self.ratios[bucket].append(actual / forecast)
        self.scored = max(self.scored, end)
        if not self.issued or self.issued[-1][0] != end:
            self.issued.append((end, point))

    def upper(self, point, level):
        factors = np.ones(point.shape[0])
        leads = np.arange(point.shape[0])
        for b, ratios in enumerate(self.ratios):
            if len(ratios) >= 20:
                mask = (leads >= _BUCKETS[b]) & (leads < _BUCKETS[b + 1])
                factors[mask] = max(1.0, float(np.quantile(list(ratios), level)))
        return point * factors


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    gaps=st.lists(st.integers(0, 250), min_size=1, max_size=40),
    kept=st.integers(0, 300),
    level=st.sampled_from([0.5, 0.8, 0.95]),
)
def test_scoring_matches_the_plain_definition(seed, gaps, kept, level):
    rng = np.random.default_rng(seed)
    horizon = 150
    total = 1 + sum(gaps)
    history = rng.uniform(0.0, 100.0, total)
    history[rng.random(total) < 0.1] = 0.0
    cache = {}
    for n in range(1, total + 1):
        # Predictions of several lengths, some zero or negative (never scored as ratios).
        point = rng.uniform(-5.0, 100.0, int(rng.choice([horizon, horizon // 2, horizon + 30])))
        cache[n] = Forecast(point)
    feed = ForecastFeed(_never, max_horizon_steps=horizon, scored_predictions=kept, cache=cache)
    reference = _Reference(horizon, kept)
    n = 1
    for gap in gaps:
        n += gap
        obs = Observation(
            now_s=n * 60.0,
            current_workers=1,
            step_s=60,
            history_start_s=0.0,
            arrivals_records_per_s=history[:n],
            max_lag_s=0.0,
            backlog_records=0.0,
        )
        got = feed.upper(obs, 60, level)
        reference.observe(history, n, cache[n].point)
        want = reference.upper(cache[n].point[:60], level)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
        assert feed.recent_error() == _recent_error(reference.pairs)
    for mine, theirs in zip(feed._ratios, reference.ratios, strict=True):
        assert sorted(mine.values().tolist()) == sorted(theirs)


def _recent_error(pairs, steps=10):
    recent = np.asarray(list(pairs)[-steps:], dtype=np.float64).reshape(-1, 2)
    return relative_error(recent[:, 0], recent[:, 1])


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(0, 40),
    chunks=st.lists(st.lists(st.floats(-1e6, 1e6), max_size=60), max_size=12),
)
def test_recent_keeps_what_a_bounded_deque_keeps(capacity, chunks):
    recent, plain = _Recent(capacity), deque[float](maxlen=capacity)
    for chunk in chunks:
        recent.extend(np.asarray(chunk, dtype=np.float64))
        plain.extend(chunk)
        assert len(recent) == len(plain)
        assert sorted(recent.values().tolist()) == sorted(plain)
