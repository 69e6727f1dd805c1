"""The heal server (loopback HTTP, no pickle) and the durable checkpoint directory."""

import http.client
import threading
from datetime import timedelta

import pytest
import torch

from streamtrain.elastic.checkpoints import CheckpointDir
from streamtrain.elastic.heal import HealServer
from streamtrain.errors import ElasticError

TIMEOUT = timedelta(seconds=5)


@pytest.fixture
def server():
    heal = HealServer("127.0.0.1", timeout_s=2.0, max_bytes=1 << 20)
    yield heal
    heal.shutdown()


def state(value):
    return {"user": {"default": {"model": {"w": torch.full((3,), value)}}}, "torchft": {"step": 4}}


def test_a_joiner_fetches_the_staged_state_of_its_step(server):
    assert server.metadata() == f"http://127.0.0.1:{server.port}/state/"
    server.send_checkpoint([1], 4, state(2.0), TIMEOUT)
    got = server.recv_checkpoint(0, server.metadata(), 4, TIMEOUT)
    assert torch.equal(got["user"]["default"]["model"]["w"], torch.full((3,), 2.0))
    assert got["torchft"] == {"step": 4}


def test_a_fetch_waits_for_the_state_to_be_staged(server):
    threading.Timer(0.3, server.send_checkpoint, ([1], 9, state(1.0), TIMEOUT)).start()
    got = server.recv_checkpoint(0, server.metadata(), 9, TIMEOUT)
    assert got["torchft"] == {"step": 4}


def test_nothing_is_served_for_another_step_or_once_the_vote_is_over(server):
    server.send_checkpoint([1], 4, state(1.0), TIMEOUT)
    with pytest.raises(ElasticError, match="no state for step 5"):
        server.recv_checkpoint(0, server.metadata(), 5, timedelta(seconds=5))
    server.disallow_checkpoint()
    with pytest.raises(ElasticError, match="no state for step 4"):
        server.recv_checkpoint(0, server.metadata(), 4, timedelta(seconds=5))


def test_a_state_over_the_limit_or_malformed_is_refused(server):
    small = HealServer("127.0.0.1", timeout_s=1.0, max_bytes=64)
    try:
        server.send_checkpoint([1], 1, {"w": torch.zeros(1000)}, TIMEOUT)
        with pytest.raises(ElasticError, match="limit 64"):
            small.recv_checkpoint(0, server.metadata(), 1, TIMEOUT)
    finally:
        small.shutdown()
    with server._staged:  # a peer that serves garbage
        server._step, server._payload = 2, b"\x80\x04not a state"
    with pytest.raises(ElasticError, match="malformed"):
        server.recv_checkpoint(0, server.metadata(), 2, TIMEOUT)
    with pytest.raises(ElasticError, match="unusable heal address"):
        server.recv_checkpoint(0, "file:///etc/passwd#", 2, TIMEOUT)


def test_it_answers_only_its_own_path(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.request("GET", "/etc/passwd")
    assert connection.getresponse().status == 404
    connection.close()


def test_checkpoints_are_written_whole_and_the_oldest_dropped(tmp_path):
    directory = CheckpointDir(tmp_path / "c", keep=2)
    assert directory.latest_step() == 0
    for step in (5, 10, 15):
        directory.save(step, {"model": {"w": torch.full((2,), float(step))}})
    assert directory.steps() == [10, 15]
    assert torch.equal(directory.load(15)["model"]["w"], torch.full((2,), 15.0))
    (tmp_path / "c" / ".step-20.state.123.tmp").write_bytes(b"half")  # a torn write
    assert directory.latest_step() == 15
    (tmp_path / "c" / "step-10.state").write_bytes(b"garbage")
    with pytest.raises(ElasticError, match=r"step-10\.state"):
        directory.load(10)
    with pytest.raises(ElasticError, match=r"step-99\.state"):
        directory.load(99)
