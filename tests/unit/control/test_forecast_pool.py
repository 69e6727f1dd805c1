"""The planner's fit process: started at once below the app's priority, stopped at
shutdown without waiting for a fit in progress."""

import os
import time
from concurrent.futures import ProcessPoolExecutor

from streamtrain.control.planner_agent import FIT_NICENESS, forecast_pool, stop_forecast_pool
from tests.integration.cli_process import process_alive


def test_stopping_the_pool_ends_a_running_fit_at_once():
    pool = ProcessPoolExecutor(max_workers=1)
    running = pool.submit(time.sleep, 300)  # a fit that would hold the exit
    deadline = time.monotonic() + 30
    while not running.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    processes = list(pool._processes.values())
    assert running.running() and processes
    stop_forecast_pool(pool)
    for process in processes:
        process.join(timeout=30)  # a bound on the wait, not a timing goal
        # the 300 s fit was ended, not waited for; read from /proc because another
        # test's child watcher may have reaped it, which is_alive() cannot see
        assert process.pid is not None and not process_alive(process.pid)


def test_fits_run_below_the_apps_priority():
    pool, _submit = forecast_pool()
    try:
        fit_niceness = pool.submit(os.nice, 0).result(timeout=60)
    finally:
        stop_forecast_pool(pool)
    assert fit_niceness == min(os.nice(0) + FIT_NICENESS, 19)
