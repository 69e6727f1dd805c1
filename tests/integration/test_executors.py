"""Executors against real things: child processes, a fake Kubernetes API server driven by
the official client, a local webhook, a real command. No broker needed."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes  # the dev extra installs it
import pytest

from streamtrain.errors import ConfigError, ExecutorError
from streamtrain.executors import (
    ApplierSettings,
    CommandApplier,
    CommandExecutor,
    Executor,
    KubernetesExecutor,
    LocalProcessPool,
    Outcome,
    WebhookExecutor,
    command_payload,
)
from streamtrain.ingest.reporting import PoolSizeFile
from streamtrain.proto import control_plane_pb2 as cp

from .fake_k8s import FakeKubernetes

# -- helpers ---------------------------------------------------------------------------


def wait_until(predicate, what, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie has exited, it just was not reaped


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def command(command_id="c-1", target=3, job="demo"):
    return cp.ScaleCommand(
        command_id=command_id,
        job=job,
        current_workers=1,
        target_workers=target,
        reason=cp.ScaleCommand.FALLBACK,
        plan=[3, 3, 4],
        plan_step_s=60,
        created_at_ms=1_700_000_000_000,
        explanation="lag above the SLO",
    )


def no_sleep_applier(executor, **settings):
    sleeps: list[float] = []
    applier = CommandApplier(executor, ApplierSettings(**settings), sleep=sleeps.append)
    return applier, sleeps


def test_every_executor_satisfies_the_protocol():
    executors: list[Executor] = [  # mypy checks the signatures, isinstance the members
        LocalProcessPool(["true"]),
        KubernetesExecutor("Deployment", "trainer"),
        WebhookExecutor("http://127.0.0.1:1/scale"),
        CommandExecutor(["true"]),
    ]
    assert all(isinstance(executor, Executor) for executor in executors)
    assert [e.name for e in executors] == [
        "local",
        "kubernetes:Deployment/default/trainer",
        "webhook",
        "command",
    ]


# -- LocalProcessPool ------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    out = pathlib.Path(sys.argv[1])
    if sys.argv[2:] == ["ignore-term"]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = f"{os.environ['STREAMTRAIN_WORKER_ID']}.{os.getpid()}"
    text = f"{os.environ['STREAMTRAIN_WORKER_INDEX']} {os.environ.get('EXTRA', '')}"
    (out / (me + ".tmp")).write_text(text)
    (out / (me + ".tmp")).rename(out / me)  # ready: the handler is installed
    time.sleep(120)
    """
)


def ready(tmp_path, pool):
    return {f"{w.worker_id}.{w.pid}" for w in pool.workers()} <= {
        p.name for p in tmp_path.iterdir()
    }


@pytest.fixture
def worker_argv(tmp_path):
    return [sys.executable, "-c", WORKER, str(tmp_path)]


def test_pool_scales_up_and_down_newest_first(tmp_path, worker_argv):
    with LocalProcessPool(worker_argv, env={"EXTRA": "hello"}) as pool:
        assert pool.current_workers() == 0
        assert pool.scale_to(3, command(target=3)) == 3
        workers = pool.workers()
        assert [(w.index, w.worker_id) for w in workers] == [
            (0, "worker-0"),
            (1, "worker-1"),
            (2, "worker-2"),
        ]
        wait_until(lambda: ready(tmp_path, pool), "3 workers to start")
        for w in workers:
            assert (tmp_path / f"{w.worker_id}.{w.pid}").read_text() == f"{w.index} hello"

        assert pool.scale_to(1) == 1
        assert pool.current_workers() == 1
        assert [w.pid for w in pool.workers()] == [workers[0].pid]
        assert not pid_alive(workers[1].pid)
        assert not pid_alive(workers[2].pid)


def test_pool_kills_a_worker_that_ignores_sigterm(tmp_path, worker_argv, caplog):
    with LocalProcessPool([*worker_argv, "ignore-term"], grace_s=0.2) as pool:
        pool.scale_to(1)
        wait_until(lambda: ready(tmp_path, pool), "the worker to ignore SIGTERM")
        (pid,) = [w.pid for w in pool.workers()]
        assert pool.scale_to(0) == 0
        assert not pid_alive(pid)
        assert "still running" in caplog.text and "SIGTERM" in caplog.text


def test_a_killed_worker_is_replaced_in_its_slot(tmp_path, worker_argv):
    gone = []  # on_exit: before the replacement starts (a shard job hands shards back)
    pool = LocalProcessPool(
        worker_argv, replace_dead=True, on_exit=lambda w: gone.append((w, len(pool.workers())))
    )
    with pool:
        pool.scale_to(2)
        victim = pool.workers()[1]
        os.kill(victim.pid, signal.SIGKILL)
        wait_until(lambda: pool.current_workers() == 1, "the kill to take effect")

        (exit_,) = pool.reap()
        assert gone == [("worker-1", 1)]
        assert (exit_.index, exit_.worker_id, exit_.pid) == (1, "worker-1", victim.pid)
        assert exit_.returncode == -signal.SIGKILL
        assert exit_.replaced_by_pid is not None
        assert pool.current_workers() == 2
        replacement = pool.workers()[1]
        assert (replacement.worker_id, replacement.pid, replacement.restarts) == (
            "worker-1",
            exit_.replaced_by_pid,
            1,
        )
        assert pool.reap() == []


def test_the_pool_keeps_its_size_in_a_file_that_workers_read(tmp_path, worker_argv):
    size_file = tmp_path / "pool-size"
    read = PoolSizeFile(size_file)
    assert read() == 0  # no file yet
    with LocalProcessPool(worker_argv, size_path=size_file) as pool:
        pool.scale_to(3)
        assert size_file.read_text() == "3\n" and read() == 3
        victim = pool.workers()[2]
        os.kill(victim.pid, signal.SIGKILL)
        wait_until(lambda: pool.current_workers() == 2, "the kill to take effect")
        pool.reap()  # not replaced: the pool shrank
        assert read() == 2
        pool.scale_to(1)
        assert read() == 1
    size_file.write_text("not a number\n")
    assert read() == 0


def test_without_replacement_a_dead_slot_is_refilled_by_the_next_scale(worker_argv):
    with LocalProcessPool(worker_argv) as pool:
        pool.scale_to(3)
        middle = pool.workers()[1].pid
        os.kill(middle, signal.SIGKILL)
        wait_until(lambda: pool.current_workers() == 2, "the kill to take effect")
        assert [e.replaced_by_pid for e in pool.reap()] == [None]
        assert [w.index for w in pool.workers()] == [0, 2]
        assert pool.scale_to(3) == 3
        assert [w.index for w in pool.workers()] == [0, 1, 2]


def test_close_leaves_no_child_alive(worker_argv):
    pool = LocalProcessPool(worker_argv)
    pool.scale_to(3)
    pids = [w.pid for w in pool.workers()]
    assert all(pid_alive(pid) for pid in pids)
    pool.close()
    assert not any(pid_alive(pid) for pid in pids)
    pool.close()  # twice is fine
    with pytest.raises(ExecutorError) as info:
        pool.scale_to(1)
    assert not info.value.retriable


def test_workers_survive_the_thread_that_scaled_them(worker_argv):
    # PR_SET_PDEATHSIG fires when the *forking thread* exits: the pool must fork from
    # its own long-lived thread, or these workers would get SIGTERM right here.
    with LocalProcessPool(worker_argv) as pool:
        scaler = threading.Thread(target=pool.scale_to, args=(2,))
        scaler.start()
        scaler.join()
        tid_gone = f"/proc/self/task/{scaler.native_id}"
        wait_until(lambda: not os.path.exists(tid_gone), "the scaling thread to exit")
        time.sleep(0.5)  # the kernel's signal would have landed by now
        assert pool.current_workers() == 2


def test_workers_die_with_a_killed_parent():
    parent_script = textwrap.dedent(
        """
        import sys
        from streamtrain.executors import LocalProcessPool
        pool = LocalProcessPool([sys.executable, "-c", "import time; time.sleep(120)"])
        pool.scale_to(2)
        print(" ".join(str(w.pid) for w in pool.workers()), flush=True)
        sys.stdin.read()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdin is not None
    assert parent.stdout is not None
    try:
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2
        assert all(pid_alive(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait(timeout=10)
        parent.stdin.close()
        parent.stdout.close()
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), "orphaned workers to die")


def test_a_missing_worker_binary_is_not_retriable(tmp_path):
    with LocalProcessPool([str(tmp_path / "no-such-binary")]) as pool:
        with pytest.raises(ExecutorError) as info:
            pool.scale_to(1)
        assert not info.value.retriable
        assert pool.current_workers() == 0


def test_the_pool_behind_an_applier(worker_argv):
    with LocalProcessPool(worker_argv) as pool:
        applier, _ = no_sleep_applier(pool)
        result = applier.apply(command(target=2))
        assert (result.outcome, result.workers_before, result.workers_after) == (
            Outcome.APPLIED,
            0,
            2,
        )
        assert applier.apply(command(target=2)).outcome is Outcome.DUPLICATE
        assert pool.current_workers() == 2


# -- KubernetesExecutor against a fake API server --------------------------------------


@pytest.fixture
def fake_api():
    with FakeKubernetes() as api:
        api.add("deployments", "training", "trainer", 2)
        api.add("statefulsets", "training", "ps", 1)
        yield api


@pytest.fixture
def api_client(fake_api):
    configuration = kubernetes.client.Configuration(host=fake_api.host)
    client = kubernetes.client.ApiClient(configuration)
    yield client
    client.close()


def test_k8s_reads_and_patches_the_deployment_scale(fake_api, api_client):
    executor = KubernetesExecutor("Deployment", "trainer", "training", api_client)
    assert executor.current_workers() == 2
    assert executor.scale_to(5, command(target=5)) == 5
    assert fake_api.replicas("deployments", "training", "trainer") == 5
    assert executor.current_workers() == 5
    assert executor.observed_workers() == 2  # pods not there yet
    fake_api.converge()
    assert executor.observed_workers() == 5

    patch = [r for r in fake_api.requests if r.method == "PATCH"]
    assert len(patch) == 1
    assert patch[0].path == "/apis/apps/v1/namespaces/training/deployments/trainer/scale"
    assert patch[0].content_type == "application/strategic-merge-patch+json"
    assert patch[0].body == {"spec": {"replicas": 5}}


def test_k8s_scales_a_statefulset_to_zero(fake_api, api_client):
    executor = KubernetesExecutor("StatefulSet", "ps", "training", api_client)
    assert executor.scale_to(0, command(target=0)) == 0  # the server omits replicas: 0
    assert executor.current_workers() == 0
    paths = {r.path for r in fake_api.requests}
    assert paths == {"/apis/apps/v1/namespaces/training/statefulsets/ps/scale"}


def test_k8s_500s_are_retried_by_the_applier(fake_api, api_client):
    executor = KubernetesExecutor("Deployment", "trainer", "training", api_client)
    applier, sleeps = no_sleep_applier(executor)
    fake_api.fail_next(3, 500)  # the current-count read and two patches
    result = applier.apply(command(target=4))
    assert (result.outcome, result.attempts, result.workers_after) == (Outcome.APPLIED, 3, 4)
    assert result.workers_before is None
    assert sleeps == [0.5, 1.0]
    assert fake_api.replicas("deployments", "training", "trainer") == 4


@pytest.mark.parametrize("status", [409, 429, 503])
def test_k8s_transient_statuses_are_retriable(fake_api, api_client, status):
    executor = KubernetesExecutor("Deployment", "trainer", "training", api_client)
    fake_api.fail_next(1, status)
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command())
    assert info.value.retriable
    assert f"HTTP {status}" in str(info.value)


@pytest.mark.parametrize("status", [401, 403, 422])
def test_k8s_permanent_statuses_are_not_retriable(fake_api, api_client, status):
    executor = KubernetesExecutor("Deployment", "trainer", "training", api_client)
    fake_api.fail_next(1, status)
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command())
    assert not info.value.retriable


def test_k8s_404_fails_at_once_and_names_the_workload(fake_api, api_client):
    executor = KubernetesExecutor("Deployment", "missing", "training", api_client)
    applier, sleeps = no_sleep_applier(executor)
    result = applier.apply(command())
    assert (result.outcome, result.attempts, sleeps) == (Outcome.FAILED, 1, [])
    assert "Deployment training/missing" in (result.error or "")
    assert "HTTP 404" in (result.error or "")
    assert "not found" in (result.error or "")


def test_k8s_unreachable_api_server_is_retriable():
    configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{closed_port()}")
    configuration.retries = False  # urllib3's own retries would only slow the test down
    client = kubernetes.client.ApiClient(configuration)
    try:
        executor = KubernetesExecutor("Deployment", "trainer", "training", client)
        with pytest.raises(ExecutorError) as info:
            executor.scale_to(3, command())
        assert info.value.retriable
        assert "did not answer" in str(info.value)
    finally:
        client.close()


def test_k8s_from_a_kubeconfig_uses_its_server_token_and_namespace(fake_api, tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": fake_api.host}}],
                "users": [{"name": "bot", "user": {"token": "s3cret"}}],
                "contexts": [
                    {"name": "other", "context": {"cluster": "fake", "user": "bot"}},
                    {
                        "name": "train",
                        "context": {"cluster": "fake", "user": "bot", "namespace": "training"},
                    },
                ],
                "current-context": "other",
            }
        )
    )
    with KubernetesExecutor.from_environment(
        "Deployment", "trainer", kubeconfig=kubeconfig, context="train"
    ) as executor:
        assert executor.namespace == "training"
        assert executor.current_workers() == 2
    assert fake_api.requests[-1].authorization == "Bearer s3cret"


def test_k8s_bad_kubeconfig_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="kubeconfig"):
        KubernetesExecutor.from_environment(
            "Deployment", "trainer", kubeconfig=tmp_path / "missing"
        )


def test_k8s_missing_client_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import now raises ImportError
    executor = KubernetesExecutor("Deployment", "trainer")
    with pytest.raises(ConfigError, match=r"streamtrain\[k8s\]"):
        executor.current_workers()


@pytest.mark.parametrize(
    "args",
    [("ReplicaSet", "x", "ns"), ("Deployment", "", "ns"), ("Deployment", "x", "a/b")],
)
def test_k8s_bad_workload_is_a_config_error(args):
    with pytest.raises(ConfigError):
        KubernetesExecutor(*args)


# -- WebhookExecutor against a local HTTP server ---------------------------------------


class Hook:
    """A local endpoint answering from a script of (status, body, headers) triples."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.script: list[tuple[int, bytes, dict[str, str]]] = []
        self.status_body = b'{"workers": 7}'
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                hook.requests.append(("POST", self.path, dict(self.headers), body))
                status, answer, headers = hook.script.pop(0) if hook.script else (200, b"", {})
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self):
                hook.requests.append(("GET", self.path, dict(self.headers), b""))
                self.send_response(200)
                self.send_header("Content-Length", str(len(hook.status_body)))
                self.end_headers()
                self.wfile.write(hook.status_body)

            def log_message(self, format, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path):
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@pytest.fixture
def hook():
    endpoint = Hook()
    endpoint.thread.start()
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()
    endpoint.thread.join(timeout=10)


def test_webhook_posts_the_command_as_json(hook):
    executor = WebhookExecutor(hook.url("/scale"), headers={"Authorization": "Bearer t"})
    hook.script.append((200, b'{"workers": 4}', {"Content-Type": "application/json"}))
    assert executor.scale_to(3, command(target=3)) == 4
    method, path, headers, body = hook.requests[0]
    assert (method, path) == ("POST", "/scale")
    assert headers["Content-Type"] == "application/json"
    assert headers["Idempotency-Key"] == "c-1"
    assert headers["Authorization"] == "Bearer t"
    assert json.loads(body) == {
        "command_id": "c-1",
        "job": "demo",
        "current_workers": 1,
        "target_workers": 3,
        "reason": "FALLBACK",
        "plan": [3, 3, 4],
        "plan_step_s": 60,
        "created_at_ms": 1_700_000_000_000,
        "explanation": "lag above the SLO",
    }
    assert json.loads(body) == command_payload(command(target=3))


def test_webhook_without_a_count_assumes_the_target(hook):
    executor = WebhookExecutor(hook.url("/scale"))
    with pytest.raises(ExecutorError, match="applied nothing yet") as info:
        executor.current_workers()
    assert not info.value.retriable
    hook.script.append((204, b"", {}))
    assert executor.scale_to(6, command(target=6)) == 6
    assert executor.current_workers() == 6  # the last count applied


def test_webhook_status_url(hook):
    executor = WebhookExecutor(hook.url("/scale"), status_url=hook.url("/status"))
    assert executor.current_workers() == 7
    hook.status_body = b"not json"
    with pytest.raises(ExecutorError) as info:
        executor.current_workers()
    assert not info.value.retriable


@pytest.mark.parametrize(
    "status,retriable", [(500, True), (503, True), (429, True), (400, False), (404, False)]
)
def test_webhook_status_codes(hook, status, retriable):
    executor = WebhookExecutor(hook.url("/scale"))
    hook.script.append((status, b"nope", {}))
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command())
    assert info.value.retriable is retriable
    assert f"HTTP {status}" in str(info.value)
    assert "nope" in str(info.value)


def test_webhook_does_not_follow_redirects(hook):
    executor = WebhookExecutor(hook.url("/scale"))
    hook.script.append((302, b"", {"Location": hook.url("/elsewhere")}))
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command())
    assert not info.value.retriable
    assert [r[:2] for r in hook.requests] == [("POST", "/scale")]


def test_webhook_retried_through_the_applier(hook):
    hook.script.extend([(502, b"", {}), (502, b"", {}), (200, b'{"workers": 3}', {})])
    applier, sleeps = no_sleep_applier(WebhookExecutor(hook.url("/scale")))
    result = applier.apply(command(target=3))
    assert (result.outcome, result.attempts, result.workers_after) == (Outcome.APPLIED, 3, 3)
    assert len(sleeps) == 2
    assert {r[2]["Idempotency-Key"] for r in hook.requests} == {"c-1"}


def test_webhook_unreachable_is_retriable():
    executor = WebhookExecutor(f"http://127.0.0.1:{closed_port()}/scale", timeout_s=2)
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command())
    assert info.value.retriable


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://host/x", "127.0.0.1:80"])
def test_webhook_only_takes_http_urls(url):
    with pytest.raises(ConfigError):
        WebhookExecutor(url)


# -- CommandExecutor with a real script ------------------------------------------------

SCRIPT = textwrap.dedent(
    """
    import json, pathlib, sys
    out = pathlib.Path(sys.argv[1])
    payload = json.loads(sys.stdin.read())
    out.write_text(json.dumps({"argv": sys.argv[2:], "stdin": payload}))
    if payload["target_workers"] == 13:
        print("the cluster is full", file=sys.stderr)
        sys.exit(3)
    print("scaling...")
    print(payload["target_workers"] + 1)
    """
)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "scale.py"
    path.write_text(SCRIPT)
    return path


def test_command_gets_placeholders_and_the_payload(script, tmp_path):
    record = tmp_path / "record.json"
    executor = CommandExecutor(
        [
            sys.executable,
            str(script),
            str(record),
            "{target}",
            "--job={job}",
            "{command_id}",
            "{{x}}",
        ]
    )
    assert executor.scale_to(4, command(target=4)) == 5  # the script prints target + 1
    seen = json.loads(record.read_text())
    assert seen["argv"] == ["4", "--job=demo", "c-1", "{x}"]
    assert seen["stdin"] == command_payload(command(target=4))
    assert executor.current_workers() == 5


@pytest.mark.parametrize("retriable", [True, False])
def test_command_failure_carries_stderr_and_the_configured_retriability(
    script, tmp_path, retriable
):
    executor = CommandExecutor(
        [sys.executable, str(script), str(tmp_path / "r.json")], retriable=retriable
    )
    with pytest.raises(ExecutorError, match="the cluster is full") as info:
        executor.scale_to(13, command(target=13))
    assert info.value.retriable is retriable
    assert "code 3" in str(info.value)


def test_command_status_argv(tmp_path):
    status = [sys.executable, "-c", "print('noise'); print(9)"]
    assert CommandExecutor(["true"], status_argv=status).current_workers() == 9


def test_command_refuses_option_like_values(script, tmp_path):
    executor = CommandExecutor([sys.executable, str(script), str(tmp_path / "r.json"), "{job}"])
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command(job="--delete-everything"))
    assert not info.value.retriable
    assert not (tmp_path / "r.json").exists()


def test_command_missing_program_is_not_retriable(tmp_path):
    executor = CommandExecutor([str(tmp_path / "nope"), "{target}"])
    with pytest.raises(ExecutorError) as info:
        executor.scale_to(3, command())
    assert not info.value.retriable


@pytest.mark.parametrize("template", ["{replicas}", "{target!r}", "{target:>5}", "{", "{0}"])
def test_command_bad_template_is_a_config_error(template):
    with pytest.raises(ConfigError):
        CommandExecutor(["scale", template])
