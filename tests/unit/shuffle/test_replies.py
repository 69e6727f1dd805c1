"""Answers to senders of older releases: no RECEIVED, a grant with each ACKED."""

import zmq

from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant
from streamtrain.shuffle import codec
from streamtrain.shuffle.replies import Replies
from streamtrain.shuffle.stats import ForwardingCounters


def _pair(context, route):
    router = context.socket(zmq.ROUTER)
    router.linger = 0
    router.router_mandatory = 1
    router.bind("inproc://replies")
    dealer = context.socket(zmq.DEALER)
    dealer.linger = 0
    dealer.routing_id = route
    dealer.connect("inproc://replies")
    dealer.send_multipart([codec.KIND_BATCH, b"hello"])  # the router learns the route
    router.recv_multipart()
    return router, dealer


def _received(dealer):
    frames = []
    while dealer.poll(200):
        frames.append(dealer.recv_multipart())
    return frames


def test_a_first_release_sender_gets_no_received_and_a_grant_per_ack():
    replies = Replies("j", "me", 1.0, ForwardingCounters())
    with zmq.Context() as context:
        router, dealer = _pair(context, b"old")
        replies.remember("old", b"old", plain=True)
        replies.send(router, "old", "b1", BatchAck.RECEIVED)
        replies.send(router, "old", "b1", BatchAck.ACKED)
        replies.grant(router, "old", 50)
        frames = _received(dealer)
        router.close()
        dealer.close()
    assert [kind for kind, _ in frames] == [codec.KIND_ACK, codec.KIND_CREDIT]
    ack = BatchAck()
    ack.ParseFromString(frames[0][1])
    assert ack.status == BatchAck.ACKED
    grant = CreditGrant()
    grant.ParseFromString(frames[1][1])
    assert (grant.credit_records, grant.sender_worker, grant.receiver_worker) == (50, "old", "me")


def test_a_current_sender_gets_received_and_no_grants():
    replies = Replies("j", "me", 1.0, ForwardingCounters())
    with zmq.Context() as context:
        router, dealer = _pair(context, b"new\x00nonce")
        replies.remember("new", b"new\x00nonce")
        replies.send(router, "new", "b1", BatchAck.RECEIVED)
        replies.grant(router, "new", 50)
        frames = _received(dealer)
        router.close()
        dealer.close()
    assert [kind for kind, _ in frames] == [codec.KIND_ACK]


def test_received_waits_and_is_not_sent_once_the_batch_is_acked():
    """A batch trained at once is answered once (ACKED), not twice; one that
    waits in the queue gets RECEIVED after RECEIVED_DELAY_S."""
    from streamtrain.shuffle.replies import RECEIVED_DELAY_S

    replies = Replies("j", "me", 1.0, ForwardingCounters())
    with zmq.Context() as context:
        router, dealer = _pair(context, b"new\x00nonce")
        replies.remember("new", b"new\x00nonce")
        replies.received("new", "quick", now=10.0)
        replies.received("new", "slow", now=10.0)
        assert replies.pending
        replies.send(router, "new", "quick", BatchAck.ACKED)
        replies.resend(router, {"new"}, now=10.0 + RECEIVED_DELAY_S / 2)  # not due yet
        replies.resend(router, {"new"}, now=10.0 + RECEIVED_DELAY_S)
        frames = _received(dealer)
        router.close()
        dealer.close()
    answers = []
    for _, payload in frames:
        ack = BatchAck()
        ack.ParseFromString(payload)
        answers.append((ack.batch_id, BatchAck.Status.Name(ack.status)))
    assert answers == [("quick", "ACKED"), ("slow", "RECEIVED")]
    assert not replies.pending
