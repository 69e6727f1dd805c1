"""What ``benchmarks/elastic.py`` computes from its workers' files, pure.

Owned here: reading one run's files (:func:`read_run`, the files
``benchmarks/elastic_app.py`` writes), which committed steps the final model does not
contain (:func:`rolled_back`), the pause of each scaling action on the workers that
stay (:func:`pause_s`), and the records lost (:func:`lost_ids`).

A step is rolled back when the model the job ends with does not contain it:

* a restart resumed from a checkpoint older than the step (torchelastic: the restarted
  workers' first step is the checkpoint's plus one; every step above it committed
  before the restart is gone);
* another set of workers committed the same step number on other weights (two quorums
  that trained apart): the weights of the step committed last are the job's.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Incarnation", "Round", "lost_ids", "pause_s", "read_run", "rolled_back"]


@dataclass(frozen=True, slots=True)
class Round:
    t: float
    step: int
    committed: bool
    world: int
    records: int
    records_global: int
    mark: tuple[float, float]


@dataclass
class Incarnation:
    """One worker process: its rounds, the ids each of its steps trained and acked."""

    worker: str
    pid: int
    rounds: list[Round] = field(default_factory=list)
    commits: list[tuple[float, int, list[int]]] = field(default_factory=list)
    acks: list[tuple[float, int, list[int]]] = field(default_factory=list)

    @property
    def first_t(self) -> float:
        return self.rounds[0].t if self.rounds else float("inf")

    def mark(self, step: int) -> tuple[float, float] | None:
        for r in self.rounds:
            if r.committed and r.step == step:
                return r.mark
        return None


def _id_lines(path: Path) -> list[tuple[float, int, list[int]]]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                rows.append((float(parts[0]), int(parts[1]), [int(x) for x in parts[2:]]))
    return rows


def read_run(directory: Path) -> list[Incarnation]:
    """Every worker process of one run, oldest first."""
    found = []
    for path in sorted(directory.glob("*.rounds")):
        worker, _, pid = path.stem.rpartition("-")
        incarnation = Incarnation(worker, int(pid))
        for line in path.read_text().splitlines():
            p = line.split()
            if len(p) == 8:
                incarnation.rounds.append(
                    Round(float(p[0]), int(p[1]), p[2] == "1", int(p[3]), int(p[4]), int(p[5]),
                          (float(p[6]), float(p[7])))
                )  # fmt: skip
        incarnation.commits = _id_lines(path.with_suffix(".commits"))
        incarnation.acks = _id_lines(path.with_suffix(".acks"))
        found.append(incarnation)
    return sorted(found, key=lambda i: i.first_t)


def rolled_back(incarnations: list[Incarnation]) -> set[tuple[int, int]]:
    """``(pid, step)`` of the committed steps the job's final model does not contain."""
    gone: set[tuple[int, int]] = set()
    # a restart: a process that started after another ended, from an older step
    for later in incarnations:
        if not later.rounds:
            continue
        resumed = later.rounds[0].step - 1
        for earlier in incarnations:
            if earlier.rounds and earlier.rounds[-1].t < later.first_t:
                gone.update(
                    (earlier.pid, r.step)
                    for r in earlier.rounds
                    if r.committed and r.step > resumed
                )
    # the same step on other weights: the weights committed last are the job's
    by_step: dict[int, list[tuple[float, tuple[float, float], int]]] = defaultdict(list)
    for inc in incarnations:
        for r in inc.rounds:
            if r.committed:
                by_step[r.step].append((r.t, r.mark, inc.pid))
    for step, rows in by_step.items():
        kept = max(rows)[1]
        gone.update((pid, step) for _, mark, pid in rows if mark != kept)
    return gone


def lost_ids(produced: int, incarnations: list[Incarnation], gone: set[tuple[int, int]]) -> int:
    """Produced ids (``0 .. produced-1``) that no surviving committed step trained."""
    trained: set[int] = set()
    for inc in incarnations:
        for _, step, ids in inc.commits:
            if (inc.pid, step) not in gone:
                trained.update(ids)
    return sum(1 for i in range(produced) if i not in trained)


def rolled_back_acked(incarnations: list[Incarnation], gone: set[tuple[int, int]]) -> int:
    """Records acknowledged (their offsets committed) in a step the model lost."""
    return sum(
        len(ids) for inc in incarnations for _, step, ids in inc.acks if (inc.pid, step) in gone
    )


def pause_s(
    incarnations: list[Incarnation], staying: set[str], start_t: float, end_t: float
) -> float:
    """The largest gap between committed rounds of the workers in ``staying`` from the
    last one before ``start_t`` to ``end_t`` (their restarted incarnations included)."""
    worst = 0.0
    for worker in staying:
        times = sorted(
            r.t for inc in incarnations if inc.worker == worker for r in inc.rounds
            if r.committed and r.t <= end_t
        )  # fmt: skip
        before = [t for t in times if t < start_t]
        window = ([before[-1]] if before else []) + [t for t in times if t >= start_t]
        if not window:  # it never stepped in the window: the whole window is a pause
            worst = max(worst, end_t - start_t)
            continue
        gaps = [b - a for a, b in itertools.pairwise(window)]
        if window[-1] < end_t:
            gaps.append(end_t - window[-1])  # still no step at the window's end
        worst = max([worst, *gaps])
    return worst
