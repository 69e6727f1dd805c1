"""Shared fixtures: one embedded broker per test session (started by the project itself)."""

from collections.abc import Iterator

import pytest

from streamtrain.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """The real embedded Tansu broker on a free loopback port, stopped at session end."""
    with EmbeddedBroker() as embedded:
        yield embedded


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in item.nodeid:
            item.add_marker(pytest.mark.integration)
