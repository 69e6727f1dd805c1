"""experiments: scripted processes and experiments that drive the subsystems for evidence.

* ``shuffle_harness``: ``python -m streamtrain.experiments.shuffle_harness SPEC.json``,
  one scripted shuffle worker process (synthetic or Kafka source, simulated or torch
  trainer, Kafka or static membership), used by the integration tests and the
  experiment;
* ``shuffle_table2``: KALE Table 2 in shape (worker processes, skewed partitions,
  committed-offset lag sampling), run by ``benchmarks/shuffle.py --table2``.

An assembly layer like :mod:`streamtrain.worker`: it may use the test doubles of
:mod:`streamtrain.testing`; library code never imports it.
"""
