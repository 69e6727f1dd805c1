"""executors: apply ScaleCommands to real workers, idempotently, with retries and reports.

* :mod:`~streamtrain.scale.executors.base`: the :class:`Executor` protocol and
  :class:`CommandApplier` (idempotency on ``command_id``, journal, retries with backoff,
  a reported :class:`ApplyResult` for every command);
* :mod:`~streamtrain.scale.executors.local`: :class:`LocalProcessPool`, worker
  subprocesses on this machine (the demo's);
* :mod:`~streamtrain.scale.executors.kubernetes`: :class:`KubernetesExecutor`, the scale
  subresource of a Deployment or StatefulSet (extra ``k8s``, imported lazily);
* :mod:`~streamtrain.scale.executors.webhook`: :class:`WebhookExecutor` (HTTP POST) and
  :class:`CommandExecutor` (a local program).

Typical wiring::

    pool = LocalProcessPool([sys.executable, "-m", "my_worker"], replace_dead=True)
    applier = CommandApplier(pool, ApplierSettings(job="demo"), on_result=publish)
    result = applier.apply(command)  # never raises for a failed apply: read result.outcome
"""

from streamtrain.scale.executors.base import (
    ApplierSettings,
    ApplyResult,
    CommandApplier,
    Executor,
    Outcome,
)
from streamtrain.scale.executors.kubernetes import KubernetesExecutor, WorkloadKind
from streamtrain.scale.executors.local import LocalProcessPool, WorkerExit, WorkerInfo
from streamtrain.scale.executors.webhook import CommandExecutor, WebhookExecutor, command_payload

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
