"""``--engine torchft``: torchft's Manager keeps every worker's model one model.

Owned here: :class:`TorchftEngine`. Each worker is one torchft replica group of one
process; a round (:meth:`TorchftEngine.step`) is a quorum, this worker's forward and
backward pass, the checks that every participant starts from the same weights, one
all-reduce of the gradients, and an optimizer step only once the round committed.

torchft's ``DistributedDataParallel`` is not used: it all-reduces inside ``backward``,
before this worker can weigh its gradient by its records, refuse a non-finite one, or
skip a forward pass when it has no data; the one flat all-reduce here goes through the
same fault-tolerant ``Manager.allreduce``.

Everything the engine opens listens on ``settings.host`` (loopback by default): the
replica's store (bound by this module, handed to torch as a listening socket),
torchft's manager server (torchft binds ``[::]``; the constructor is given the host),
the heal server (:mod:`streamtrain.elastic.heal`) and gloo (``GLOO_SOCKET_IFNAME=lo``
when unset and the host is loopback).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import torch
import torchft.manager as torchft_manager
from torch.distributed import ReduceOp, TCPStore  # type: ignore[attr-defined]
from torchft import Manager, ProcessGroupGloo

from streamtrain.elastic.app import DistributedApp, app_state, load_app_state
from streamtrain.elastic.engine import StepOutcome
from streamtrain.elastic.gradients import (
    Contribution,
    GradientBuffer,
    LocalStep,
    count_vector,
    fingerprint,
    holds_kept_model,
    read_counts,
    same_model_tags,
    weights_tag,
)
from streamtrain.elastic.heal import HealServer
from streamtrain.elastic.lighthouse import wait_reachable
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.elastic.statecodec import check_same_model
from streamtrain.errors import ElasticError, ModelMismatchError
from streamtrain.ingest.reader import Batch
from streamtrain.ports import is_loopback

__all__ = ["TorchftEngine"]

log = logging.getLogger(__name__)

_LOG_EVERY_S = 5.0


class TorchftEngine:
    """One torchft replica (module docstring)."""

    kind = EngineKind.TORCHFT

    def __init__(
        self,
        app: DistributedApp,
        settings: ElasticSettings,
        stop: threading.Event | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.stop = stop
        self.local = LocalStep(app, settings.max_bad_batches)
        self.buffer = GradientBuffer(app.model)
        self.manager: Manager | None = None
        self._store: TCPStore | None = None
        self._heal: HealServer | None = None
        self._healed_from_peer = False
        self._last_step = 0

    @property
    def committed_step(self) -> int:
        """The job's committed steps (after :meth:`leave`: the last this worker saw)."""
        if self.manager is not None:
            self._last_step = int(self.manager.current_step())
        return self._last_step

    @property
    def durable_step(self) -> int:
        return self.committed_step

    @property
    def healed(self) -> bool:
        """Whether this worker took the job's weights from a peer when it joined."""
        return self._healed_from_peer

    def join(self) -> None:
        """Connect to the lighthouse, then take part in one round with no data: a joiner
        heals from a live peer in it, so it holds the job's weights when this returns."""
        s = self.settings
        assert s.lighthouse is not None  # noqa: S101 - ElasticSettings requires it
        wait_reachable(s.lighthouse, s.connect_timeout_s)
        if is_loopback(s.host) and sys.platform == "linux":
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        listening = socket.create_server((s.host.strip("[]"), 0), backlog=128)
        port = int(listening.getsockname()[1])
        self._store = TCPStore(
            s.host,
            port,
            is_master=True,
            wait_for_workers=False,
            master_listen_fd=listening.detach(),  # the store owns (and closes) it now
        )
        self._heal = HealServer(s.host, s.timeout_s, s.max_state_bytes)
        timeout = timedelta(seconds=s.timeout_s)
        with _manager_server_on(s.host):
            self.manager = Manager(
                pg=ProcessGroupGloo(timeout=timeout),
                load_state_dict=self._load_state,
                state_dict=lambda: app_state(self.app),
                min_replica_size=1,
                use_async_quorum=False,
                timeout=timeout,
                quorum_timeout=timedelta(seconds=s.quorum_timeout_s),
                connect_timeout=timedelta(seconds=s.connect_timeout_s),
                rank=0,
                world_size=1,
                store_addr=s.host,
                store_port=port,
                lighthouse_addr=s.lighthouse,
                replica_id=s.replica_id,
                hostname=s.host,
                heartbeat_interval=timedelta(milliseconds=s.heartbeat_interval_ms),
                checkpoint_transport=self._heal,
            )
        try:
            outcome = self.step(None)
            while not outcome.committed and not self._stopping():
                outcome = self.step(None)  # the heal or the round failed: the next one heals
        except BaseException:
            self.leave()  # a refused heal: out of the quorum at once, the others go on
            raise
        log.info(
            "joined at step %d with %d participant(s)%s",
            outcome.step,
            outcome.world_size,
            " (healed from a peer)" if self._healed_from_peer else "",
        )

    def step(self, batch: Batch | None) -> StepOutcome:
        """One round.

        1. A quorum from the lighthouse (synchronous, so a joiner heals from a live peer
           before it computes anything: it then takes part in the same round); while the
           lighthouse is away the quorum is asked for again every ``quorum_timeout_s``.
        2. This worker's forward and backward pass on its batch, if any
           (:class:`~streamtrain.elastic.gradients.LocalStep`).
        3. One all-reduce of ``[records, participants, 0]`` with a tag of this worker's
           weights (:func:`~streamtrain.elastic.gradients.weights_tag`): every
           participant must start the round from the same weights (two quorums that
           formed apart are caught and healed, not trained on; only then two MAX
           all-reduces of the fingerprints tell who holds the model all keep); then,
           when the step has records, one all-reduce of the gradients weighted by records
           (through ``Manager.allreduce``: a peer that dies mid-step makes it fail, and
           the step is not committed). Each all-reduce waits for the slowest
           participant, so a round has as few as the checks allow.
        4. ``manager.should_commit()`` and only then ``optimizer.step()`` (what torchft's
           ``OptimizerWrapper`` does; the engine calls it itself for the verdict).
        """
        manager = self._manager()
        if not self._quorum(manager):
            return StepOutcome(False, self.committed_step, self.committed_step)
        if manager.errored() is not None:
            # The heal or the group's set-up failed: this worker will skip the round's
            # collectives. Drop its connections so the others fail at once instead of
            # waiting out the timeout for it.
            self._abort_group(manager)
        mine = fingerprint(self.app.model)
        contribution = self.local.run(batch if manager.is_participating() else None)
        tag = weights_tag(mine)
        summed = self._allreduce(manager, torch.cat([count_vector(contribution.records), tag]))
        records_global, participants, _ = read_counts(summed[:3])
        if manager.errored() is None and participants != manager.num_participants():
            manager.report_error(
                ElasticError(f"{participants} of {manager.num_participants()} took part")
            )
        if manager.errored() is None and not same_model_tags(summed[3:], tag, participants):
            self._one_model_again(manager, mine)
        gradients = None
        if records_global > 0 and manager.errored() is None:
            gradients = self._allreduce(manager, self.buffer.pack(contribution.records))
        committed = bool(manager.should_commit())
        if committed and gradients is not None:
            self.buffer.unpack(gradients, records_global)
            self.app.optimizer.step()
        return self._outcome(manager, committed, contribution, records_global)

    def leave(self) -> None:
        """Leave the quorum at once: stop heartbeating, close every server."""
        self._last_step = self.committed_step
        manager, self.manager = self.manager, None
        if manager is not None:
            manager.shutdown(wait=False)
            self._abort_group(manager)
        if self._heal is not None:
            self._heal.shutdown(wait=False)
            self._heal = None
        self._store = None

    # -- the parts of a round --------------------------------------------------------

    def _manager(self) -> Manager:
        if self.manager is None:
            raise ElasticError("the torchft engine is not joined (or has left)")
        return self.manager

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _quorum(self, manager: Manager) -> bool:
        """Start a round; ``False`` if stopped while the lighthouse did not answer."""
        warned = 0.0
        while True:
            try:
                manager.start_quorum(timeout=timedelta(seconds=self.settings.quorum_timeout_s))
            except ModelMismatchError:
                raise
            except (RuntimeError, TimeoutError) as exc:
                # torchft keeps the failed quorum and raises it again from every later
                # start_quorum: forget it, and ask the lighthouse again.
                manager._quorum_future = None
                now = time.monotonic()
                if now - warned >= _LOG_EVERY_S:
                    warned = now
                    log.warning(
                        "no quorum yet from the lighthouse at %s (%s): the lighthouse or a "
                        "peer is away; asking again",
                        self.settings.lighthouse,
                        str(exc).splitlines()[0][:200],
                    )
                if self._stopping():
                    return False
                time.sleep(0.1)
            else:
                return True

    def _one_model_again(self, manager: Manager, mine: torch.Tensor) -> None:
        """The participants started the round from different weights. Two quorums that
        formed apart (a lighthouse glitch with ``--min-replicas`` below a majority) train
        two models under the same step numbers, which torchft cannot see (no worker is
        behind, so none heals): refuse the round, and have every worker but those with
        the greatest fingerprint (:func:`~streamtrain.elastic.gradients.holds_kept_model`)
        step back one step, so they heal from those next round. Every participant sees
        the mismatch in the same sum, so all of them take part in its MAX all-reduces."""
        kept = holds_kept_model(mine, lambda t: self._allreduce(manager, t, ReduceOp.MAX))
        if manager.errored() is not None:
            return
        manager.report_error(ElasticError("the participants hold different models"))
        if not kept:
            step = int(manager.current_step())
            log.error(
                "this worker's model differs from its peers' at step %d (two quorums trained "
                "apart): taking a peer's; what was acknowledged since they split is not in it",
                step,
            )
            manager.load_state_dict(
                {"step": step - 1, "batches_committed": int(manager.batches_committed())}
            )

    @staticmethod
    def _abort_group(manager: Manager) -> None:
        with contextlib.suppress(RuntimeError):
            manager._pg.abort()  # no public way to drop gloo's connections at once

    def _allreduce(
        self, manager: Manager, tensor: torch.Tensor, op: ReduceOp.RedOpType = ReduceOp.SUM
    ) -> torch.Tensor:
        work = manager.allreduce(tensor, reduce_op=op)
        work.wait()
        return tensor

    def _load_state(self, state: Any) -> None:
        """torchft's heal: refuse another model, then load the peer's state."""
        if not isinstance(state, dict):
            raise ModelMismatchError("a peer sent a state that is not a mapping")
        check_same_model(self.app.model.state_dict(), state.get("model"), source="a peer")
        load_app_state(self.app, state)
        self._healed_from_peer = True

    def _outcome(
        self,
        manager: Manager,
        committed: bool,
        contribution: Contribution,
        records_global: int,
    ) -> StepOutcome:
        step = int(manager.current_step())
        return StepOutcome(
            committed=committed,
            step=step,
            durable_step=step,
            records=contribution.records if committed else 0,
            records_global=records_global if committed else 0,
            world_size=int(manager.num_participants()),
            refused=contribution.refused,
            loss=contribution.loss,
            compute_s=contribution.compute_s,
        )


@contextlib.contextmanager
def _manager_server_on(host: str) -> Iterator[None]:
    """Have torchft's Manager bind its manager server to ``host`` (it binds ``[::]``)."""
    original: Callable[..., Any] = torchft_manager.ManagerServer
    bracketed = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host

    def bound(**kwargs: Any) -> Any:
        port = str(kwargs.get("bind", ":0")).rsplit(":", 1)[1]
        kwargs["bind"] = f"{bracketed}:{port}"
        return original(**kwargs)

    torchft_manager.ManagerServer = bound
    try:
        yield
    finally:
        torchft_manager.ManagerServer = original
