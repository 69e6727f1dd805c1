"""What the demo prints when its drain times out: the shard coordinator's lagging
partitions beside what the broker acknowledged (a real page served on 127.0.0.1)."""

import http.server
import json
import threading
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from streamtrain.demo.observe import TrainedIds, stall_lines
from streamtrain.demo.traffic import TrafficGenerator
from streamtrain.ports import free_port

VIEW = {
    "topic": "clicks",
    "partition": 1,
    "base": 70,
    "cut_to": 70,
    "hwm": 70,
    "committed": 70,
    "queued_count": 0,
    "queued": [],
    "leased_count": 0,
    "leased": [],
    "done_ranges": 0,
}


@pytest.fixture
def page():
    """A control app's ``/shards`` page answering ``page.body``."""
    state = SimpleNamespace(body={"lagging": [VIEW]})

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = json.dumps(state.body).encode()
            self.send_response(200 if self.path == "/shards" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.port = server.server_address[1]
    yield state
    server.shutdown()
    server.server_close()
    thread.join(5)


def trained_ids(tmp_path, ids):
    (tmp_path / "w-1.ids").write_bytes(np.asarray(ids, dtype="<i8").tobytes())
    trained = TrainedIds(tmp_path)
    trained.refresh()
    return trained


def test_each_lagging_partition_is_one_line_with_what_the_broker_acknowledged(tmp_path, page):
    trained = trained_ids(tmp_path, [0, 1, 2])
    generator = cast(TrafficGenerator, SimpleNamespace(acknowledged=np.array([3, 72])))
    lines = stall_lines(trained, 5, generator, page.port)
    assert lines[0] == "drain timed out: 2 records not trained yet"
    assert lines[1].startswith("shards clicks[1]: base 70 cut 70 hwm 70 committed 70;")
    assert lines[1].endswith("; produced 72")  # the coordinator never learnt of 70, 71
    assert len(lines) == 2


def test_no_page_and_a_partition_the_demo_does_not_know_are_said_plainly(tmp_path, page):
    trained = trained_ids(tmp_path, [])
    generator = cast(TrafficGenerator, SimpleNamespace(acknowledged=np.array([3])))
    page.body = {"lagging": [VIEW]}
    assert stall_lines(trained, 3, generator, page.port)[1].endswith("produced ?")
    closed = free_port()
    assert stall_lines(trained, 3, generator, closed) == [
        "drain timed out: 3 records not trained yet",
        "(no shard coordinator page answered)",
    ]
