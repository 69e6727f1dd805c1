"""demo: ``streamtrain demo``, the elastic online-training loop end to end.

* ``traffic``: the KALE-shaped, time-compressed, skewed traffic generator;
* ``trainer``: the workers' training app (MMoE at a set speed, online AUC, trained ids);
* ``observe``: what the demo watches (control-plane topics, workers' files, a timeline);
* ``summary``: the end-of-run summary (KALE's metrics, measured live);
* ``dashboard``: the live page on 127.0.0.1;
* ``run``: the orchestration (settings, then topics, control app, worker pool, traffic,
  drain) and the loop that drives the day, with ``run_state`` (one run's state and
  children, what each tick does) and ``run_report`` (what a run tells: the dashboard's
  state, the progress line, the summary), over its parts: ``children`` (names, command,
  connection of the child processes), ``control_args`` (the control app's argv),
  ``worker_args`` (the workers' argv and environment), ``history`` (the planner's seed
  history), ``phases`` (starting, running, draining, done), all pure, and ``topics``
  (the run's topics and start offsets).
"""
