"""The demo dashboard's POST /api/burst is the page's own only (no cross-site request forgery).

A real server on a loopback port; ``burst`` counts its calls."""

import re
import urllib.error
import urllib.request

import pytest

from streamtrain.demo.dashboard import CSRF_HEADER, Dashboard


@pytest.fixture
def dashboard():
    calls = []

    def burst():
        calls.append(1)
        return "burst of 100 records"

    server = Dashboard(lambda: {"phase": "test"}, burst)
    yield server, calls
    server.close()


def _post(dashboard, headers):
    request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1
        dashboard.url + "api/burst", data=b"", method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code


def _page_token(dashboard):
    with urllib.request.urlopen(dashboard.url, timeout=5) as response:  # noqa: S310
        page = response.read().decode()
    found = re.search(r'name="streamtrain-csrf" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_a_post_without_the_pages_token_is_refused(dashboard):
    dashboard, calls = dashboard
    """A page on another site can POST a form to 127.0.0.1 (a "simple" request needs no
    preflight); without the token the burst must not happen."""
    assert _post(dashboard, {}) == 403
    assert _post(dashboard, {CSRF_HEADER: "guess"}) == 403
    assert calls == []


def test_the_page_carries_a_per_run_token_that_works(dashboard):
    dashboard, calls = dashboard
    token = _page_token(dashboard)
    assert token == dashboard.csrf_token and len(token) >= 24
    host = dashboard.url.split("/")[2]
    assert _post(dashboard, {CSRF_HEADER: token}) == 200
    assert _post(dashboard, {CSRF_HEADER: token, "Origin": f"http://{host}"}) == 200
    assert calls == [1, 1]


def test_a_foreign_origin_is_refused_even_with_the_token(dashboard):
    dashboard, calls = dashboard
    assert _post(dashboard, {CSRF_HEADER: dashboard.csrf_token, "Origin": "http://evil"}) == 403
    assert calls == []


def test_each_dashboard_has_its_own_token(dashboard):
    dashboard, _ = dashboard
    other = Dashboard(lambda: {}, lambda: "")
    try:
        assert other.csrf_token != dashboard.csrf_token
    finally:
        other.close()
