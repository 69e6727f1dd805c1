"""Shared fixtures: one embedded broker per test session (started by the project itself),
and how tests are ordered and handed out to pytest-xdist processes."""

from collections.abc import Iterator
from typing import Any

import pytest

from streamtrain.broker import EmbeddedBroker
from tests.integration.scheduling import order_of, unit_of


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """The real embedded Tansu broker on a free loopback port, stopped at session end
    (one per pytest-xdist process: tests use their own topics and groups)."""
    with EmbeddedBroker() as embedded:
        yield embedded


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in item.nodeid:
            item.add_marker(pytest.mark.integration)
    # The heavy unit first (tests/integration/scheduling.py): one process takes its whole
    # chain at the start; the others share the rest in file order, integration tests
    # before the many short unit tests that even out the end, and the late tests last.
    items.sort(key=lambda item: order_of(item.nodeid))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``, the units of tests/integration/scheduling.py."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class Units(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            # a group suffix ("@name") is xdist's own, from an xdist_group mark
            return unit_of(nodeid.split("@", 1)[0]) or super()._split_scope(nodeid)

    return Units(config, log)
