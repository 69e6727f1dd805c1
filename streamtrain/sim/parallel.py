"""Spreading the seeds of a comparison over processes.

Owned here: :func:`map_seeds`, ``[task(shared, seed) for seed in seeds]``, in this
process (``jobs=1``) or in ``jobs`` worker processes. The workers are *spawned* (not
forked: the parent may hold torch's threads from fitting a forecaster), receive
``shared`` once each (pickled: arrays and frozen settings, never a socket), and are
joined before it returns; an exception in a worker is re-raised here. Results come back
in the order of ``seeds``, so a run is the same whatever ``jobs`` is.

With ``nice`` the worker processes run that much nicer than this one
(:func:`~streamtrain.process.lower_priority`): work this process does meanwhile comes
first when they compete for the cores. ``streamtrain simulate`` replays the policies
that do not forecast at :data:`BACKGROUND_NICE` while it computes the forecasts that
the other policies' replays wait for (docs/benchmarks.md, "Forecast commands").

The workers do not ask Linux for transparent huge pages for their arrays (numpy does by
default, with ``madvise``): each seed draws a workload of a few 64 MB arrays, and
faulting those in as huge pages stalls on memory compaction when the machine is busy
(about 0.4 CPU-s of kernel time per seed, measured), for no gain in a replay that reads
them row by row.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from streamtrain.errors import ConfigError
from streamtrain.process import lower_priority

__all__ = ["BACKGROUND_NICE", "map_seeds", "nice_beside"]

# How much nicer replay processes run than the process computing what others wait for.
BACKGROUND_NICE = 10

S = TypeVar("S")
R = TypeVar("R")

_TASK: Callable[[Any, int], Any] | None = None
_SHARED: Any = None


def nice_beside(pending: Future[Any], nice: int = 0) -> int:
    """The niceness of replays started while ``pending`` (this process's work that other
    replays wait for) is still running: at least :data:`BACKGROUND_NICE` until it is
    done, ``nice`` after."""
    return nice if pending.done() else max(nice, BACKGROUND_NICE)


def _install(task: Callable[[Any, int], Any], shared: Any, nice: int) -> None:
    global _TASK, _SHARED  # one task per worker process, set once
    _TASK, _SHARED = task, shared
    _without_huge_pages()
    lower_priority(nice, "a replay process")


def _without_huge_pages() -> None:
    """Stop numpy's ``madvise(MADV_HUGEPAGE)`` of large arrays in this process (module
    docstring); numpy versions without the switch keep their default."""
    try:
        from numpy._core import multiarray
    except ImportError:  # pragma: no cover - numpy < 2
        return
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if callable(switch):
        switch(False)


def _run(seed: int) -> Any:
    if _TASK is None:
        raise ConfigError("the worker process was not given a task")
    return _TASK(_SHARED, seed)


def map_seeds(
    task: Callable[[S, int], R],
    shared: S,
    seeds: Sequence[int],
    *,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
    describe: Callable[[int], str] = "seed {}".format,
    nice: int = 0,
) -> list[R]:
    """See the module docstring. ``task`` must be a module-level function; ``progress``
    hears ``<describe(seed)> done (k/N)`` as each finishes; ``nice`` (0 to 19) applies
    to worker processes only, never to this one (``jobs=1`` or a single seed runs
    here)."""
    if jobs < 1:
        raise ConfigError(f"need at least one job, got {jobs}")
    if not 0 <= nice <= 19:
        raise ConfigError(f"nice must be in [0, 19], got {nice}")
    seeds = list(seeds)
    if jobs == 1 or len(seeds) <= 1:
        results = []
        for k, seed in enumerate(seeds, 1):
            results.append(task(shared, seed))
            if progress is not None and len(seeds) > 1:
                progress(f"{describe(seed)} done ({k}/{len(seeds)})")
        return results
    context = multiprocessing.get_context("spawn")
    by_seed: dict[int, R] = {}
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(seeds)),
        mp_context=context,
        initializer=_install,
        initargs=(task, shared, nice),
    ) as pool:
        futures = {pool.submit(_run, seed): seed for seed in seeds}
        for future in as_completed(futures):
            seed = futures[future]
            by_seed[seed] = future.result()
            if progress is not None:
                progress(f"{describe(seed)} done ({len(by_seed)}/{len(seeds)})")
    return [by_seed[seed] for seed in seeds]
