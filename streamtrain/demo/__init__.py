"""demo: the end-to-end elastic online-training demo (issue #9).

Landed so far: ``traffic`` (the KALE-shaped, time-compressed, skewed traffic generator).
Still to come: the orchestration of broker, workers and control app, the dashboard, and
``streamtrain demo``.
"""
