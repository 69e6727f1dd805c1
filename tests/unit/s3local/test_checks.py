"""The local S3 server serves only the broker's requests: malformed ones get HTTP 400 at
once (never a dropped connection or a blocked handler), unsigned ones, ones signed with
other credentials and ones naming a host that is not loopback get 403, so a browser page
(a cross-origin "simple" POST, or DNS rebinding) cannot touch the broker's data."""

import http.client
import socket
import threading
import time

import pytest

from streamtrain.s3local.checks import (
    MAX_BODY_BYTES,
    BadRequest,
    Credentials,
    content_length,
    decode_token,
    encode_token,
    host_problem,
    max_keys,
    sign,
    signature_problem,
)
from streamtrain.s3local.server import STATS_PATH, serve
from streamtrain.s3local.store import Cursor

CREDENTIALS = Credentials("STTEST", "secret-for-the-test")
NOW_S = 1_800_000_000.0


@pytest.fixture
def server():
    running = serve("127.0.0.1", 0, "b", CREDENTIALS)
    thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield running.server_address[1]
    running.shutdown()
    running.server_close()
    thread.join(5)


def call(port, method, path, body=b"", headers=None, signed=True, credentials=CREDENTIALS):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        given = dict(headers or {})
        if signed:
            given = sign(method, path, f"127.0.0.1:{port}", body, credentials) | given
        connection.request(method, path, body=body or None, headers=given)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def raw(port, request: bytes, timeout_s=3.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        return sock.recv(200)


def test_a_malformed_content_length_or_max_keys_is_answered_400(server):
    assert call(server, "PUT", "/b/k", b"x")[0] == 200
    for value in (b"abc", b"-1", b"+3", b"1e3"):
        started = time.monotonic()
        answer = raw(
            server,
            b"PUT /b/neg HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + value + b"\r\n\r\nabc",
        )
        assert answer.startswith(b"HTTP/1.1 400"), (value, answer)
        assert time.monotonic() - started < 2.5  # answered, not waiting for EOF
    for query in ("max-keys=abc", "max-keys=-1"):
        status, body = call(server, "GET", f"/b?list-type=2&{query}")
        assert status == 400 and b"InvalidArgument" in body
    status, body = call(server, "GET", "/b?list-type=2&continuation-token=%21%21")
    assert status == 400
    answer = raw(
        server, b"PUT /b/big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 413")
    assert call(server, "GET", STATS_PATH, signed=False)[0] == 200  # still serving


def test_unsigned_or_foreign_requests_are_refused(server):
    assert call(server, "PUT", "/b/a/c", b"x")[0] == 200
    # a browser page's cross-origin "simple" POST: no preflight, no signature
    status, body = call(
        server,
        "POST",
        "/b?delete",
        b"<Delete><Object><Key>a/c</Key></Object></Delete>",
        {"Content-Type": "text/plain", "Origin": "http://evil.example"},
        signed=False,
    )
    assert status == 403 and b"AccessDenied" in body
    other = Credentials("STOTHER", "another-secret")
    assert call(server, "GET", "/b/a/c", credentials=other)[0] == 403
    wrong_secret = Credentials(CREDENTIALS.access_key_id, "guessed")
    assert call(server, "DELETE", "/b/a/c", credentials=wrong_secret)[0] == 403
    # DNS rebinding: the page's own host name reaches the loopback port
    headers = sign("GET", "/b/a/c", "evil.example:80", b"", CREDENTIALS)
    assert call(server, "GET", "/b/a/c", headers=headers, signed=False)[0] == 403
    assert call(server, "GET", STATS_PATH, headers={"Host": "evil.example"}, signed=False)[0] == 403
    assert call(server, "GET", "/b/a/c") == (200, b"x")  # nothing was deleted


def test_a_body_that_is_not_the_signed_one_is_refused(server):
    headers = sign("PUT", "/b/k", f"127.0.0.1:{server}", b"signed body", CREDENTIALS)
    status, _ = call(server, "PUT", "/b/k", b"other body", headers, signed=False)
    assert status == 400
    assert call(server, "GET", "/b/k")[0] == 404


def test_content_length_and_max_keys_parsing():
    assert content_length({}) == 0 and content_length({"Content-Length": "12"}) == 12
    for bad in ("-1", "abc", " 1 2", "0x10"):
        with pytest.raises(BadRequest):
            content_length({"Content-Length": bad})
    with pytest.raises(BadRequest) as info:
        content_length({"Content-Length": str(MAX_BODY_BYTES + 1)})
    assert info.value.status == 413
    with pytest.raises(BadRequest):
        content_length({"Transfer-Encoding": "chunked"})
    assert max_keys({}) == 1000 and max_keys({"max-keys": "5000"}) == 1000
    assert max_keys({"max-keys": "0"}) == 0


def test_tokens_round_trip_and_foreign_ones_are_refused():
    for cursor in (Cursor("a/b/"), Cursor("a/b/", common_prefix=True), Cursor("ü/\n")):
        assert decode_token(encode_token(cursor)) == cursor
    for bad in ("!!", "eA==", ""):
        with pytest.raises(BadRequest):
            decode_token(bad)


@pytest.mark.parametrize(
    "host,ok",
    [
        ("127.0.0.1:9000", True),
        ("localhost:1", True),
        ("[::1]:9000", True),
        ("127.1.2.3", True),
        ("evil.example:9000", False),
        ("10.0.0.5:9000", False),
        ("", False),
    ],
)
def test_only_a_loopback_host_is_served(host, ok):
    assert (host_problem(host) is None) is ok


def test_a_signature_covers_the_method_path_query_and_time():
    path = "/b?list-type=2&prefix=a%2F"
    headers = sign("GET", path, "127.0.0.1:9", b"", CREDENTIALS, NOW_S)
    reordered = "/b?prefix=a%2F&list-type=2"  # the same query: canonical order
    assert signature_problem("GET", reordered, headers, CREDENTIALS, NOW_S) is None
    for method, other in (("DELETE", path), ("GET", "/b?list-type=2&prefix=b")):
        why = signature_problem(method, other, headers, CREDENTIALS, NOW_S)
        assert why is not None and "does not match" in why
    late = signature_problem("GET", path, headers, CREDENTIALS, NOW_S + 3600)
    assert late is not None and "within" in late
