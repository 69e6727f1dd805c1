"""Bounded waiting for a condition in integration tests."""

import time
from collections.abc import Callable


def wait_for(
    predicate: Callable[[], object],
    timeout_s: float = 15.0,
    what: str = "condition",
    interval_s: float = 0.02,
) -> None:
    """Return once ``predicate()`` is true; fail after ``timeout_s`` naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
