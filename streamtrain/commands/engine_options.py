"""The engine options of ``streamtrain worker``: ``--engine`` and what torchft and
torchelastic need (the lighthouse, the step wait, where the engine listens, the
checkpoints), each with its ``STREAMTRAIN_WORKER_*`` variable, and
:func:`elastic_settings`, their values as :class:`~streamtrain.elastic.settings.
ElasticSettings` (validated there: a ``ConfigError`` before any broker is contacted).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streamtrain.commands.common import OptionGroup, option

if TYPE_CHECKING:
    from streamtrain.elastic.settings import ElasticSettings

__all__ = ["elastic_settings", "engine_options"]

F = TypeVar("F", bound=Callable[..., Any])

# EngineKind's values (streamtrain.elastic.settings), spelled out so that the command
# line imports no torch.
_ENGINES = ("none", "torchft", "torchelastic")


def engine_options(command: F) -> F:
    """Add the engine options to ``command`` (module docstring)."""
    options = [
        option(
            "--engine",
            env="WORKER_ENGINE",
            type=click.Choice(_ENGINES),
            default="none",
            show_default=True,
            help="How the job's workers train: `none`, each its own model copy (nothing is "
            "exchanged); `torchft`, one model, data-parallel on torchft (a lighthouse forms "
            "a quorum every step; workers join and leave between steps while the others "
            "keep stepping; a joiner heals from a live peer); `torchelastic`, one model "
            "under torchrun (a join or leave restarts every worker from the newest "
            "checkpoint). With torchft and torchelastic a record is acknowledged only "
            "once the step that trained it committed on every worker (and, torchelastic, "
            "is in a saved checkpoint); the entry point returns a distributed app.",
        ),
        option(
            "--lighthouse",
            env="WORKER_LIGHTHOUSE",
            default=None,
            metavar="HOST:PORT",
            help="torchft's lighthouse (`streamtrain lighthouse`), for --engine torchft.",
        ),
        option(
            "--step-wait-s",
            env="WORKER_STEP_WAIT_S",
            type=click.FloatRange(min=0, min_open=True),
            default=0.2,
            show_default=True,
            help="With torchft or torchelastic, how long a step waits for a batch before "
            "this worker takes part with none (every worker steps every round).",
        ),
        option(
            "--engine-host",
            env="WORKER_ENGINE_HOST",
            default="127.0.0.1",
            show_default=True,
            help="Address the engine's servers listen on (torchft's manager, store and heal "
            "server). Beyond loopback only with --trusted-network.",
        ),
        option(
            "--trusted-network/--no-trusted-network",
            env="WORKER_TRUSTED_NETWORK",
            default=False,
            show_default=True,
            help="Allow --engine-host beyond loopback: nothing the engine serves is authenticated.",
        ),
        option(
            "--engine-timeout-s",
            env="WORKER_ENGINE_TIMEOUT_S",
            type=click.FloatRange(min=0, min_open=True),
            default=5.0,
            show_default=True,
            help="Longest wait for a collective, a commit vote or a heal: a peer that hangs "
            "costs the others at most this.",
        ),
        option(
            "--checkpoint-dir",
            env="WORKER_CHECKPOINT_DIR",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="With --engine torchelastic: where rank 0 saves the durable checkpoints a "
            "restart resumes from (shared by every worker of the job).",
        ),
        option(
            "--checkpoint-every-steps",
            env="WORKER_CHECKPOINT_EVERY_STEPS",
            type=click.IntRange(min=1),
            default=20,
            show_default=True,
            help="With --engine torchelastic: steps between checkpoints (records are "
            "acknowledged only once a checkpoint holds their step).",
        ),
    ]
    return OptionGroup(*options)(command)


def elastic_settings(worker_id: str, opts: dict[str, Any]) -> ElasticSettings:
    """The engine settings from the options (popped from ``opts``)."""
    from streamtrain.elastic.settings import ElasticSettings, EngineKind

    return ElasticSettings(
        engine=EngineKind(opts.pop("engine")),
        replica_id=worker_id,
        lighthouse=opts.pop("lighthouse"),
        step_wait_s=opts.pop("step_wait_s"),
        host=opts.pop("engine_host"),
        trusted_network=opts.pop("trusted_network"),
        timeout_s=opts.pop("engine_timeout_s"),
        checkpoint_dir=opts.pop("checkpoint_dir"),
        checkpoint_every_steps=opts.pop("checkpoint_every_steps"),
    )
