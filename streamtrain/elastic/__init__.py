"""elastic: one model trained data-parallel by every worker of a job, scaled while it runs.

Between the worker (which assembles it) and ingest (whose batches it trains). The
training engine is an existing one: torchft (a lighthouse forms a quorum every step;
workers join and leave between steps while the others keep stepping; a joiner heals
from a live peer) or torch.distributed.elastic under ``torchrun`` (restart-based, from a
durable checkpoint); ``none`` keeps each worker's own model. Modules:

* ``settings``: :class:`EngineKind`, :class:`ElasticSettings` (pure);
* ``app``: the :class:`DistributedApp` protocol a user gives (model, optimizer, a
  forward-and-backward ``step``, optional extra state) and :class:`TrainingParts`;
* ``gradients``: this worker's share of a step, its gradient weighted by its records
  (:class:`LocalStep`, :class:`GradientBuffer`, the counts all-reduce);
* ``engine``: :class:`StepOutcome`, the :class:`Engine` protocol, ``none``
  (:class:`LocalEngine`) and :func:`make_engine`;
* ``torchft_engine``, ``heal``: torchft's Manager, and the pickle-free heal transport;
* ``torchelastic_engine``, ``checkpoints``: torch.distributed under torchrun, and the
  durable checkpoints a restart resumes from;
* ``statecodec``: model state as bytes without pickle, and the check that a peer's
  model is this worker's (:func:`check_same_model`);
* ``ledger``: which batches wait for which step to be durable (pure);
* ``trainer``: :class:`ElasticTrainer`, a round and the fate of its batch (ack, nack,
  dead letter);
* ``lighthouse``: torchft's lighthouse as a process (``streamtrain lighthouse``), and the
  check a worker makes that it is reachable.
"""

from streamtrain.elastic.app import DistributedApp, TrainingParts
from streamtrain.elastic.engine import Engine, LocalEngine, StepOutcome, make_engine
from streamtrain.elastic.ledger import AckLedger
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.elastic.trainer import ElasticTrainer, StepAware

__all__ = [
    "AckLedger",
    "DistributedApp",
    "ElasticSettings",
    "ElasticTrainer",
    "Engine",
    "EngineKind",
    "LocalEngine",
    "StepAware",
    "StepOutcome",
    "TrainingParts",
    "make_engine",
]
