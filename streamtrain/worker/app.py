"""What a worker trains: the training-app protocol and how an entry point is loaded.

Owned here: the :class:`TrainingApp` protocol (a ``decoder`` and a ``step(batch)``) and
:func:`load_app` (``module:function`` entry points, or the built-in MMoE example).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Protocol, runtime_checkable

from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.reader import Batch

__all__ = ["TrainingApp", "load_app"]


@runtime_checkable
class TrainingApp(Protocol):
    """What an entry point returns: how to decode records, and one training step.

    ``step`` runs the forward pass, backward pass and optimizer step on one batch; the
    worker acknowledges the batch when it returns. An optional ``close()`` is called
    when the worker stops.
    """

    @property
    def decoder(self) -> Decoder: ...

    def step(self, batch: Batch) -> object: ...


def load_app(entry_point: str | None, app_dir: str | None = ".") -> TrainingApp:
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
    if not isinstance(app, TrainingApp):
        raise ConfigError(
            f"entry point {entry_point!r} returned {type(app).__name__}, which lacks a "
            "`decoder` attribute and a `step(batch)` method"
        )
    return app
