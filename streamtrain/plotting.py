"""matplotlib for the CLI's ``--plot`` options, in one place.

Owned here: :func:`pyplot`: matplotlib's pyplot on the file-only ``Agg`` backend, imported
when a plot is asked for (matplotlib is an optional dependency), or a
:class:`~streamtrain.errors.ConfigError` that says how to get it.
"""

from __future__ import annotations

import importlib
from typing import Any

from streamtrain.errors import ConfigError

__all__ = ["pyplot"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` drawing to files only (no display needed)."""
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed: pip install matplotlib"
        ) from None
    return plt
