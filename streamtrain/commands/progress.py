"""Progress of long commands on stderr: items done out of a total, and the time left.

Owned here: :class:`Meter` and :func:`duration_text`. ``forecast eval`` counts its fits
with one, ``simulate`` its forecaster's fits and its seeds. A meter prints
``[fits 3/42] auto: fitted on 30240 steps (12.3 s); about 4 min left``: on a terminal
one line rewritten in place, elsewhere (a log file) one line per item; a ``quiet``
meter (``--json``) prints nothing. The estimate is the mean time per item so far times
the items left (items differ in cost, so it is an estimate: ``auto``'s first fit of a
series costs most, the later ones reuse it). :meth:`Meter.note` prints a lasting line
(a header, a warning) without breaking the meter's line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from streamtrain.units import MIN_PER_H, MINUTE_S

__all__ = ["Meter", "duration_text"]


def duration_text(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 5 min``."""
    if seconds < 90:
        return f"{max(0.0, seconds):.0f} s"
    minutes = round(seconds / MINUTE_S)
    if minutes < MIN_PER_H:
        return f"{minutes} min"
    return f"{minutes // MIN_PER_H} h {minutes % MIN_PER_H} min"


class Meter:
    """Items done out of ``total`` (module docstring)."""

    def __init__(
        self,
        total: int,
        label: str,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.total = max(0, total)
        self.label = label
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.count = 0
        self._open = False  # a meter line is on the terminal, without its newline
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty()) if callable(isatty) else False

    def left_s(self) -> float | None:
        """The estimate of the seconds left (None before the first item)."""
        if self.count == 0:
            return None
        per_item = (self.clock() - self.started) / self.count
        return per_item * max(0, self.total - self.count)

    def done(self, what: str) -> None:
        """One more item done; ``what`` says which."""
        self.count += 1
        if self.quiet:
            return
        left = self.left_s()
        tail = (
            ""
            if left is None or self.count >= self.total
            else f"; about {duration_text(left)} left"
        )
        self.show(f"[{self.label} {self.count}/{self.total}] {what}{tail}", last=not tail)

    def show(self, line: str, *, last: bool = False) -> None:
        """A progress line counted by its sender (``last``: the final one): in place
        on a terminal, a line elsewhere, nothing when quiet."""
        if self.quiet:
            return
        if self.terminal:
            self.stream.write("\r\033[K" + line + ("\n" if last else ""))
            self._open = not last
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        """A lasting line (printed even when quiet: it is not progress)."""
        if self._open:
            self.stream.write("\n")
            self._open = False
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the meter's line on a terminal."""
        if self._open:
            self.stream.write("\n")
            self._open = False
            self.stream.flush()
