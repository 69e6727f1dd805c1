"""Build configuration beyond pyproject.toml: the optional C extensions.

``streamtrain._columns`` builds ingest's record columns from confluent-kafka Messages and
finds a chunk's offset runs (``streamtrain.records``);
``streamtrain.sim._queues`` runs a tick of the simulator's partition queues
(``streamtrain.sim.engine``), with the same arithmetic as its numpy path (no fused
multiply-adds, so that every number is the same). ``optional=True``: without a C
compiler the package installs anyway and each uses its pure-Python path
(``streamtrain.ingest.messages.active_builder()`` and
``streamtrain.sim.partitions.COMPILED`` say which ones run).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamtrain._columns",
            ["streamtrain/_columns.c"],
            optional=True,
        ),
        Extension(
            "streamtrain.sim._queues",
            ["streamtrain/sim/_queues.c"],
            optional=True,
            extra_compile_args=["-ffp-contract=off"],
        ),
    ]
)
