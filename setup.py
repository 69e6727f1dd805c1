"""Build configuration beyond pyproject.toml: the optional C extension ``streamtrain._columns``.

It builds ingest's record columns from confluent-kafka Messages and finds a chunk's
offset runs (``streamtrain.records``). ``optional=True``: without a C compiler the
package installs anyway and both use their pure-Python paths
(``streamtrain.ingest.messages.active_builder()`` says which one ingest runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamtrain._columns",
            ["streamtrain/_columns.c"],
            optional=True,
        )
    ]
)
