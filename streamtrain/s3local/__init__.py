"""A local S3 server for the embedded broker's durable mode, on loopback.

Owned here: :class:`LocalS3`, one process of the package's own S3 server
(:mod:`streamtrain.s3local.server`) on a free 127.0.0.1 port with one bucket, and the
environment a client (the Tansu broker) needs to use it (:meth:`LocalS3.client_env`).
The embedded broker keeps its log segments and committed offsets there when it runs
with ``--storage-engine s3://BUCKET/``, so the *broker* process can be killed
(``kill -9``) and started again without losing a record or an offset. The S3 server
itself keeps everything in its own memory: it is the durable disk of a test or a demo,
not of a production cluster. :meth:`LocalS3.stop` asks it to end (SIGTERM) and kills
it after ``stop_timeout_s``; it also gets SIGTERM from the kernel if its parent dies.
:meth:`LocalS3.stats` says what it stored and served (PUTs, GETs, list pages).

The server serves only requests signed with credentials made for this one run
(:meth:`LocalS3.client_env` hands them to the broker; they reach the server through its
environment, never its command line) and with a loopback ``Host``, so no browser page
and no other program can touch the broker's data. It is the package's own, not moto:
moto's listing slows down with the size of the whole bucket (see
:mod:`streamtrain.s3local.server`); it needs nothing beyond the standard library.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import subprocess
import sys
import time
from types import TracebackType

from streamtrain.errors import EmbeddedBrokerError
from streamtrain.ports import free_port
from streamtrain.process import ChildLog, die_with_parent_preexec, stop_child
from streamtrain.s3local.checks import ACCESS_KEY_ENV, SECRET_KEY_ENV, STATS_PATH, Credentials
from streamtrain.s3local.store import S3Stats

__all__ = ["LocalS3", "S3Stats"]

log = logging.getLogger(__name__)

_REGION = "us-east-1"


class LocalS3:
    """The S3 server process on ``host``:a free port, serving ``bucket``.

    No I/O in ``__init__``; :meth:`start` (or ``with``) launches it and waits until it
    answers; :meth:`stop` ends it (and everything stored in it).
    """

    def __init__(
        self,
        bucket: str = "streamtrain",
        *,
        host: str = "127.0.0.1",
        startup_timeout_s: float = 20.0,
        stop_timeout_s: float = 5.0,
    ) -> None:
        self.bucket = bucket
        self.host = host
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log = ChildLog("streamtrain-s3-")
        self._port: int | None = None
        self.credentials = Credentials.random(_REGION)

    def start(self) -> LocalS3:
        if self._process is not None:
            raise EmbeddedBrokerError("local S3 server already started")
        self._port = free_port(self.host)
        command = [
            *(sys.executable, "-m", "streamtrain.s3local.server"),
            *("--host", self.host, "--port", str(self._port), "--bucket", self.bucket),
        ]
        env = os.environ | {
            ACCESS_KEY_ENV: self.credentials.access_key_id,
            SECRET_KEY_ENV: self.credentials.secret_access_key,
        }
        self._process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log.open(),
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent_preexec(),
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("local S3 server at %s (pid %d), bucket %r", self.endpoint, self.pid, self.bucket)
        return self

    def _request(self, method: str, path: str, timeout_s: float) -> int:
        if self._port is None:
            raise EmbeddedBrokerError("the local S3 server has not been started")
        connection = http.client.HTTPConnection(self.host, self._port, timeout=timeout_s)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def stats(self, timeout_s: float = 5.0) -> S3Stats:
        """What the server stored and served so far (objects, PUTs, GETs, list pages and
        the keys they listed): what the broker's S3 traffic costs."""
        if self._port is None:
            raise EmbeddedBrokerError("the local S3 server has not been started")
        connection = http.client.HTTPConnection(self.host, self._port, timeout=timeout_s)
        try:
            connection.request("GET", STATS_PATH)
            return S3Stats(**json.loads(connection.getresponse().read()))
        finally:
            connection.close()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self._process is None or self._process.poll() is not None:
                raise EmbeddedBrokerError(
                    f"the local S3 server exited before it was ready; its log: {self.log_tail()!r}"
                )
            try:
                status = self._request("GET", STATS_PATH, timeout_s=1.0)
            except OSError:
                if time.monotonic() >= deadline:
                    raise EmbeddedBrokerError(
                        f"the local S3 server did not answer within {self.startup_timeout_s:g} s; "
                        f"its log: {self.log_tail()!r}",
                        retriable=True,
                    ) from None
                time.sleep(0.1)
                continue
            if status != 200:
                raise EmbeddedBrokerError(
                    f"the local S3 server answered HTTP {status} to {STATS_PATH}"
                )
            return

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout_s``; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            stop_child(process, "local S3 server", self.stop_timeout_s)
        self._log.close()

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self._process is None:
            raise EmbeddedBrokerError("the local S3 server is not running")
        return self._process.pid

    @property
    def endpoint(self) -> str:
        if self._port is None:
            raise EmbeddedBrokerError("the local S3 server has not been started")
        return f"http://{self.host}:{self._port}"

    @property
    def storage_url(self) -> str:
        """Tansu's ``--storage-engine`` for this bucket."""
        return f"s3://{self.bucket}/"

    def client_env(self) -> dict[str, str]:
        """What an S3 client (Tansu's object store) needs in its environment."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.credentials.secret_access_key,
            "AWS_DEFAULT_REGION": _REGION,
        }

    def log_tail(self, max_bytes: int = 2000) -> str:
        return self._log.tail(max_bytes)
