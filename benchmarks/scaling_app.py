"""The training app of ``benchmarks/scaling.py``: sleeps like a device, records what it did.

A step takes ``len(batch) / SCALING_CAPACITY_RECORDS_PER_S`` seconds of sleep (a slow
accelerator, not a busy CPU: on a 2-core machine the measurement is of the hand-over, not
of CPU contention), then appends the batch's record ids (int64) to
``<SCALING_OUT_DIR>/<worker>-<pid>.ids`` and ``"<wall time> <records>"`` to ``.steps``,
before the batch is acknowledged; the ids of a batch a peer forwarded (trained here for
another worker's partition) also go to ``.peer``, which survives a kill -9.
"""

from __future__ import annotations

import os
import time

import numpy as np

from streamtrain.ingest.decoders import RawDecoder
from streamtrain.ingest.reader import Batch


class SleepingApp:
    decoder = RawDecoder()

    def __init__(self) -> None:
        self.capacity = float(os.environ["SCALING_CAPACITY_RECORDS_PER_S"])
        out = os.environ["SCALING_OUT_DIR"]
        name = f"{os.environ.get('STREAMTRAIN_WORKER_ID', 'worker')}-{os.getpid()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._ids = os.open(os.path.join(out, name + ".ids"), flags, 0o644)
        self._steps = os.open(os.path.join(out, name + ".steps"), flags, 0o644)
        self._peer = os.open(os.path.join(out, name + ".peer"), flags, 0o644)
        self._busy_until = time.monotonic()

    def warm_start(self, worker_id: str) -> None:
        """Nothing to load: the benchmark measures the hand-over, not a checkpoint."""

    def step(self, batch: Batch) -> None:
        records = batch.records
        now = time.monotonic()
        self._busy_until = max(self._busy_until, now) + len(records) / self.capacity
        time.sleep(max(0.0, self._busy_until - now))
        ids = np.frombuffer(records.payloads, dtype="<i8")
        os.write(self._ids, ids.tobytes())
        if records.forwarded:
            os.write(self._peer, ids.tobytes())
        os.write(self._steps, f"{time.time():.4f} {len(records)}\n".encode())


def make() -> SleepingApp:
    return SleepingApp()
