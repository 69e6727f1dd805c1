"""control: the control app, a Faust app assembled from the lag, scale and forecast packages.

Only wiring lives here (the pure cores are in :mod:`streamtrain.lag` and
:mod:`streamtrain.scale`):

* ``app``: :func:`~streamtrain.control.app.create_app`, the Faust app behind
  ``streamtrain lag run``: the leader's tick timer, the reports, alerts and history
  topics, the changelogged history tables;
* ``service``: :class:`~streamtrain.control.service.LagAppSettings` and the state the
  pieces share (:class:`~streamtrain.control.service.LagService`), no Faust;
* ``planner_agent``: with ``--plan-job``, the planner's samples agent, timer, commands
  and ``/planner`` page;
* ``web``: the HTTP pages (``/metrics``, ``/groups``, ``/groups/{group}/lag``,
  ``/health``), on 127.0.0.1 by default;
* ``publish``: sending a batch of messages and telling which ones the broker confirmed.

Faust is imported only by the modules that need it, never by ``import streamtrain.control``.
"""
