"""Build configuration beyond pyproject.toml: ingest's optional C column builder.

``optional=True``: without a C compiler the package installs anyway and ingest uses its
pure-Python path (``streamtrain.ingest.messages`` says which one it runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamtrain.ingest._columns",
            ["streamtrain/ingest/_columns.c"],
            optional=True,
        )
    ]
)
