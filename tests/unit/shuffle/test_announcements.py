"""What a worker may announce: endpoints, keys, heartbeats, worker ids;
and the settings that decide what a worker announces and whether it authenticates."""

from typing import Any

import pytest

from streamtrain.errors import ConfigError
from streamtrain.shuffle.announcements import (
    curve_key_problem,
    endpoint_problem,
    heartbeat_problem,
    is_loopback,
    is_wildcard,
    worker_id_problem,
)
from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.settings import CurveKeys, ShuffleSettings

WILDCARD = "0.0.0.0"  # noqa: S104 - a value under test, nothing binds it

GOOD_KEY = b"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"  # a key from zmq.curve_keypair()


@pytest.mark.parametrize(
    "endpoint",
    [
        "tcp://127.0.0.1:5555",
        "tcp://10.0.0.7:1",
        "tcp://worker-3.jobs.svc.cluster.local:65535",
        "tcp://[::1]:5555",
    ],
)
def test_usable_endpoints(endpoint):
    assert endpoint_problem(endpoint) is None


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("tcp://nohost", "no host:port"),
        ("tcp://*:5555", "wildcard"),
        ("tcp://0.0.0.0:5555", "wildcard"),
        ("tcp://[::]:5555", "wildcard"),
        ("tcp://127.0.0.1:0", "port"),
        ("tcp://127.0.0.1:70000", "port"),
        ("tcp://127.0.0.1:http", "port"),
        ("tcp://300.1.1.1:5555", "neither"),
        ("tcp://bad host:5555", "neither"),
        ("tcp://eth0;10.0.0.1:5555", "neither"),
        ("tcp://[zz]:5555", "IPv6"),
        ("ipc:///tmp/x", "not a tcp"),
        ("inproc://x", "not a tcp"),
        ("", "not a tcp"),
    ],
)
def test_unusable_endpoints_say_why(endpoint, why):
    problem = endpoint_problem(endpoint)
    assert problem is not None and why in problem


def test_curve_keys_are_forty_z85_characters_that_decode():
    assert curve_key_problem(GOOD_KEY) is None
    assert curve_key_problem(CurveKeys.generate().public_key) is None
    assert "40 Z85 characters, this one 9" in (curve_key_problem(b"123456789") or "")
    assert "outside Z85" in (curve_key_problem(b"~" * 40) or "")
    assert "overflows" in (curve_key_problem(b"#" * 40) or "")  # 84 * 85^4 + ... > 2^32


def test_a_heartbeat_cannot_choose_its_own_expiry():
    now_ms = 1_800_000_000_000

    def problem(at_ms, interval_ms):
        return heartbeat_problem(
            at_ms, interval_ms, now_ms=now_ms, max_skew_ms=5_000, max_interval_ms=5_000
        )

    assert problem(now_ms, 1_000) is None
    assert problem(now_ms + 5_000, 1_000) is None  # within the allowed clock skew
    assert problem(now_ms - 3_600_000, 1_000) is None  # old: it simply expires
    assert "in the future" in (problem(now_ms + 3_600_000, 1_000) or "")
    assert "interval" in (problem(now_ms, 30 * 86_400_000) or "")
    assert "interval" in (problem(now_ms, 0) or "")
    assert "no heartbeat time" in (problem(0, 1_000) or "")


def test_worker_ids_fit_a_routing_id():
    assert worker_id_problem("worker-1") is None
    assert worker_id_problem("") is not None
    assert "NUL" in (worker_id_problem("a\x00b") or "")
    assert "longer" in (worker_id_problem("w" * 201) or "")
    assert "UTF-8" in (worker_id_problem("\udcff") or "")


def test_loopback_and_wildcards():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in (WILDCARD, "*", "10.0.0.7", "worker-3", "::"))
    assert all(is_wildcard(h) for h in ("*", WILDCARD, "::", "[::]"))
    assert not is_wildcard("127.0.0.1")


def test_a_peer_with_an_unusable_announcement_cannot_exist():
    """``tcp://nohost``, a 9-byte key or ``tcp://*:5555`` reached
    ``connect()`` on the forwarding thread, which raised and hung the whole shuffle."""
    good: dict[str, Any] = {
        "worker_id": "w",
        "data_endpoint": "tcp://127.0.0.1:1",
        "event_endpoint": "tcp://127.0.0.1:2",
        "incarnation": 1,
    }
    assert PeerInfo(**good, curve_public_key=GOOD_KEY).curve_public_key == GOOD_KEY
    for bad in (
        {"data_endpoint": "tcp://nohost"},
        {"event_endpoint": "tcp://*:5555"},
        {"curve_public_key": b"123456789"},
        {"worker_id": "a\x00b"},
        {"incarnation": -1},
    ):
        with pytest.raises(ConfigError):
            PeerInfo(**(good | bad))


def test_what_a_worker_announces_is_never_a_wildcard():
    """A fixed-port ``ShuffleSettings`` announced ``tcp://*:5555``."""
    with pytest.raises(ConfigError, match="advertise_host"):
        ShuffleSettings(job="j", worker_id="w", host=WILDCARD, curve=CurveKeys.generate())
    settings = ShuffleSettings(
        job="j",
        worker_id="w",
        host=WILDCARD,
        advertise_host="10.0.0.7",
        curve=CurveKeys.generate(),
    )
    assert (settings.bind_host, settings.announced_host) == (WILDCARD, "10.0.0.7")
    v6 = ShuffleSettings(job="j", worker_id="w", host="::1")
    assert (v6.bind_host, v6.announced_host) == ("[::1]", "[::1]")
    with pytest.raises(ConfigError, match="cannot announce"):
        ShuffleSettings(job="j", worker_id="w", advertise_host="not a host")


def test_the_shuffle_authenticates_beyond_loopback():
    """Nothing required CURVE on a shuffle listening on the network."""
    with pytest.raises(ConfigError, match="must authenticate"):
        ShuffleSettings(job="j", worker_id="w", host="10.0.0.7")
    assert ShuffleSettings(job="j", worker_id="w", host="10.0.0.7", curve=CurveKeys.generate())
    assert ShuffleSettings(job="j", worker_id="w", host="127.0.0.1").curve is None


def test_timing_settings_that_could_never_work_are_refused():
    with pytest.raises(ConfigError, match="state_rebroadcast_ms"):
        ShuffleSettings(job="j", worker_id="w", ack_timeout_ms=500, state_rebroadcast_ms=1_000)
    with pytest.raises(ConfigError, match="max_queued_ms"):
        ShuffleSettings(job="j", worker_id="w", max_queued_ms=1_000)
    with pytest.raises(ConfigError, match="max_frame_bytes"):
        ShuffleSettings(job="j", worker_id="w", max_frame_bytes=1_000)
