"""What every executor is, and the one place scaling commands are applied.

* :class:`Executor`: the protocol an executor implements. ``scale_to`` makes *one*
  attempt and raises :class:`~streamtrain.errors.ExecutorError` on failure, with
  ``retriable`` saying whether another attempt may help; it never retries by itself.
* :class:`CommandApplier`: wraps an executor and applies :class:`ScaleCommand` messages
  with the guarantees the control plane relies on: idempotent on ``command_id``,
  retried then reported, never out of order, nothing from the future, and invalid
  commands reported rather than raised (the applier sits in a consumer loop).

Why re-applying is safe: scaling *to* N is idempotent, so when ``scale_to`` succeeds
on the far side but its answer is lost (a timeout), the retry asks for N again and
changes nothing. The journal is written only after a successful attempt; a crash
between the two means the command is applied once more after a restart, which is
harmless for the same reason.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from streamtrain.errors import ConfigError, StreamtrainError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.units import ms_to_s, now_ms

__all__ = [
    "MAX_TARGET_WORKERS",
    "ApplierSettings",
    "ApplyResult",
    "CommandApplier",
    "Executor",
    "Outcome",
]

log = logging.getLogger(__name__)

MAX_TARGET_WORKERS = 10_000  # above this a count is absurd, whatever the settings say


class Outcome(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    FAILED = "failed"
    SUPERSEDED = "superseded"  # older than a command already applied for the job


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyResult:
    """What became of one command. ``attempts`` is 0 for duplicates and invalid commands."""

    command_id: str
    outcome: Outcome
    attempts: int
    workers_before: int | None
    workers_after: int | None
    error: str | None
    duration_s: float
    job: str = ""
    target_workers: int | None = None
    executor: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.FAILED


@runtime_checkable
class Executor(Protocol):
    """Applies a worker count somewhere: a process pool, Kubernetes, a webhook."""

    @property
    def name(self) -> str: ...

    def current_workers(self) -> int:
        """The worker count now; may raise :class:`ExecutorError`."""
        ...

    def scale_to(self, target_workers: int, command: cp.ScaleCommand) -> int:
        """One attempt to reach ``target_workers``; returns the worker count after it."""
        ...


@dataclass(frozen=True, slots=True)
class ApplierSettings:
    max_attempts: int = 5
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 10.0
    remember_ids: int = 1024
    job: str | None = None  # when set, commands for other jobs are rejected
    journal_path: Path | None = None
    max_target_workers: int | None = None  # a guard against a runaway planner
    allow_scale_to_zero: bool = False  # else a target of 0 (an unset field) is refused
    max_clock_skew_s: float = 60.0  # commands created further in the future are refused

    def __post_init__(self) -> None:
        skew = self.max_clock_skew_s
        if not (math.isfinite(skew) and skew >= 0):
            raise ConfigError(f"the clock skew allowed is at least 0 s, got {skew}")
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not 0 <= self.backoff_initial_s <= self.backoff_max_s:
            raise ConfigError(
                "need 0 <= backoff_initial_s <= backoff_max_s, got "
                f"{self.backoff_initial_s}, {self.backoff_max_s}"
            )
        if self.remember_ids < 1:
            raise ConfigError(f"remember_ids must be at least 1, got {self.remember_ids}")
        if self.job is not None and not self.job:
            raise ConfigError("job must be a non-empty name or None (any job)")
        cap = self.max_target_workers
        if cap is not None and not 0 <= cap <= MAX_TARGET_WORKERS:
            raise ConfigError(f"max_target_workers must be in 0..{MAX_TARGET_WORKERS}, got {cap}")

    def backoff_s(self, failed_attempts: int) -> float:
        """The pause after the ``failed_attempts``-th failure (1-based):
        ``backoff_initial_s · 2^(k-1)``, capped at ``backoff_max_s``."""
        exponent = min(max(failed_attempts - 1, 0), 62)
        return float(min(self.backoff_max_s, self.backoff_initial_s * 2.0**exponent))


class CommandApplier:
    """Applies :class:`ScaleCommand` messages through an :class:`Executor`, one at a time
    (a lock: scaling decisions must not interleave).

    - **Idempotent on** ``command_id``. The ids of the last ``remember_ids`` applied
      commands are kept in memory (LRU) and, when ``journal_path`` is set, appended to a
      JSON-lines journal (fsynced) so a restarted executor does not re-apply a
      redelivered command. A duplicate returns ``"duplicate"`` without calling the
      executor.
    - **Retried, then reported.** A retriable failure is retried with exponential
      backoff (:meth:`ApplierSettings.backoff_s`) up to ``max_attempts``; a
      non-retriable one stops at once. The final failure is logged at ERROR and returned
      as ``"failed"`` with the error text. A failed id is not remembered, so a
      redelivered command is tried again.
    - **Invalid commands are reported, not raised.** An empty id, a target above
      ``max_target_workers`` (or :data:`MAX_TARGET_WORKERS`, whatever the settings), a
      target of 0 unless ``allow_scale_to_zero`` (0 is what an unset proto field decodes
      to), or another job than the configured one gives ``"failed"`` with
      ``attempts=0`` (logged, passed to ``on_result``; the command consumer turns it into
      an alert). Raising would kill the consumer loop or be swallowed by a generic
      handler. An executor that raises something other than an ``ExecutorError`` (a
      bug, a request the HTTP client refuses to build) is logged with its traceback and
      reported as ``"failed"`` too, so one bad command cannot crash-loop ``scale apply``.
    - **Never out of order**: an outbox may re-send an older command after a newer one.
      The newest ``created_at_ms`` applied per job is kept (in memory and in the
      journal); an older command gets ``"superseded"`` (not a failure: a newer decision
      already holds). Commands with the same ``created_at_ms`` apply in arrival order.
    - **Nothing from the future.** A command created more than ``max_clock_skew_s``
      after now (the wall clock) is refused like an invalid one and never journaled: a
      command dated a year ahead would make every later one ``"superseded"`` for a year,
      also after a restart. A journal line dated so (left by an older build) is skipped
      when the journal is read, with one warning.
    - ``on_result`` sees every result: applied, duplicate and failed.

    ``sleep`` and ``clock`` are injectable so tests neither sleep nor depend on time. The
    journal is read on the first :meth:`apply`, not here (no I/O in ``__init__``).
    """

    def __init__(
        self,
        executor: Executor,
        settings: ApplierSettings | None = None,
        *,
        on_result: Callable[[ApplyResult], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.executor = executor
        self.settings = settings or ApplierSettings()
        self._on_result = on_result
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._applied: OrderedDict[str, int | None] = OrderedDict()
        self._newest_ms: dict[str, int] = {}  # per job: created_at_ms of the newest applied
        self._journal_loaded = self.settings.journal_path is None
        self._journal_lines = 0

    def remembers(self, command_id: str) -> bool:
        """Whether ``command_id`` is known as applied (memory only; see :meth:`apply`)."""
        with self._lock:
            return command_id in self._applied

    def apply(self, command: cp.ScaleCommand) -> ApplyResult:
        """Apply ``command`` once, whatever happens; never raises for executor failures."""
        with self._lock:
            started_s = self._clock()
            result = self._apply_locked(command, started_s)
        if self._on_result is not None:
            self._on_result(result)
        return result

    # -- the steps ---------------------------------------------------------------------

    def _apply_locked(self, command: cp.ScaleCommand, started_s: float) -> ApplyResult:
        problem = self._validate(command)
        if problem is None and not self._journal_loaded:
            problem = self._load_journal()
        if problem is not None:
            log.error("scale command %r rejected: %s", command.command_id, problem)
            return self._result(command, Outcome.FAILED, started_s, attempts=0, error=problem)

        if command.command_id in self._applied:
            self._applied.move_to_end(command.command_id)
            log.info("scale command %s already applied; ignoring it", command.command_id)
            return self._result(
                command,
                Outcome.DUPLICATE,
                started_s,
                attempts=0,
                workers_after=self._applied[command.command_id],
            )

        newest_ms = self._newest_ms.get(command.job)
        if newest_ms is not None and command.created_at_ms < newest_ms:
            log.warning(
                "scale command %s (created at %d ms) is older than one already applied for "
                "job %s (created at %d ms); not applied",
                command.command_id,
                command.created_at_ms,
                command.job,
                newest_ms,
            )
            return self._result(
                command,
                Outcome.SUPERSEDED,
                started_s,
                attempts=0,
                error=f"older than a command already applied ({newest_ms} ms)",
            )

        workers_before = self._current_workers_or_none()
        target = command.target_workers
        attempts = 0
        while True:
            attempts += 1
            try:
                workers_after = self.executor.scale_to(target, command)
            except StreamtrainError as exc:
                retry = exc.retriable and attempts < self.settings.max_attempts
                if not retry:
                    return self._give_up(command, started_s, attempts, workers_before, exc)
                pause_s = self.settings.backoff_s(attempts)
                log.warning(
                    "scale command %s: attempt %d/%d via %s failed (%s); retrying in %.2f s",
                    command.command_id,
                    attempts,
                    self.settings.max_attempts,
                    self.executor.name,
                    exc,
                    pause_s,
                )
                self._sleep(pause_s)
                continue
            except Exception as exc:  # a bug, not a failed apply: report it, never raise
                log.exception("scale command %s: executor crashed", command.command_id)
                return self._result(
                    command,
                    Outcome.FAILED,
                    started_s,
                    attempts=attempts,
                    workers_before=workers_before,
                    error=f"executor {self.executor.name} crashed: {type(exc).__name__}: {exc}",
                )
            break

        self._remember(command, workers_after)
        log.info(
            "scale command %s applied via %s: %s -> %d workers (target %d, %d attempt(s))",
            command.command_id,
            self.executor.name,
            "?" if workers_before is None else workers_before,
            workers_after,
            target,
            attempts,
        )
        return self._result(
            command,
            Outcome.APPLIED,
            started_s,
            attempts=attempts,
            workers_before=workers_before,
            workers_after=workers_after,
        )

    def _validate(self, command: cp.ScaleCommand) -> str | None:
        if not command.command_id:
            return "the command has no command_id, so it cannot be applied idempotently"
        wanted_job = self.settings.job
        if wanted_job is not None and command.job != wanted_job:
            return f"the command is for job {command.job!r}, this executor serves {wanted_job!r}"
        if command.target_workers < 0:  # uint32 on the wire; a guard for hand-made commands
            return f"target_workers cannot be negative, got {command.target_workers}"
        target, cap = command.target_workers, self.settings.max_target_workers
        if target > MAX_TARGET_WORKERS:
            return f"target_workers {target} is absurd (more than {MAX_TARGET_WORKERS})"
        if cap is not None and target > cap:
            return f"target_workers {target} is above the limit of {cap}"
        if target == 0 and not self.settings.allow_scale_to_zero:
            return (
                "target_workers 0 refused (an unset field decodes to 0): allow scale-to-zero "
                "to apply it"
            )
        ahead_s = self._ahead_s(command.created_at_ms)
        if ahead_s is not None:
            return (
                f"created {ahead_s:,.0f} s in the future (clock skew allowed: "
                f"{self.settings.max_clock_skew_s:g} s): not applied, not journaled"
            )
        return None

    def _ahead_s(self, created_at_ms: int) -> float | None:
        """How far beyond now + the clock skew allowed ``created_at_ms`` is, or None."""
        ahead_s = ms_to_s(created_at_ms) - self._wall_clock()
        return ahead_s if ahead_s > self.settings.max_clock_skew_s else None

    def _current_workers_or_none(self) -> int | None:
        try:
            return self.executor.current_workers()
        except StreamtrainError as exc:
            log.warning("could not read the worker count via %s: %s", self.executor.name, exc)
            return None

    def _give_up(
        self,
        command: cp.ScaleCommand,
        started_s: float,
        attempts: int,
        workers_before: int | None,
        exc: StreamtrainError,
    ) -> ApplyResult:
        why = "not retriable" if not exc.retriable else f"gave up after {attempts} attempts"
        log.error(
            "scale command %s to %d workers via %s FAILED (%s): %s",
            command.command_id,
            command.target_workers,
            self.executor.name,
            why,
            exc,
        )
        return self._result(
            command,
            Outcome.FAILED,
            started_s,
            attempts=attempts,
            workers_before=workers_before,
            error=f"{exc} ({why})",
        )

    def _result(
        self,
        command: cp.ScaleCommand,
        outcome: Outcome,
        started_s: float,
        *,
        attempts: int,
        workers_before: int | None = None,
        workers_after: int | None = None,
        error: str | None = None,
    ) -> ApplyResult:
        return ApplyResult(
            command_id=command.command_id,
            outcome=outcome,
            attempts=attempts,
            workers_before=workers_before,
            workers_after=workers_after,
            error=error,
            duration_s=max(0.0, self._clock() - started_s),
            job=command.job,
            target_workers=command.target_workers,
            executor=self.executor.name,
        )

    # -- memory and journal ------------------------------------------------------------

    def _remember_id(self, command_id: str, workers_after: int | None) -> None:
        self._applied[command_id] = workers_after
        self._applied.move_to_end(command_id)
        while len(self._applied) > self.settings.remember_ids:
            self._applied.popitem(last=False)

    def _remember_newest(self, job: str, created_at_ms: int) -> None:
        if created_at_ms > self._newest_ms.get(job, created_at_ms - 1):
            self._newest_ms[job] = created_at_ms

    def _remember(self, command: cp.ScaleCommand, workers_after: int) -> None:
        self._remember_id(command.command_id, workers_after)
        self._remember_newest(command.job, command.created_at_ms)
        path = self.settings.journal_path
        if path is None:
            return
        entry = {
            "command_id": command.command_id,
            "job": command.job,
            "target_workers": command.target_workers,
            "workers_after": workers_after,
            "created_at_ms": command.created_at_ms,
            "applied_at_ms": now_ms(),
        }
        try:
            with path.open("a", encoding="utf-8") as journal:
                journal.write(json.dumps(entry, separators=(",", ":")) + "\n")
                journal.flush()
                os.fsync(journal.fileno())
            self._journal_lines += 1
            if self._journal_lines > 2 * self.settings.remember_ids:
                self._compact_journal(path)
        except OSError:
            # The scale happened; only its memory across restarts is at risk.
            log.exception("could not journal applied command %s in %s", command.command_id, path)

    def _load_journal(self) -> str | None:
        path = self.settings.journal_path
        assert path is not None  # noqa: S101 - _journal_loaded is True without a path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            return f"the command journal {path} cannot be read ({exc}); fix it and redeliver"
        lines = text.splitlines()
        future = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                command_id = entry.get("command_id")
                workers_after = entry.get("workers_after")
                job, created_at_ms = entry.get("job"), entry.get("created_at_ms")
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("skipping unreadable line %d of the command journal %s", number, path)
                continue
            if isinstance(command_id, str) and command_id:
                after = workers_after if isinstance(workers_after, int) else None
                self._remember_id(command_id, after)
            if isinstance(job, str) and isinstance(created_at_ms, int):
                if self._ahead_s(created_at_ms) is not None:
                    future += 1  # left by a build that applied such commands
                    continue
                self._remember_newest(job, created_at_ms)
        if future:
            log.warning(
                "skipped %d entries of the command journal %s dated in the future (clock "
                "skew allowed: %g s): they no longer hold back newer commands",
                future,
                path,
                self.settings.max_clock_skew_s,
            )
        self._journal_lines = len(lines)
        self._journal_loaded = True
        log.info("loaded %d applied command ids from %s", len(self._applied), path)
        if self._journal_lines > 2 * self.settings.remember_ids:
            self._compact_journal(path)
        return None

    def _compact_journal(self, path: Path) -> None:
        """Rewrite the journal with only the remembered ids (atomically, via rename)."""
        tmp = path.with_name(path.name + ".tmp")
        try:
            with tmp.open("w", encoding="utf-8") as out:
                for job, created_at_ms in self._newest_ms.items():  # no id: a job's newest
                    newest = {"job": job, "created_at_ms": created_at_ms}
                    out.write(json.dumps(newest, separators=(",", ":")) + "\n")
                for command_id, workers_after in self._applied.items():
                    entry = {"command_id": command_id, "workers_after": workers_after}
                    out.write(json.dumps(entry, separators=(",", ":")) + "\n")
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(path)
        except OSError as exc:
            log.warning("could not compact the command journal %s: %s", path, exc)
            return
        self._journal_lines = len(self._applied)
