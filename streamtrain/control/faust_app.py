"""One Faust app on the project's Kafka settings, for both control apps (the lag /
planner app of :mod:`streamtrain.control.app` and the cluster allocator of
:mod:`streamtrain.control.allocator`).

Owned here: :func:`new_faust_app`: the broker list, SASL/SSL credentials from
:class:`~streamtrain.config.KafkaSettings`, memory stores, one partition per topic, the
web server bound to ``web_host`` (127.0.0.1 by default) without Faust's own pages
(``/table``, ``/router``: table contents and topology) unless ``faust_pages``, and the
session and request
timeouts every control app uses; :func:`run_faust_app`: run one until Ctrl-C or SIGTERM
(a non-zero exit becomes a :class:`~streamtrain.errors.StreamtrainError`). Faust is
imported only when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamtrain.config import KafkaSettings
from streamtrain.errors import StreamtrainError

__all__ = ["new_faust_app", "run_faust_app"]


def _credentials(kafka: KafkaSettings) -> Any:
    import faust

    conf = kafka.aiokafka_config()
    if kafka.sasl_mechanism is not None:
        return faust.SASLCredentials(
            username=kafka.sasl_username,
            password=kafka.sasl_password,
            mechanism=kafka.sasl_mechanism.upper(),
            ssl_context=conf.get("ssl_context"),
        )
    if "ssl_context" in conf:
        return faust.SSLCredentials(conf["ssl_context"])
    return None


def new_faust_app(
    app_id: str,
    kafka: KafkaSettings,
    *,
    data_dir: Path,
    web_host: str,
    web_port: int,
    request_timeout_s: float,
    faust_pages: bool = False,
    session_timeout_s: float = 10.0,
) -> Any:
    """A Faust app for ``app_id`` on ``kafka`` (module docstring)."""
    import faust

    brokers = ";".join(f"kafka://{host}:{port}" for host, port in kafka.servers)
    return faust.App(
        app_id,
        broker=brokers,
        broker_credentials=_credentials(kafka),
        store="memory://",
        datadir=str(data_dir),
        topic_partitions=1,
        web_enabled=True,
        web_host=web_host,
        web_port=web_port,
        web_bind=web_host,
        # Faust's own pages: /table serves table contents, /router the cluster's
        # topology; neither is needed by streamtrain (one worker routes nothing).
        web_tables_enabled=faust_pages,
        web_router_enabled=faust_pages,
        web_stats_enabled=False,
        web_graph_enabled=False,
        producer_request_timeout=request_timeout_s,
        # the broker drops the app after this long without a heartbeat (one a second);
        # on Tansu a group (re)join also waits about half of it for other members
        broker_session_timeout=session_timeout_s,
        broker_heartbeat_interval=1.0,
    )


def run_faust_app(app: Any, log_level: str, what: str) -> None:
    """Run ``app`` in a Faust worker until it stops; ``what`` names it in the error."""
    import faust

    worker = faust.Worker(app, loglevel=log_level, redirect_stdouts=False, quiet=True)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise StreamtrainError(f"{what} stopped with exit code {exc.code}") from exc
