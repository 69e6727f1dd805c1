"""Small seasonal series for the forecaster tests."""

import numpy as np


def seasonal_with_trend(days, *, seed=0, growth_per_day=0.02, noise=0.05, step_s=60):
    """Daily and weekly seasonality, a linear trend, AR(1) multiplicative noise."""
    rng = np.random.default_rng(seed)
    per_day = 86_400 // step_s
    t = np.arange(days * per_day)
    hour = (t % per_day) / per_day * 24
    weekday = (t // per_day) % 7
    daily = 0.3 + 0.7 * np.exp(-0.5 * ((hour - 15) / 4) ** 2)
    weekly = np.where(weekday >= 5, 0.7, 1.0)
    trend = 1 + growth_per_day * t / per_day
    ar = np.zeros(t.size)
    shocks = rng.normal(0, noise * np.sqrt(1 - 0.8**2), t.size)
    for i in range(1, t.size):
        ar[i] = 0.8 * ar[i - 1] + shocks[i]
    day_level = np.repeat(np.exp(rng.normal(0, 0.05, days)), per_day)
    return 1000 * daily * weekly * trend * day_level * np.exp(ar)
