"""worker: one training worker assembled from ingest (and, with ``--shuffle``, the shuffle).

The assembly layer between the ``streamtrain worker`` command and the subsystems: the
command turns options into settings and calls :func:`run_worker`; nothing below imports
this package. Modules:

* ``app``: the :class:`TrainingApp` protocol (a ``decoder`` and a ``step(batch)``) and
  :func:`load_app` (``module:function`` entry points, or the built-in MMoE example);
* ``run``: :class:`WorkerRun` (limits and reporting), :class:`WorkerSummary` (the
  command's JSON line) and :func:`run_worker`, the training loop;
* ``engines``: which engine (:mod:`streamtrain.elastic`) a worker trains its app on:
  ``none`` (its own model copy), ``torchft`` or ``torchelastic`` (one model);
* ``shuffle_queue``: :class:`ShuffleQueue`, a shuffle node behind the ingest consumer's
  record queue, and :func:`shuffled_consumer`, which wires tracker, node and consumer;
* ``settings``: :func:`worker_shuffle_settings`, the shuffle settings a worker derives
  from its queue and batch sizes.
"""

from streamtrain.worker.app import TrainingApp, load_app
from streamtrain.worker.run import WorkerRun, WorkerSummary, run_worker
from streamtrain.worker.settings import worker_shuffle_settings
from streamtrain.worker.shuffle_queue import ShuffleQueue, shuffled_consumer

__all__ = [
    "ShuffleQueue",
    "TrainingApp",
    "WorkerRun",
    "WorkerSummary",
    "load_app",
    "run_worker",
    "shuffled_consumer",
    "worker_shuffle_settings",
]
