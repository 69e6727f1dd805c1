"""What a worker trains: the training-app protocol and how an entry point is loaded.

Owned here: the :class:`TrainingApp` protocol (a ``decoder`` and a ``step(batch)``),
:func:`load_app` (``module:function`` entry points returning a :class:`TrainingApp` or a
:class:`~streamtrain.elastic.app.DistributedApp`, or the built-in MMoE example, which is
both) and
:func:`warm_start`, which calls an app's optional ``warm_start(worker_id)`` hook before
the worker takes any data (a new worker of a running job loads the job's latest
checkpoint there: two-phase scaling).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Protocol, runtime_checkable

from streamtrain.elastic.app import DistributedApp
from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.reader import Batch

__all__ = ["TrainingApp", "load_app", "warm_start"]


@runtime_checkable
class TrainingApp(Protocol):
    """What an entry point returns: how to decode records, and one training step.

    ``step`` runs the forward pass, backward pass and optimizer step on one batch; the
    worker acknowledges the batch when it returns. An optional ``close()`` is called
    when the worker stops; an optional ``warm_start(worker_id)`` before it takes data.
    """

    @property
    def decoder(self) -> Decoder: ...

    def step(self, batch: Batch) -> object: ...


def load_app(entry_point: str | None, app_dir: str | None = ".") -> TrainingApp | DistributedApp:
    """Call ``module:function`` (``None``: the built-in MMoE CTR example) for the app.

    ``app_dir`` is put first on ``sys.path`` so a module next to the caller imports.
    """
    if entry_point is None:
        from streamtrain.ingest.mmoe import mmoe_app

        return mmoe_app()
    module_name, sep, attribute = entry_point.partition(":")
    if not sep or not module_name.strip() or not attribute.strip():
        raise ConfigError(f"entry point {entry_point!r} is not module:function")
    if app_dir is not None:
        path = os.path.abspath(app_dir)
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for entry point: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ConfigError(f"{module_name!r} has no attribute {attribute!r}") from exc
    if not callable(target):
        raise ConfigError(f"entry point {entry_point!r} is not callable")
    app = target()
    if not isinstance(app, TrainingApp | DistributedApp):
        raise ConfigError(
            f"entry point {entry_point!r} returned {type(app).__name__}, which lacks a "
            "`decoder` attribute and a `step(batch)` method (or `model`, `optimizer` and "
            "`forward_backward(batch)` for one model trained by every worker)"
        )
    return app


def warm_start(app: TrainingApp | DistributedApp, worker_id: str) -> bool:
    """Call ``app.warm_start(worker_id)`` if the app has one; whether it did."""
    hook = getattr(app, "warm_start", None)
    if not callable(hook):
        return False
    hook(worker_id)
    return True
