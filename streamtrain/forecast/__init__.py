"""forecast: traffic forecasters (KALE §3.2), traces, and the evaluation harness.

Modules: ``trace`` (the CSV format, KALE-shaped generator), ``series`` (other
realistic arrival series), ``base`` (the protocol, gap filling, seasonal naive),
``stats`` (statsforecast's AutoETS and MSTL: ``ets``, ``mstl``), ``fedformer`` /
``fedformer_settings`` / ``fedformer_data`` / ``fedformer_train`` / ``fedformer_model``
(the FEDformer-style model: a transformer combined with MSTL; torch is imported only
when it is fitted or loaded), ``mix`` (the combination's online weights),
``select`` (the best model per series on a validation window), ``fallback`` (a
seasonal-naive safety net; ``auto`` is ``select`` behind it), ``registry`` (models by
name), ``live`` (fitting in the background for the live planner) and ``evaluate``
(rolling-origin harness, metrics).
"""

from streamtrain.forecast.base import Forecaster, SeasonalNaive, fill_gaps
from streamtrain.forecast.evaluate import EvalSettings, Scores, evaluate, rolling_origin
from streamtrain.forecast.fallback import FallbackForecaster
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.fedformer_settings import FedformerSettings, NetConfig
from streamtrain.forecast.registry import FORECASTER_NAMES, load_forecaster, make_forecaster
from streamtrain.forecast.select import SelectForecaster
from streamtrain.forecast.series import make_trace
from streamtrain.forecast.stats import StatsForecaster
from streamtrain.forecast.trace import Trace, load_trace, synth_trace, write_trace

__all__ = [
    "FORECASTER_NAMES",
    "EvalSettings",
    "FallbackForecaster",
    "FedformerForecaster",
    "FedformerSettings",
    "Forecaster",
    "NetConfig",
    "Scores",
    "SeasonalNaive",
    "SelectForecaster",
    "StatsForecaster",
    "Trace",
    "evaluate",
    "fill_gaps",
    "load_forecaster",
    "load_trace",
    "make_forecaster",
    "make_trace",
    "rolling_origin",
    "synth_trace",
    "write_trace",
]
