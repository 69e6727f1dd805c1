"""The local S3 server of the durable broker: what Tansu's object store relies on.

The store (pure: listing, conditional writes) and real HTTP round trips on loopback,
signed as Tansu signs them (the refusals are in test_checks.py).
"""

import http.client
import json
import threading

import pytest

from streamtrain.errors import ConfigError
from streamtrain.s3local.checks import Credentials, sign
from streamtrain.s3local.server import STATS_PATH, PreconditionFailed, S3Store, serve
from streamtrain.s3local.store import Cursor


def _store(*keys):
    store = S3Store()
    for key in keys:
        store.put(key, key.encode(), "binary/octet-stream")
    return store


def test_a_list_returns_the_keys_under_a_prefix_in_order_and_pages_on():
    store = _store("t/p1/b", "t/p0/b", "t/p0/a", "t/p0x", "u/a")
    objects, prefixes, more = store.list("t/p0/", "", "", 1000)
    assert [k for k, _ in objects] == ["t/p0/a", "t/p0/b"] and prefixes == [] and more is None
    first, _, more = store.list("t/", "", "", 2)
    assert [k for k, _ in first] == ["t/p0/a", "t/p0/b"] and more == Cursor("t/p0/b")
    rest, _, more = store.list("t/", more, "", 2)
    assert [k for k, _ in rest] == ["t/p0x", "t/p1/b"] and more is None


def test_a_delimiter_folds_keys_into_common_prefixes():
    store = _store("c/g/a/1", "c/g/a/2", "c/g/b/1", "c/g/x.json")
    objects, prefixes, more = store.list("c/g/", "", "/", 1000)
    assert [k for k, _ in objects] == ["c/g/x.json"]
    assert prefixes == ["c/g/a/", "c/g/b/"] and more is None


def test_conditional_writes_are_what_optimistic_updates_need():
    store = S3Store()
    first = store.put("w.json", b"1", "application/json", if_none_match="*")
    with pytest.raises(PreconditionFailed):  # create: it exists already
        store.put("w.json", b"2", "application/json", if_none_match="*")
    second = store.put("w.json", b"2", "application/json", if_match=first.etag)
    assert second.etag != first.etag
    with pytest.raises(PreconditionFailed):  # update from a stale version
        store.put("w.json", b"3", "application/json", if_match=first.etag)
    with pytest.raises(PreconditionFailed):  # update of nothing
        store.put("missing", b"3", "application/json", if_match=first.etag)
    stored = store.get("w.json")
    assert stored is not None and stored.body == b"2"


def test_a_deleted_key_is_gone_from_lists():
    store = _store("a", "b", "c")
    store.delete("b")
    store.delete("never-there")
    assert [k for k, _ in store.list("", "", "", 10)[0]] == ["a", "c"]
    assert store.get("b") is None


def test_the_stats_count_what_a_client_cost():
    store = _store("t/0/a", "t/0/b", "t/1/a")
    store.put("t/0/a", b"again", "binary/octet-stream")  # an overwrite: no new object
    store.delete("t/1/a")
    store.get("t/0/b")
    store.get("missing")
    store.list("t/0/", "", "", 1)  # one page of one key
    store.list("t/", "", "/", 1000)  # one common prefix
    stats = store.stats()
    assert (stats.objects, stats.puts, stats.creates, stats.gets) == (2, 4, 3, 2)
    assert (stats.lists, stats.listed_keys) == (2, 2)


def test_a_listed_object_shows_its_latest_version():
    store = _store("k")
    newer = store.put("k", b"longer body", "binary/octet-stream")
    (key, listed), *_ = store.list("", "", "", 10)[0]
    assert key == "k" and listed is newer
    assert "<Size>11</Size>" in listed.entry and f"<ETag>{newer.etag}</ETag>" in (
        listed.entry.replace("&quot;", '"')
    )


def test_paging_past_a_common_prefix_never_repeats_it():
    """A continuation token on a common prefix listed it again: with max-keys=1 and a
    delimiter the pages never ended, at the default there were duplicates at the page
    boundaries."""
    store = _store("a/b/1", "a/b/2", "a/c", "a/d/1", "a/d/2", "a/e")
    for page_keys in (1, 2, 3):
        seen, after = [], Cursor("")
        for _ in range(20):
            objects, prefixes, more = store.list("a/", after, "/", page_keys)
            seen += [k for k, _ in objects] + prefixes
            if more is None:
                break
            after = more
        assert sorted(seen) == ["a/b/", "a/c", "a/d/", "a/e"], (page_keys, seen)


CREDENTIALS = Credentials("STTEST", "secret-for-the-test")


def serving(bucket="bkt"):
    server = serve("127.0.0.1", 0, bucket, CREDENTIALS)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    return server, thread


def stop(server, thread):
    server.shutdown()
    server.server_close()
    thread.join(5)


def signed_caller(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def call(method, path, body=None, headers=None):
        signed = sign(method, path, f"127.0.0.1:{port}", body or b"", CREDENTIALS)
        connection.request(method, path, body=body, headers=signed | (headers or {}))
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()

    return connection, call


def test_signed_list_pages_follow_their_tokens_to_the_end():
    server, thread = serving()
    connection, call = signed_caller(server.server_address[1])
    try:
        for key in ("a/b/1", "a/b/2", "a/c"):
            assert call("PUT", f"/bkt/{key}", b"x")[0] == 200
        pages, token = [], ""
        for _ in range(10):
            query = "list-type=2&prefix=a%2F&delimiter=%2F&max-keys=1"
            path = f"/bkt?{query}" + (f"&continuation-token={token}" if token else "")
            status, _, body = call("GET", path)
            assert status == 200, body
            text = body.decode()
            pages.append([p.split("<")[0] for p in text.split("<Prefix>")[2:]])
            pages[-1] += [k.split("<")[0] for k in text.split("<Key>")[1:]]
            if "<NextContinuationToken>" not in text:
                break
            token = text.split("<NextContinuationToken>")[1].split("<")[0]
        assert pages == [["a/b/"], ["a/c"]]
    finally:
        connection.close()
        stop(server, thread)


def test_the_server_answers_put_get_head_list_and_errors_over_http():
    server, thread = serving()
    port = server.server_address[1]
    connection, call = signed_caller(port)

    try:
        status, headers, _ = call("PUT", "/bkt/x/1.batch", b"abc", {"If-None-Match": "*"})
        assert status == 200 and headers["ETag"].startswith('"')
        etag = headers["ETag"]
        assert call("PUT", "/bkt/x/1.batch", b"d", {"If-None-Match": "*"})[0] == 412
        status, headers, body = call("GET", "/bkt/x/1.batch")
        assert (status, body, headers["ETag"]) == (200, b"abc", etag)
        assert "Last-Modified" in headers
        assert call("GET", "/bkt/x/1.batch", headers={"If-None-Match": etag})[0] == 304
        assert call("GET", "/bkt/x/1.batch", headers={"Range": "bytes=1-"})[2] == b"bc"
        assert call("HEAD", "/bkt/x/1.batch")[1]["Content-Length"] == "3"
        status, _, body = call("GET", "/bkt/nope")
        assert status == 404 and b"<Code>NoSuchKey</Code>" in body
        status, _, body = call("GET", "/bkt?list-type=2&prefix=x%2F")
        assert status == 200 and b"<Key>x/1.batch</Key>" in body and b"<Size>3</Size>" in body
        assert call("DELETE", "/bkt/x/1.batch")[0] == 204
        assert call("GET", "/other/x")[0] == 404
        status, _, body = call("GET", STATS_PATH)
        stats = json.loads(body)
        assert status == 200 and (stats["puts"], stats["creates"], stats["lists"]) == (1, 1, 1)
    finally:
        connection.close()
        stop(server, thread)


def test_the_server_refuses_to_bind_beyond_loopback():
    with pytest.raises(ConfigError, match="loopback"):
        serve("0.0.0.0", 0, "bucket")  # noqa: S104 - the refusal under test
