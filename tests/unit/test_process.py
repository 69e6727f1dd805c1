"""stop_child and stop_children: signal, wait, then kill, on real child processes; a
child's log and its tail; a child lowering its priority, every thread of it."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys

import pytest

from streamtrain.process import ChildLog, stop_child, stop_children

IGNORES_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)

# SIGINT's default handler set in the child: a test run started as a background job of a
# non-interactive shell passes SIGINT down ignored, and Python keeps it ignored
IGNORES_TERM_NOT_INT = IGNORES_TERM.replace(
    "print(", "signal.signal(signal.SIGINT, signal.default_int_handler)\nprint(", 1
)


def _start(code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None
    with process.stdout:
        assert process.stdout.readline() == b"ready\n"
    return process


def test_a_child_that_obeys_the_signal_is_not_killed(caplog: pytest.LogCaptureFixture) -> None:
    process = _start("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    with caplog.at_level(logging.WARNING):
        code = stop_child(process, "sleeper", timeout_s=10.0)
    assert code == -signal.SIGTERM
    assert not caplog.records


def test_a_child_that_ignores_the_signal_is_killed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    process = _start(IGNORES_TERM)
    with caplog.at_level(logging.WARNING):
        code = stop_child(process, "stubborn child", timeout_s=0.2)
    assert code == -signal.SIGKILL
    assert "stubborn child" in caplog.text and "SIGTERM" in caplog.text


def test_the_signal_is_the_callers_and_an_exited_child_is_only_reaped() -> None:
    process = _start(IGNORES_TERM_NOT_INT)
    assert stop_child(process, "child", timeout_s=10.0, sig=signal.SIGINT) != -signal.SIGKILL
    assert stop_child(process, "child", timeout_s=10.0) == process.returncode


def test_children_are_stopped_together_and_each_stubborn_one_is_killed_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sleeper = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
    children = [
        (_start(IGNORES_TERM), "first stubborn"),
        (_start(sleeper), "sleeper"),
        (_start(IGNORES_TERM), "second stubborn"),
    ]
    with caplog.at_level(logging.WARNING):
        codes = stop_children(children, timeout_s=0.3)
    assert codes == [-signal.SIGKILL, -signal.SIGTERM, -signal.SIGKILL]
    assert all(process.returncode is not None for process, _ in children)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert "first stubborn" in warned[0] and "second stubborn" in warned[1]


def test_the_log_tail_is_the_last_bytes_the_children_wrote() -> None:
    log = ChildLog("streamtrain-test-")
    assert log.tail() == ""
    first = "import sys\nsys.stdout.write('a' * 3000 + 'END')\n"
    subprocess.run([sys.executable, "-c", first], stdout=log.open(), check=True)
    assert log.tail(10) == "a" * 7 + "END"
    assert len(log.tail()) == 2000
    stdout = log.open()  # a new file: a restarted child's log starts empty
    assert log.tail() == ""
    for part in ("one", "two"):  # reading the tail does not move where a child writes
        subprocess.run([sys.executable, "-c", f"print({part!r})"], stdout=stdout, check=True)
        assert log.tail().endswith(f"{part}\n")
    assert log.tail() == "one\ntwo\n"
    log.close()
    log.close()
    assert log.tail() == ""


LOWERS_ITS_PRIORITY = (
    "import json, os, threading\n"
    "from streamtrain.process import lower_priority\n"
    "started = threading.Event()\n"
    "stop = threading.Event()\n"
    "def wait():\n"
    "    started.set()\n"
    "    stop.wait(30)\n"
    "thread = threading.Thread(target=wait)\n"
    "thread.start()\n"
    "started.wait(30)\n"
    "before = os.nice(0)\n"
    "lower_priority(4, 'a test child')\n"
    "tasks = [int(t) for t in os.listdir('/proc/self/task')]\n"
    "after = [os.getpriority(os.PRIO_PROCESS, t) for t in tasks]\n"
    "stop.set()\n"
    "thread.join()\n"
    "print(json.dumps({'before': before, 'after': after}))\n"
)


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread niceness is Linux's")
def test_lower_priority_lowers_every_thread_of_the_process_and_not_its_parent():
    mine = os.nice(0)
    out = subprocess.run(
        [sys.executable, "-c", LOWERS_ITS_PRIORITY],
        capture_output=True,
        check=True,
        timeout=60,
    )
    report = json.loads(out.stdout)
    assert len(report["after"]) >= 2  # the main thread and the one started before
    assert set(report["after"]) == {min(19, report["before"] + 4)}
    assert os.nice(0) == mine
