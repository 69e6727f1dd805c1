"""Shared fixtures: one embedded broker per test session (started by the project itself),
and the order tests are handed out in."""

from collections.abc import Iterator

import pytest

from streamtrain.broker import EmbeddedBroker
from tests.integration.scheduling import HEAVY_GROUP


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """The real embedded Tansu broker on a free loopback port, stopped at session end
    (one per pytest-xdist process: tests use their own topics and groups)."""
    with EmbeddedBroker() as embedded:
        yield embedded


def _heavy(item: pytest.Item) -> bool:
    group = item.get_closest_marker("xdist_group")
    return group is not None and HEAVY_GROUP in (*group.args, *group.kwargs.values())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in item.nodeid:
            item.add_marker(pytest.mark.integration)
    # The heavy group first (tests/integration/scheduling.py): under --dist loadgroup
    # one process takes the whole chain at the start; the others share the rest in file
    # order, integration tests before the many short unit tests that even out the end.
    items.sort(key=lambda item: not _heavy(item))
