"""forecast: traffic forecasters (KALE §3.2), traces, and the evaluation harness.

Landed so far (issue #6 is open): the trace format and KALE-shaped generator
(``trace``), the forecaster protocol and seasonal-naive models (``base``).
"""

from streamtrain.forecast.base import Forecaster, SeasonalNaive, fill_gaps
from streamtrain.forecast.trace import Trace, load_trace, synth_trace, write_trace

__all__ = [
    "Forecaster",
    "SeasonalNaive",
    "Trace",
    "fill_gaps",
    "load_trace",
    "synth_trace",
    "write_trace",
]
