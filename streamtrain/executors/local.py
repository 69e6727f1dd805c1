"""The local process-pool executor: N worker subprocesses on this machine (the demo's).

Owned here: :class:`LocalProcessPool` keeps worker processes running from one command
template. Each worker sits in a *slot* with a dense index 0..N-1 and gets
``STREAMTRAIN_WORKER_ID=<prefix>-<index>`` and ``STREAMTRAIN_WORKER_INDEX=<index>`` in
its environment; a replaced worker keeps its slot's id and index. Scaling up fills the
lowest free slots; scaling down stops the highest ones first (the newest slots). With a
:class:`~streamtrain.executors.readiness.Readiness` a scale-up is two-phase: new workers
prepare, then are admitted together (:meth:`LocalProcessPool._admit`).

:meth:`~LocalProcessPool.reap` notices workers that exited, logs them and, with
``replace_dead=True``, starts a new process in the same slot. Nothing calls it behind
the caller's back; run :meth:`~LocalProcessPool.supervise` in a thread for that.
``on_exit`` is called with the worker id of a worker that exited on its own (not one a
scale-down stopped), before its slot is refilled: a shard job's pool hands the dead
worker's shards back at once with
:meth:`~streamtrain.executors.shard_release.ShardRelease.worker_gone`.

Synchronous and thread-safe (one lock); an asyncio caller runs it in a thread.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from streamtrain.errors import ConfigError, ExecutorError
from streamtrain.executors.readiness import Readiness
from streamtrain.process import die_with_parent_preexec, stop_children
from streamtrain.proto import control_plane_pb2 as cp

__all__ = ["LocalProcessPool", "WorkerExit", "WorkerInfo"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    index: int
    worker_id: str
    pid: int
    restarts: int


@dataclass(frozen=True, slots=True)
class WorkerExit:
    index: int
    worker_id: str
    pid: int
    returncode: int  # negative: killed by that signal
    replaced_by_pid: int | None


@dataclass(slots=True)
class _Worker:
    index: int
    worker_id: str
    process: subprocess.Popen[bytes]
    restarts: int = 0
    admitted: bool = True
    started_s: float = 0.0  # time.monotonic() at its start
    quick_deaths: int = 0  # consecutive deaths within min_uptime_s of the start


class LocalProcessPool:
    """Worker subprocesses from ``argv`` (see the module docstring).

    No process starts in ``__init__``; the first :meth:`scale_to` starts them.

    **Never spawns in a loop** (a command for 4e9 workers must not fork forever):
    ``scale_to`` above ``max_workers`` (default 64) is refused, not retriable, before any
    process starts; and a slot whose worker keeps dying young (within ``min_uptime_s`` of
    its start) is refilled by :meth:`reap` only after a backoff that doubles with each
    quick death (``restart_backoff_s`` up to ``max_restart_backoff_s``), logged at ERROR.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        name: str = "local",
        worker_id_prefix: str = "worker",
        grace_s: float = 10.0,
        replace_dead: bool = False,
        cwd: str | Path | None = None,
        log_dir: str | Path | None = None,
        size_path: str | Path | None = None,
        readiness: Readiness | None = None,
        prep_timeout_s: float = 60.0,
        max_workers: int = 64,
        min_uptime_s: float = 10.0,
        restart_backoff_s: float = 1.0,
        max_restart_backoff_s: float = 60.0,
        on_exit: Callable[[str], object] | None = None,
    ) -> None:
        if not argv or not all(isinstance(arg, str) for arg in argv):
            raise ConfigError("the worker command must be a non-empty sequence of strings")
        if grace_s < 0:
            raise ConfigError(f"grace_s cannot be negative, got {grace_s}")
        if not worker_id_prefix:
            raise ConfigError("worker_id_prefix cannot be empty")
        if max_workers < 1:
            raise ConfigError(f"max_workers must be at least 1, got {max_workers}")
        if not 0 <= restart_backoff_s <= max_restart_backoff_s or min_uptime_s < 0:
            raise ConfigError("need min_uptime_s >= 0 and 0 <= restart backoff <= its maximum")
        self.max_workers = max_workers
        self.min_uptime_s = min_uptime_s
        self.restart_backoff_s = restart_backoff_s
        self.max_restart_backoff_s = max_restart_backoff_s
        self._respawn: dict[int, tuple[float, _Worker]] = {}  # slot -> (not before, dead)
        self._argv = tuple(argv)
        self._env = dict(env or {})
        self._name = name
        self._prefix = worker_id_prefix
        self.grace_s = grace_s
        self.replace_dead = replace_dead
        self._cwd = cwd
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._size_path = Path(size_path) if size_path is not None else None
        self._lock = threading.RLock()  # the slots
        self._scaling = threading.Lock()  # one scale_to at a time
        self._slots: dict[int, _Worker] = {}
        self._closed = False
        self._spawner: ThreadPoolExecutor | None = None
        self._preexec: Callable[[], None] | None = None
        self.readiness = readiness
        self.prep_timeout_s = prep_timeout_s
        self.last_prep_s: float | None = None
        self.not_ready = 0  # workers given up on because they never said READY
        self.on_exit = on_exit

    @property
    def name(self) -> str:
        return self._name

    # -- the Executor protocol ---------------------------------------------------------

    def current_workers(self) -> int:
        """Live (and, two-phase, admitted) workers right now; exited ones are not
        counted, nor replaced, here."""
        with self._lock:
            return sum(
                1
                for worker in self._slots.values()
                if worker.admitted and worker.process.poll() is None
            )

    def scale_to(self, target_workers: int, command: cp.ScaleCommand | None = None) -> int:
        """Start or stop workers until ``target_workers`` run; returns the live count.

        Waiting (for READY, for stopped workers to exit) happens outside the lock that
        guards the slots, so :meth:`current_workers` and :meth:`reap` answer meanwhile;
        scaling calls themselves are one at a time.
        """
        if not 0 <= target_workers <= self.max_workers:
            raise ExecutorError(
                f"cannot scale to {target_workers} workers (this pool allows 0.."
                f"{self.max_workers})",
                retriable=False,
            )
        with self._scaling:
            started: list[int] = []
            doomed: list[_Worker] = []
            began_s, wall_s = time.monotonic(), time.time()
            with self._lock:
                if self._closed:
                    raise ExecutorError(f"process pool {self._name!r} is closed", retriable=False)
                self._reap_locked(replace=False)
                self._respawn.clear()  # an explicit scale decides every slot again
                live = sorted(self._slots)
                if target_workers > len(live):
                    needed, index = target_workers - len(live), 0
                    while needed:
                        if index not in self._slots:
                            self._slots[index] = self._spawn(index, restarts=0)
                            self._slots[index].admitted = self.readiness is None
                            started.append(index)
                            needed -= 1
                        index += 1
                elif target_workers < len(live):
                    doomed = [self._slots.pop(i) for i in live[target_workers:]]
                self._write_size()
            if doomed:
                self._stop(doomed)
            if started and self.readiness is not None:
                self._admit(started, wall_s)
            if started:
                self.last_prep_s = time.monotonic() - began_s
            with self._lock:
                self._write_size()
                return len(self._slots)

    def _admit(self, indexes: list[int], since_s: float) -> None:
        """Wait for READY from the new slots and admit the ready ones together; replace
        once those that stay silent (the others are not held back for them), and admit
        the replacements that say READY. Called without the lock.

        Each new worker has ``prep_timeout_s`` to say READY (checkpoint loaded or weights
        healed, connected); admitting the ready ones together (ADMITTED) makes a
        group-mode scale-up of k workers one rebalance. After one replacement the pool
        gives up on the slot. Until admitted a new worker is not counted as capacity
        (:meth:`current_workers`) nor in the size file; :attr:`last_prep_s` is the
        preparation time of the last scale-up.
        """
        readiness = self.readiness
        assert readiness is not None  # noqa: S101 - the caller checks
        pending = list(indexes)
        for attempt in (1, 2):
            with self._lock:
                ids = {i: self._slots[i].worker_id for i in pending if i in self._slots}
            silent = readiness.wait_ready(ids.values(), since_s, self.prep_timeout_s)
            late = [i for i, worker_id in ids.items() if worker_id in silent]
            self._admit_now([i for i in ids if i not in late])
            if not late:
                break
            with self._lock:
                doomed = [self._slots.pop(i) for i in late if i in self._slots]
            self.not_ready += len(doomed)
            log.error(
                "worker(s) %s did not say READY within %.0f s: %s",
                ", ".join(w.worker_id for w in doomed),
                self.prep_timeout_s,
                "replacing them" if attempt == 1 else "giving up on them",
            )
            self._stop(doomed)
            if attempt == 2:
                break
            since_s = time.time()
            with self._lock:
                for worker in doomed:
                    replacement = self._spawn(worker.index, restarts=worker.restarts + 1)
                    replacement.admitted = False
                    self._slots[worker.index] = replacement
            pending = [w.index for w in doomed]

    def _admit_now(self, indexes: list[int]) -> None:
        """ADMITTED for the workers of these slots, together; they count from now."""
        readiness = self.readiness
        assert readiness is not None  # noqa: S101 - the caller checks
        with self._lock:
            ready = [self._slots[i] for i in indexes if i in self._slots]
        if not ready:
            return
        readiness.admit([w.worker_id for w in ready])
        with self._lock:
            for worker in ready:
                worker.admitted = True
            self._write_size()

    def _write_size(self) -> None:
        """With ``size_path``, the pool's size (the slots it keeps filled) as a decimal
        integer, replaced atomically after every change: workers read it to report the
        pool size in their samples where the group cannot tell them
        (``streamtrain worker --pool-size-file``)."""
        if self._size_path is None:
            return
        temporary = self._size_path.with_name(self._size_path.name + ".tmp")
        try:
            admitted = sum(1 for w in self._slots.values() if w.admitted)
            temporary.write_text(f"{admitted}\n")
            temporary.replace(self._size_path)
        except OSError as exc:
            log.warning("cannot write the pool size to %s: %s", self._size_path, exc)

    # -- supervision -------------------------------------------------------------------

    def reap(self) -> list[WorkerExit]:
        """Collect exited workers; with ``replace_dead``, start a new one in each slot."""
        with self._lock:
            return self._reap_locked(replace=self.replace_dead and not self._closed)

    def supervise(self, stop: threading.Event, interval_s: float = 1.0) -> None:
        """Call :meth:`reap` every ``interval_s`` until ``stop`` is set (run it in a thread)."""
        while not stop.wait(interval_s):
            try:
                self.reap()
            except ExecutorError:
                log.exception("process pool %r could not replace a worker", self._name)

    def workers(self) -> tuple[WorkerInfo, ...]:
        """The live workers, by slot index."""
        with self._lock:
            return tuple(
                WorkerInfo(w.index, w.worker_id, w.process.pid, w.restarts)
                for _, w in sorted(self._slots.items())
                if w.process.poll() is None
            )

    def _reap_locked(self, *, replace: bool) -> list[WorkerExit]:
        exits: list[WorkerExit] = []
        now_s = time.monotonic()
        if replace:
            for index, (not_before_s, dead) in sorted(self._respawn.items()):
                if now_s >= not_before_s and index not in self._slots:
                    del self._respawn[index]
                    self._replace(dead, now_s)
        for index in sorted(self._slots):
            worker = self._slots[index]
            code = worker.process.poll()
            if code is None:
                continue
            del self._slots[index]
            log.warning(
                "worker %s (pid %d) exited with code %d",
                worker.worker_id,
                worker.process.pid,
                code,
            )
            if self.on_exit is not None:
                self.on_exit(worker.worker_id)
            new_pid = None
            if replace:
                young = now_s - worker.started_s < self.min_uptime_s
                worker.quick_deaths = worker.quick_deaths + 1 if young else 0
                if worker.quick_deaths >= 2:
                    pause_s = min(
                        self.max_restart_backoff_s,
                        self.restart_backoff_s * 2.0 ** (worker.quick_deaths - 2),
                    )
                    log.error(
                        "worker %s died %d times in a row within %g s of its start; "
                        "replacing it in %.1f s",
                        worker.worker_id,
                        worker.quick_deaths,
                        self.min_uptime_s,
                        pause_s,
                    )
                    self._respawn[index] = (now_s + pause_s, worker)
                else:
                    new_pid = self._replace(worker, now_s).process.pid
            exits.append(WorkerExit(index, worker.worker_id, worker.process.pid, code, new_pid))
        if exits:
            self._write_size()
        return exits

    def _replace(self, dead: _Worker, now_s: float) -> _Worker:
        """A new process in ``dead``'s slot (admitted once READY, two-phase)."""
        replacement = self._spawn(dead.index, restarts=dead.restarts + 1)
        replacement.quick_deaths = dead.quick_deaths
        self._slots[dead.index] = replacement
        if self.readiness is not None:
            replacement.admitted = False
            threading.Thread(
                target=self._admit_later,
                args=(replacement, time.time()),
                name="streamtrain-admit",
                daemon=True,
            ).start()
        return replacement

    def _admit_later(self, worker: _Worker, since_s: float) -> None:
        """A replacement of a dead worker: admit it once READY (outside the lock)."""
        readiness = self.readiness
        assert readiness is not None  # noqa: S101 - the caller checks
        if readiness.wait_ready([worker.worker_id], since_s, self.prep_timeout_s):
            log.error("replacement %s did not say READY in time", worker.worker_id)
        readiness.admit([worker.worker_id])
        with self._lock:
            worker.admitted = True
            self._write_size()

    # -- starting and stopping ---------------------------------------------------------

    def _spawn(self, index: int, *, restarts: int) -> _Worker:
        worker_id = f"{self._prefix}-{index}"
        env = {
            **os.environ,
            **self._env,
            "STREAMTRAIN_WORKER_ID": worker_id,
            "STREAMTRAIN_WORKER_INDEX": str(index),
        }
        # Every child gets PR_SET_PDEATHSIG (SIGTERM) so it dies with us even if we are
        # killed outright. The kernel ties that signal to the *thread* that forked the
        # child, so children are started from one long-lived thread the pool owns:
        # scaling from a short-lived thread (asyncio.to_thread, a timer) must not kill
        # the workers when that thread ends.
        if self._spawner is None:
            self._preexec = die_with_parent_preexec()
            self._spawner = ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-spawner")
        try:
            process = self._spawner.submit(self._popen, worker_id, env).result()
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise ExecutorError(
                f"cannot start worker {worker_id} with {list(self._argv)!r}: {exc}",
                retriable=False,
            ) from exc
        except (OSError, subprocess.SubprocessError) as exc:
            raise ExecutorError(f"cannot start worker {worker_id}: {exc}") from exc
        log.info(
            "started worker %s (pid %d)%s",
            worker_id,
            process.pid,
            f", restart {restarts}" if restarts else "",
        )
        return _Worker(index, worker_id, process, restarts, started_s=time.monotonic())

    def _popen(self, worker_id: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        if self._log_dir is None:
            return self._start(env, None)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with (self._log_dir / f"{worker_id}.log").open("ab") as out:
            return self._start(env, out)

    def _start(self, env: dict[str, str], out: IO[bytes] | None) -> subprocess.Popen[bytes]:
        # preexec_fn only makes the prctl call resolved beforehand (see streamtrain.process).
        return subprocess.Popen(  # noqa: S603 - argv comes from the operator's config
            self._argv,
            env=env,
            cwd=self._cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
            preexec_fn=self._preexec,
        )

    def _stop(self, workers: Sequence[_Worker]) -> None:
        """SIGTERM them all, wait up to ``grace_s`` in total (one deadline for all), then
        SIGKILL the rest."""
        for worker in workers:
            if worker.process.poll() is None:
                log.info("stopping worker %s (pid %d)", worker.worker_id, worker.process.pid)
        children = [(w.process, f"worker {w.worker_id}") for w in workers]
        for worker, code in zip(workers, stop_children(children, self.grace_s), strict=True):
            log.info(
                "worker %s (pid %d) stopped with code %d",
                worker.worker_id,
                worker.process.pid,
                code,
            )

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker (newest first) and the spawner thread; safe to call twice."""
        with self._lock:
            self._closed = True
            self._respawn.clear()
            doomed = [self._slots.pop(i) for i in sorted(self._slots, reverse=True)]
            self._stop(doomed)
            spawner, self._spawner = self._spawner, None
        if spawner is not None:
            spawner.shutdown(wait=True)

    def __enter__(self) -> LocalProcessPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
