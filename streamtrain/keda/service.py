"""The ``externalscaler.ExternalScaler`` gRPC service KEDA calls (grpc.aio, one event loop).

Owned here: :class:`ScalerService`, the four methods of KEDA's contract answered from a
:class:`~streamtrain.keda.plans.PlanBook` with the numbers of
:mod:`streamtrain.keda.contract`:

* ``IsActive``: the plan wants at least one worker.
* ``StreamIsActive``: the same, pushed on the stream when it is first known and then
  whenever it flips (a plan going from zero, or from nothing, to some workers pushes
  ``true`` at once, outside KEDA's ``pollingInterval``); the stream stays open until
  KEDA closes it or the server stops.
* ``GetMetricSpec``: one metric per job, target :data:`~streamtrain.keda.contract.TARGET_SIZE`
  per replica.
* ``GetMetrics``: the metric's value, chosen so the HPA lands on the planned count.

No request can crash the server: bad metadata is ``INVALID_ARGUMENT``, a plan not
there (yet) ``UNAVAILABLE`` (:class:`ScalerService` says which is which).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, NoReturn

import grpc

from streamtrain.errors import PlanUnavailableError, ScalerRequestError
from streamtrain.keda.contract import TARGET_SIZE, job_of, metric_name, metric_value, quoted
from streamtrain.keda.plans import JobPlan, PlanBook
from streamtrain.proto import externalscaler_pb2 as es
from streamtrain.proto.externalscaler_pb2_grpc import ExternalScalerServicer

__all__ = ["ScalerService"]

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]


class ScalerService(ExternalScalerServicer):
    """KEDA's four methods (module docstring). ``ready`` says whether the feed has caught
    up; ``not_ready`` why not.

    Every request names its job in ``scalerMetadata`` (key ``job`` or ``jobFromEnv``).
    Bad metadata (no job, two different ones, an overlong one, a job this scaler is not
    started for with ``--job``, a metric this job does not have) is answered
    ``INVALID_ARGUMENT`` with a message saying what to fix (names quoted to 200
    characters); a job with no plan yet (also one no topic names yet: it may start
    later), a stale plan (the planner not heard for ``--max-plan-age-s``), or a scaler
    still reading its topics, ``UNAVAILABLE``: KEDA retries, and after the
    ScaledObject's ``fallback.failureThreshold`` errors applies its
    ``fallback.replicas``. ``GetMetricSpec`` needs only a valid job: its answer depends
    on the name alone, so KEDA can build the HPA before the job's first plan. Answers
    are counted per method and gRPC code (:attr:`requests`) for the scaler's
    ``/metrics``.
    """

    def __init__(
        self, book: PlanBook, ready: Callable[[], bool], not_ready: Callable[[], str]
    ) -> None:
        self.book = book
        self._ready = ready
        self._not_ready = not_ready
        self._streams: set[asyncio.Queue[None]] = set()
        self.requests = Counter[tuple[str, str]]()  # (method, gRPC code name)
        self.stale_jobs: frozenset[str] = frozenset()

    def check_stale(self) -> frozenset[str]:
        """Log each job whose plan went stale or fresh again since the last call (the
        server calls it every second); returns the stale jobs."""
        if not self._ready():  # still reading the topics: nothing to say yet
            return self.stale_jobs
        plans = self.book.snapshot()
        stale = frozenset(job for job, plan in plans.items() if plan.stale)
        for job in sorted(stale - self.stale_jobs):
            try:
                self.book.planned(job)
            except PlanUnavailableError as exc:
                log.warning("KEDA gets UNAVAILABLE for job %s from now on: %s", quoted(job), exc)
        for job in sorted(self.stale_jobs - stale):
            log.warning("the planner of job %s is heard again: its plan is served", quoted(job))
        if stale != self.stale_jobs:
            self.notify(set(stale ^ self.stale_jobs))
        self.stale_jobs = stale
        return stale

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def notify(self, jobs: set[str]) -> None:
        """Plans changed (called on the loop by the feed): wake every open stream."""
        for queue in self._streams:
            if queue.empty():
                queue.put_nowait(None)

    # -- shared checks -------------------------------------------------------------------

    async def _fail(
        self, context: Context, method: str, code: grpc.StatusCode, text: str
    ) -> NoReturn:
        self.requests[(method, code.name)] += 1
        log.info("%s refused (%s): %s", method, code.name, text)
        await context.abort(code, text)
        raise AssertionError("unreachable: abort raises")  # pragma: no cover

    async def _plan(self, context: Context, method: str, metadata: Mapping[str, str]) -> JobPlan:
        """The job's fresh plan with a known count, or an abort with the right code."""
        try:
            job = job_of(metadata)
            self.book.check_served(job)
            self._check_ready()
            plan = self.book.planned(job)
        except ScalerRequestError as exc:
            await self._fail(context, method, grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        except PlanUnavailableError as exc:
            await self._fail(context, method, grpc.StatusCode.UNAVAILABLE, exc.message)
        return plan

    def _check_ready(self) -> None:
        if not self._ready():
            raise PlanUnavailableError(self._not_ready())

    def _ok(self, method: str) -> None:
        self.requests[(method, grpc.StatusCode.OK.name)] += 1

    # -- the contract --------------------------------------------------------------------

    async def IsActive(self, request: es.ScaledObjectRef, context: Context) -> es.IsActiveResponse:
        plan = await self._plan(context, "IsActive", request.scalerMetadata)
        self._ok("IsActive")
        return es.IsActiveResponse(result=bool(plan.active))

    async def StreamIsActive(
        self, request: es.ScaledObjectRef, context: Context
    ) -> AsyncIterator[es.IsActiveResponse]:
        method = "StreamIsActive"
        queue: asyncio.Queue[None] = asyncio.Queue(maxsize=1)
        self._streams.add(queue)
        try:
            job = ""
            try:
                job = job_of(request.scalerMetadata)
            except ScalerRequestError as exc:
                await self._fail(context, method, grpc.StatusCode.INVALID_ARGUMENT, exc.message)
            try:
                self.book.check_served(job)
            except ScalerRequestError as exc:
                await self._fail(context, method, grpc.StatusCode.INVALID_ARGUMENT, exc.message)
            sent: bool | None = None
            while True:
                if self._ready():
                    try:  # no plan yet, or a stale one: nothing to push (GetMetrics errs)
                        active = self.book.planned(job).active
                    except PlanUnavailableError:
                        active = None
                    if active is not None and active != sent:
                        if sent is None:
                            self._ok(method)
                        log.info("StreamIsActive for %s: pushing %s", job, active)
                        yield es.IsActiveResponse(result=active)
                        sent = active
                await queue.get()
        finally:
            self._streams.discard(queue)

    async def GetMetricSpec(
        self, request: es.ScaledObjectRef, context: Context
    ) -> es.GetMetricSpecResponse:
        method = "GetMetricSpec"
        try:
            job = job_of(request.scalerMetadata)
            self.book.check_served(job)
        except ScalerRequestError as exc:
            await self._fail(context, method, grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        self._ok(method)
        spec = es.MetricSpec(
            metricName=metric_name(job),
            targetSize=int(TARGET_SIZE),
            targetSizeFloat=TARGET_SIZE,
        )
        return es.GetMetricSpecResponse(metricSpecs=[spec])

    async def GetMetrics(
        self, request: es.GetMetricsRequest, context: Context
    ) -> es.GetMetricsResponse:
        method = "GetMetrics"
        metadata = request.scaledObjectRef.scalerMetadata
        plan = await self._plan(context, method, metadata)
        name = metric_name(plan.job)
        if request.metricName and request.metricName != name:
            await self._fail(
                context,
                method,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"job {quoted(plan.job)} has one metric, {quoted(name)} (from "
                f"GetMetricSpec); asked for {quoted(request.metricName)}",
            )
        planned = plan.planned_workers or 0
        value = metric_value(planned, plan.reported_workers)
        self._ok(method)
        return es.GetMetricsResponse(
            metricValues=[
                es.MetricValue(metricName=name, metricValue=planned, metricValueFloat=value)
            ]
        )
