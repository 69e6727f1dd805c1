"""Bounded waiting for a condition in integration tests."""

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    predicate: Callable[[], Any],
    timeout_s: float = 15.0,
    what: str = "condition",
    explain: Callable[[], str] | None = None,
    interval_s: float = 0.02,
) -> Any:
    """``predicate()``'s first truthy value; fail after ``timeout_s`` naming ``what``
    (and what ``explain()`` says was seen)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    seen = f": {explain()}" if explain is not None else ""
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}{seen}")


def wait_for_slow(
    predicate: Callable[[], Any],
    timeout_s: float,
    what: str,
    explain: Callable[[], str] | None = None,
) -> Any:
    """:func:`wait_for` polling every half second, for predicates that ask a process
    (an HTTP page) or read a topic."""
    return wait_for(predicate, timeout_s, what, explain, interval_s=0.5)
