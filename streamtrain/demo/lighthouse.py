"""The demo's torchft lighthouse: the process that forms the one model's quorum.

Owned here: :func:`start_lighthouse` (torchft's lighthouse beside the control app, on
127.0.0.1 and a free port, its log in the run's ``logs/``) and :func:`check_lighthouse`
(the demo stops when it exits, as when the control app does).

``min_replicas`` is 1: the survivor of a killed worker trains on alone (two workers is
the pool's minimum), where a higher minimum would stop all training until the
replacement healed. A second quorum cannot form apart: the lighthouse is never restarted
under running workers (the demo stops if it exits), and of the workers it hears from it
forms a quorum only from a majority (or the whole previous quorum).
"""

from __future__ import annotations

from pathlib import Path

from streamtrain.elastic.lighthouse import LighthouseProcess, LighthouseSettings
from streamtrain.errors import StreamtrainError

__all__ = ["check_lighthouse", "start_lighthouse"]


def _log(run_dir: Path) -> Path:
    return run_dir / "logs" / "lighthouse.log"


def start_lighthouse(run_dir: Path) -> LighthouseProcess:
    """Start the lighthouse (module docstring); its address is ``.address``."""
    _log(run_dir).parent.mkdir(parents=True, exist_ok=True)
    lighthouse = LighthouseProcess(
        LighthouseSettings(port=0, min_replicas=1), log_path=_log(run_dir)
    )
    lighthouse.start()
    return lighthouse


def check_lighthouse(lighthouse: LighthouseProcess | None, run_dir: Path) -> None:
    """Raise if the lighthouse exited (``None``: the demo runs without one)."""
    if lighthouse is None or lighthouse.process is None:
        return
    code = lighthouse.process.poll()
    if code is not None:
        raise StreamtrainError(f"the lighthouse exited with code {code}; see {_log(run_dir)}")
