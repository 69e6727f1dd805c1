"""Talking to older releases during a rolling upgrade: dialect choice and evidence."""

from streamtrain.shuffle import codec
from streamtrain.shuffle.legacy import Dialect, LegacyDialer, batch_version, plain_sender
from streamtrain.shuffle.membership import PeerInfo


def _peer(worker, version):
    return PeerInfo(
        worker, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", 1, batch_schema_version=version
    )


def test_a_bare_routing_id_is_a_sender_only_for_a_legacy_member():
    members = {"old": _peer("old", 1), "new": _peer("new", 2)}
    assert plain_sender(b"old", members) == "old"
    assert plain_sender(b"new", members) is None  # a current worker always uses a nonce
    assert plain_sender(b"stranger", members) is None
    assert plain_sender(b"\xff\xfe", members) is None


def test_peers_announce_whether_they_are_legacy():
    assert _peer("a", 1).legacy
    assert not _peer("a", 2).legacy
    assert not PeerInfo("a", "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", 1).legacy


def test_batches_go_in_the_form_the_receiver_announced():
    assert batch_version(_peer("old", 1)) == 1
    assert batch_version(_peer("new", codec.BATCH_SCHEMA_VERSION)) == codec.BATCH_SCHEMA_VERSION
    assert batch_version(None) == codec.BATCH_SCHEMA_VERSION


def test_the_dialer_switches_only_on_silence_since_the_batch_went_out():
    dialer = LegacyDialer()
    assert dialer.dialect("r") is Dialect.ROUTED
    dialer.answered("r", now=5.0)
    assert dialer.timed_out("r", sent_at=4.0, now=10.0) is None  # it answered after
    assert dialer.timed_out("r", sent_at=6.0, now=10.0) is Dialect.PLAIN
    assert dialer.dialect("r") is Dialect.PLAIN
    # batches sent before the switch time out too: they say nothing about the new dialect
    assert dialer.timed_out("r", sent_at=7.0, now=10.5) is None
    assert dialer.timed_out("r", sent_at=11.0, now=14.0) is Dialect.ROUTED
    dialer.forget("r")
    assert dialer.dialect("r") is Dialect.ROUTED
