"""The TensorFlow adapter: a ``tf.data.Dataset`` of batches, and a Keras callback to ack them.

Owned here: :class:`TfFeed`. ``feed.dataset`` is a ``tf.data.Dataset`` built with
``from_generator`` and an output signature taken from the decoder's fields (each column
``(None, *shape)`` of its dtype). Two ways to acknowledge:

* ``ack="next"`` (custom training loops): a batch is acknowledged when the next one is
  requested. Do not put ``prefetch`` after it: prefetching asks for batches before the
  step on the previous one finished.
* ``ack="callback"`` (Keras): pass ``feed.ack_callback()`` to ``model.fit``; it
  acknowledges the oldest handed-out batches at the end of each training step, so it
  stays right although Keras prefetches (``fit`` with TensorFlow 2.21 asked for two
  batches beyond its last step in our tests: ``"next"`` would have acknowledged them
  untrained). With ``steps_per_execution=N`` Keras calls back once per N steps, naming
  the first and the last step: the callback acknowledges that many batches.

TensorFlow is an optional extra (``pip install 'streamtrain[tf]'``); it is imported only
when a feed is built.
"""

from __future__ import annotations

import collections
import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import Decoder, Field
from streamtrain.ingest.reader import Batch, PollingSource, poll_batches

__all__ = ["TfFeed"]

_ACK_MODES = ("next", "callback")
_INSTALL_HINT = "the tf.data adapter needs TensorFlow: pip install 'streamtrain[tf]'"


class TfBatchSource(PollingSource, Protocol):
    """An ``IngestConsumer``, or anything with a decoder that hands out batches."""

    @property
    def decoder(self) -> Decoder: ...


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(_INSTALL_HINT) from exc


class TfFeed:
    """Batches from ``source`` as a ``tf.data.Dataset``; see the module docstring for acks."""

    def __init__(
        self,
        source: TfBatchSource,
        batch_records: int | None = None,
        *,
        ack: str = "next",
        fields: tuple[Field, ...] | None = None,
        idle_timeout_s: float | None = None,
        max_batches: int | None = None,
        poll_s: float = 0.5,
    ) -> None:
        if ack not in _ACK_MODES:
            raise ConfigError(f"ack must be one of {', '.join(_ACK_MODES)}, got {ack!r}")
        chosen = fields if fields is not None else source.decoder.fields
        if not chosen:
            raise ConfigError(
                "the decoder does not declare its fields, so the tf.data output signature is "
                "unknown; pass fields=(Field(...), ...)"
            )
        self.fields: tuple[Field, ...] = chosen
        self.source = source
        self.batch_records = batch_records
        self.ack_mode = ack
        self.idle_timeout_s = idle_timeout_s
        self.max_batches = max_batches
        self.poll_s = poll_s
        self._outstanding: collections.deque[Batch] = collections.deque()
        self._lock = threading.Lock()
        self._dataset: Any = None

    @property
    def outstanding(self) -> int:
        """Batches handed to TensorFlow and not yet acknowledged."""
        with self._lock:
            return len(self._outstanding)

    def ack_all(self) -> None:
        with self._lock:
            batches, self._outstanding = list(self._outstanding), collections.deque()
        for batch in batches:
            batch.ack()

    def ack_oldest(self, batches: int = 1) -> None:
        """Acknowledge the ``batches`` oldest handed-out batches (fewer if fewer are out)."""
        with self._lock:
            done = [
                self._outstanding.popleft() for _ in range(min(batches, len(self._outstanding)))
            ]
        for batch in done:
            batch.ack()

    @property
    def dataset(self) -> Any:
        if self._dataset is None:
            tf = _import("tensorflow")
            signature = {
                spec.name: tf.TensorSpec(
                    shape=(None, *spec.shape),
                    dtype=tf.string if spec.dtype.kind == "O" else tf.as_dtype(spec.dtype),
                )
                for spec in self.fields
            }
            self._dataset = tf.data.Dataset.from_generator(
                self._generate, output_signature=signature
            )
        return self._dataset

    def ack_callback(self) -> Any:
        """A Keras callback acknowledging, at the end of each execution, one batch per
        training step it ran (``steps_per_execution`` of them, or fewer at the end)."""
        if self.ack_mode != "callback":
            raise ConfigError("ack_callback() needs a feed built with ack='callback'")
        callback_base: Any = _import("keras").callbacks.Callback
        feed = self

        class StreamtrainAck(callback_base):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self._first_step: int | None = None

            def on_train_batch_begin(
                self, batch: int, logs: Mapping[str, Any] | None = None
            ) -> None:
                self._first_step = batch

            def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
                first, self._first_step = self._first_step, None
                feed.ack_oldest(1 if first is None else max(batch - first + 1, 1))

        return StreamtrainAck()

    def _generate(self) -> Iterator[dict[str, NDArray[Any]]]:
        names = [spec.name for spec in self.fields]
        next_hook = self.ack_all if self.ack_mode == "next" else _nothing
        for batch in poll_batches(
            self.source,
            self.batch_records,
            self.poll_s,
            max_batches=self.max_batches,
            idle_timeout_s=self.idle_timeout_s,
            before_each=next_hook,
        ):
            missing = [name for name in names if name not in batch.columns]
            if missing:
                raise ConfigError(f"decoded batch lacks column(s) {', '.join(missing)}")
            with self._lock:
                self._outstanding.append(batch)
            yield {name: batch.columns[name] for name in names}
        if self.ack_mode == "next":
            self.ack_all()


def _nothing() -> None:
    return None
