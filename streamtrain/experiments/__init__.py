"""experiments: scripted processes and experiments that drive the subsystems for evidence.

* ``shuffle_harness``: ``python -m streamtrain.experiments.shuffle_harness SPEC.json``,
  one scripted shuffle worker process (synthetic or Kafka source, simulated, torch or
  real MMoE trainer, Kafka or static membership), used by the integration tests and the
  experiment; ``mmoe_trainer``: its MMoE step and AUC evaluations;
* ``shuffle_table2``: KALE Table 2 with real training (worker processes, skewed
  partitions, drifting labels, committed-offset lag sampling, bytes on the wire, CPU,
  AUC), run by ``benchmarks/shuffle.py --table2``; ``table2_metrics``: its pure metrics.

KALE Fig. 1 (AUC against training lag) is the product's, not an experiment's: the demo
prices its lag with it (:mod:`streamtrain.ingest.staleness`).

An assembly layer like :mod:`streamtrain.worker`: it may use the test doubles of
:mod:`streamtrain.testing`; library code never imports it.
"""
