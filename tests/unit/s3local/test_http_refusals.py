"""The local S3 server over HTTP, as a browser or a sloppy client would talk to it:
malformed input answered 400 at once, unsigned or foreign-Host requests change nothing,
and a list that ends on a common prefix goes on past it."""

import http.client
import socket
import threading
import time

import pytest

from streamtrain.s3local.server import S3Store, serve


@pytest.fixture
def server():
    running = serve("127.0.0.1", 0, "b")
    thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield running
    running.shutdown()
    running.server_close()
    thread.join(5)


def status(port, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        return connection.getresponse().status
    except (ConnectionError, http.client.HTTPException) as exc:
        return type(exc).__name__
    finally:
        connection.close()


def test_a_negative_content_length_is_answered_not_waited_on(server):
    port = server.server_address[1]
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"PUT /b/neg HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\nabc")
        answer = sock.recv(100)
    assert answer.startswith(b"HTTP/1.1 400")
    assert time.monotonic() - started < 4.0


def test_non_numeric_input_gets_an_answer_not_a_dropped_connection(server):
    port = server.server_address[1]
    assert status(port, "GET", "/b?list-type=2&max-keys=abc") in (400, 403)
    assert status(port, "PUT", "/b/k", None, {"Content-Length": "abc"}) == 400


def test_a_cross_origin_post_delete_from_a_browser_deletes_nothing(server):
    store = server.RequestHandlerClass.store
    store.put("a/c", b"x", "binary/octet-stream")
    port = server.server_address[1]
    body = b"<Delete><Object><Key>a/c</Key></Object></Delete>"
    headers = {"Content-Type": "text/plain", "Origin": "http://evil.example"}
    assert status(port, "POST", "/b?delete", body, headers) == 403
    assert store.get("a/c") is not None


def test_a_host_that_is_not_loopback_is_refused(server):
    """DNS rebinding: a page of evil.example reaches the loopback port under its name."""
    server.RequestHandlerClass.store.put("k", b"x", "binary/octet-stream")
    assert status(server.server_address[1], "GET", "/b/k", headers={"Host": "evil.example"}) == 403


def test_paging_that_ends_on_a_common_prefix_goes_on_past_it():
    store = S3Store()
    for key in ("a/b/1", "a/b/2", "a/c"):
        store.put(key, b"x", "binary/octet-stream")
    pages: list[list[str]] = []
    after: object = ""  # where the previous page ended, as the store said it
    for _ in range(6):
        objects, prefixes, more = store.list("a/", after, "/", 1)  # type: ignore[arg-type]
        pages.append([k for k, _ in objects] + prefixes)
        if more is None:
            break
        after = more
    assert pages == [["a/b/"], ["a/c"]]
