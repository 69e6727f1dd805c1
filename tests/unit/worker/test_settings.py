"""The shuffle settings a worker derives from its queue and batch sizes (pure)."""

import pytest

from streamtrain.errors import ConfigError
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.worker.settings import worker_shuffle_settings

WILDCARD = "0.0.0.0"  # noqa: S104 - a value under test, nothing binds it


def test_defaults_follow_the_queue_and_batch_sizes():
    settings = worker_shuffle_settings(
        "job", "w1", policy="advanced", batch_records=50, queue_records=400
    )
    assert settings is not None
    assert settings.policy is ShufflePolicy.ADVANCED
    assert (settings.low_watermark_records, settings.high_watermark_records) == (80, 320)
    assert (settings.queue_capacity_records, settings.overflow_capacity_records) == (400, 400)
    assert (settings.batch_records, settings.credit_window_records) == (50, 320)
    assert (settings.heartbeat_interval_ms, settings.heartbeat_timeout_ms) == (1_000, 5_000)
    assert settings.curve is None


def test_given_values_win_and_none_policy_gives_none():
    settings = worker_shuffle_settings(
        "job",
        "w1",
        policy=ShufflePolicy.BASIC,
        batch_records=512,
        queue_records=512,
        low_watermark_records=10,
        high_watermark_records=20,
        heartbeat_interval_ms=100,
        heartbeat_timeout_ms=300,
        curve=True,
    )
    assert settings is not None
    assert (settings.low_watermark_records, settings.high_watermark_records) == (10, 20)
    assert settings.credit_window_records == 512  # a whole batch always fits the credit
    assert settings.curve is not None
    none = worker_shuffle_settings("j", "w", policy="none", batch_records=1, queue_records=1)
    assert none is None


def test_bad_values_are_config_errors():
    with pytest.raises(ConfigError, match="heartbeat"):
        worker_shuffle_settings(
            "j",
            "w",
            policy="advanced",
            batch_records=10,
            queue_records=100,
            heartbeat_interval_ms=2_000,
            heartbeat_timeout_ms=1_000,
        )
    with pytest.raises(ValueError, match="'sometimes'"):
        worker_shuffle_settings("j", "w", policy="sometimes", batch_records=1, queue_records=1)


def test_curve_is_the_default_beyond_loopback_only():
    """The shuffle authenticates (CURVE) wherever it binds beyond loopback, by default."""

    def settings(host, **kw):
        return worker_shuffle_settings(
            "j", "w", policy="advanced", batch_records=10, queue_records=100, host=host, **kw
        )

    assert settings("127.0.0.1").curve is None  # loopback stays usable without keys
    assert settings("localhost").curve is None
    assert settings("10.0.0.7").curve is not None
    assert settings("worker-3.svc").curve is not None
    assert settings(WILDCARD, advertise_host="10.0.0.7").curve is not None
    assert settings("127.0.0.1", curve=True).curve is not None
    with pytest.raises(ConfigError, match="must authenticate"):
        settings("10.0.0.7", curve=False)
