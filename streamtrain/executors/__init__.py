"""executors: apply ScaleCommands to real workers, idempotently, with retries and reports.

A package of its own, apart from ``scale`` (which decides the counts): this one starts
and stops processes, calls Kubernetes and webhooks, and reads the commands topic.

* :mod:`~streamtrain.executors.consumer`: :class:`CommandConsumer`, the commands topic
  read and applied (``streamtrain scale apply``);
* :mod:`~streamtrain.executors.base`: the :class:`Executor` protocol and
  :class:`CommandApplier` (idempotency on ``command_id``, journal, retries with backoff,
  a reported :class:`ApplyResult` for every command);
* :mod:`~streamtrain.executors.local`: :class:`LocalProcessPool`, worker
  subprocesses on this machine (the demo's);
* :mod:`~streamtrain.executors.kubernetes`: :class:`KubernetesExecutor`, the scale
  subresource of a Deployment or StatefulSet (extra ``k8s``, imported lazily);
* :mod:`~streamtrain.executors.webhook`: :class:`WebhookExecutor` (HTTP POST) and
  :class:`CommandExecutor` (a local program).

Typical wiring::

    pool = LocalProcessPool([sys.executable, "-m", "my_worker"], replace_dead=True)
    applier = CommandApplier(pool, ApplierSettings(job="demo"), on_result=publish)
    result = applier.apply(command)  # never raises for a failed apply: read result.outcome
"""

from streamtrain.executors.base import (
    ApplierSettings,
    ApplyResult,
    CommandApplier,
    Executor,
    Outcome,
)
from streamtrain.executors.kubernetes import KubernetesExecutor, WorkloadKind
from streamtrain.executors.local import LocalProcessPool, WorkerExit, WorkerInfo
from streamtrain.executors.webhook import CommandExecutor, WebhookExecutor, command_payload

__all__ = [
    "ApplierSettings",
    "ApplyResult",
    "CommandApplier",
    "CommandExecutor",
    "Executor",
    "KubernetesExecutor",
    "LocalProcessPool",
    "Outcome",
    "WebhookExecutor",
    "WorkerExit",
    "WorkerInfo",
    "WorkloadKind",
    "command_payload",
]
