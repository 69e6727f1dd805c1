"""Start `streamtrain lag run` as a real process, and stop any CLI process, for tests."""

import subprocess

from streamtrain.process import stop_child
from tests.integration.cli_process import SCRIPT

# A group (re)join waits about half the session timeout on Tansu: with 6 s a control app
# joins in 3 s instead of 5. Tests that run many processes on a busy machine keep the
# default, which tolerates longer stalls of the app's event loop.
FAST_SESSION_S = 6.0


def start_lag_app(bootstrap, group, port, log_path, *extra, session_timeout_s=10.0):
    """`lag run` ticking every second with 1-s history steps; output to ``log_path``."""
    log = open(log_path, "w")  # noqa: SIM115 - closed by stop_process
    process = subprocess.Popen(
        [
            SCRIPT,
            "lag",
            "run",
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--tick-s",
            "1",
            "--history-step-s",
            "1",
            "--web-port",
            str(port),
            "--connect-timeout-s",
            "2",
            "--session-timeout-s",
            str(session_timeout_s),
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, log


def stop_process(process, log=None):
    """SIGTERM, then SIGKILL after 20 s; close ``log`` if given; the exit code."""
    code = stop_child(process, "streamtrain lag run", timeout_s=20.0)
    if log is not None:
        log.close()
    return code
