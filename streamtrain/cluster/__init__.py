"""cluster: several jobs on one pool of workers (pure: no I/O, no Kafka, no Faust).

Modules: ``problem`` (job classes, speed curves, the problem and the allocation, the
reasons in words), ``milp`` (the ModelArts rolling-horizon MILP with HiGHS), ``greedy``
(the ModelArts greedy baseline), ``reclaim`` (FaPES loan and reclaim by cost and gain,
and the one-way baseline), ``throttle`` (AntMan's throttle on opportunistic workers),
``warmstart`` (DLRover-RM's warm start from similar jobs) and ``book`` (the live
allocator's requests: what it accepts, refuses and asks the solver). The live allocator
(a Faust app) is :mod:`streamtrain.control.allocator`; the multi-job simulation is
:mod:`streamtrain.sim.pool`.
"""

from streamtrain.cluster.greedy import greedy_allocate
from streamtrain.cluster.milp import MilpSettings, milp_allocate
from streamtrain.cluster.problem import (
    Allocation,
    ClusterJob,
    ClusterProblem,
    Grant,
    JobClass,
    SpeedCurve,
)
from streamtrain.cluster.reclaim import Reclaim, reclaim, reclaim_lifo, reclaim_workers
from streamtrain.cluster.throttle import Throttle, ThrottleAction, ThrottleSettings, ThrottleStep
from streamtrain.cluster.warmstart import JobRecord, warm_start

__all__ = [
    "Allocation",
    "ClusterJob",
    "ClusterProblem",
    "Grant",
    "JobClass",
    "JobRecord",
    "MilpSettings",
    "Reclaim",
    "SpeedCurve",
    "Throttle",
    "ThrottleAction",
    "ThrottleSettings",
    "ThrottleStep",
    "greedy_allocate",
    "milp_allocate",
    "reclaim",
    "reclaim_lifo",
    "reclaim_workers",
    "warm_start",
]
