"""Durable checkpoints of a job's model: what a restarted group resumes from.

Owned here: :class:`CheckpointDir`. A checkpoint is ``step-<step>.state`` in the
directory (:mod:`streamtrain.elastic.statecodec` bytes: no pickle), written to a
temporary file, flushed to disk and renamed, so a reader never sees half of one; the
newest ``keep`` are kept. :meth:`CheckpointDir.latest_step` is the newest complete one.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from streamtrain.elastic.statecodec import decode, encode
from streamtrain.errors import ElasticError, SchemaError

__all__ = ["CheckpointDir"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^step-(\d{1,18})\.state$")


class CheckpointDir:
    """The durable checkpoints of one job (module docstring)."""

    def __init__(self, path: Path, keep: int = 3, max_bytes: int = 1 << 30) -> None:
        self.path = path
        self.keep = max(1, keep)
        self.max_bytes = max_bytes

    def steps(self) -> list[int]:
        """The steps of the complete checkpoints, oldest first."""
        if not self.path.is_dir():
            return []
        found = [_NAME.match(p.name) for p in self.path.iterdir()]
        return sorted(int(m[1]) for m in found if m is not None)

    def latest_step(self) -> int:
        """The newest checkpoint's step; 0 when there is none."""
        steps = self.steps()
        return steps[-1] if steps else 0

    def save(self, step: int, state: Any) -> Path:
        """Write the checkpoint of ``step`` durably; drop the oldest beyond ``keep``."""
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / f"step-{step}.state"
        temporary = self.path / f".step-{step}.state.{os.getpid()}.tmp"
        data = encode(state)
        with open(temporary, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(final)
        directory = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        for old in self.steps()[: -self.keep]:
            (self.path / f"step-{old}.state").unlink(missing_ok=True)
        log.debug("checkpoint of step %d saved (%d bytes)", step, len(data))
        return final

    def load(self, step: int) -> Any:
        """The state saved at ``step``; :class:`ElasticError` if it is gone or malformed."""
        path = self.path / f"step-{step}.state"
        try:
            data = path.read_bytes()
            return decode(data, self.max_bytes)
        except (OSError, SchemaError) as exc:
            raise ElasticError(f"cannot load the checkpoint {path}: {exc}") from exc
