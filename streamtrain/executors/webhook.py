"""Executors that hand a scaling command to something else: an HTTP endpoint or a command.

Owned here: :func:`command_payload` (the JSON object both executors send: the
command's fields, ``reason`` by name, e.g. ``"PROACTIVE"``), :class:`WebhookExecutor`
(POSTs it) and :class:`CommandExecutor` (runs a local program with it on stdin).

A command whose id cannot travel in an HTTP header (control characters, characters
outside Latin-1) fails at once, not retriable, and so does any other request the HTTP
client refuses to build: one bad command must not crash the applier's loop. Error
texts and logs name an endpoint by :func:`redact_url` (scheme, host and
port): a webhook URL often carries a token in its path or query.

Both answer ``current_workers`` from an optional status source (``status_url``,
``status_argv``), else the last count they applied, else raise (not retriable).
Delivering the same command twice is harmless for the receiver that scales *to* N.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import re
import string
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Final

from streamtrain.errors import ConfigError, ExecutorError
from streamtrain.proto import control_plane_pb2 as cp

__all__ = ["CommandExecutor", "WebhookExecutor", "command_payload", "redact_url"]

log = logging.getLogger(__name__)

_PLACEHOLDERS: Final = frozenset({"target", "job", "command_id"})
_RETRIABLE_HTTP: Final = frozenset({408, 429})
_MAX_ANSWER_BYTES: Final = 64 * 1024
_INT_LINE: Final = re.compile(r"^\s*(\d+)\s*$")
_HEADER_VALUE: Final = re.compile(r"^[\x20-\x7e]+$")  # printable ASCII, no CR/LF


def redact_url(url: str) -> str:
    """``url`` without what may be a secret: userinfo, path, query and fragment.

    >>> redact_url("https://user:pw@hooks.example.com:8443/services/T0/B0/secret?k=v")
    'https://hooks.example.com:8443/…'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<unparsable URL>"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme or '?'}://{host}{port}/…"


def command_payload(command: cp.ScaleCommand) -> dict[str, Any]:
    """The command as a JSON-ready dict (the webhook body and the command's stdin)."""
    return {
        "command_id": command.command_id,
        "job": command.job,
        "current_workers": command.current_workers,
        "target_workers": command.target_workers,
        "reason": cp.ScaleCommand.Reason.Name(command.reason),
        "plan": list(command.plan),
        "plan_step_s": command.plan_step_s,
        "created_at_ms": command.created_at_ms,
        "explanation": command.explanation,
    }


def _workers_from(answer: Any) -> int | None:
    if isinstance(answer, dict):
        workers = answer.get("workers")
        if isinstance(workers, int) and not isinstance(workers, bool) and workers >= 0:
            return workers
    return None


def _http_request(
    url: str, method: str, data: bytes | None, headers: Mapping[str, str]
) -> urllib.request.Request:
    # Only http:// and https:// URLs get here: WebhookExecutor.__init__ checks the scheme.
    return urllib.request.Request(  # noqa: S310
        url, data=data, method=method, headers={"Accept": "application/json", **headers}
    )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


class WebhookExecutor:
    """POSTs each command to ``url`` (stdlib ``urllib``) with an
    ``Idempotency-Key: <command_id>`` header and expects 2xx; a JSON answer with
    ``{"workers": n}`` gives the count after, otherwise the target is assumed. 5xx, 408,
    429, timeouts and connection errors are retriable; other 4xx are not; redirects are
    not followed (a POST must not silently turn into a GET), so a 3xx is not retriable.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        headers: Mapping[str, str] | None = None,
        status_url: str | None = None,
        name: str = "webhook",
    ) -> None:
        for label, value in (("url", url), ("status_url", status_url)):
            if value is not None and urllib.parse.urlsplit(value).scheme not in ("http", "https"):
                raise ConfigError(f"the webhook {label} must be http:// or https://, got {value!r}")
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s}")
        self.url = url
        self.status_url = status_url
        self.timeout_s = timeout_s
        self._headers = dict(headers or {})
        self._name = name
        self._opener = urllib.request.build_opener(_NoRedirects)
        self._last_applied: int | None = None

    @property
    def name(self) -> str:
        return self._name

    def current_workers(self) -> int:
        if self.status_url is not None:
            answer = self._exchange(_http_request(self.status_url, "GET", None, {}))
            workers = _workers_from(answer)
            if workers is None:
                raise ExecutorError(
                    f"status endpoint {redact_url(self.status_url)} did not answer "
                    '{"workers": n}',
                    retriable=False,
                )
            return workers
        if self._last_applied is not None:
            return self._last_applied
        raise ExecutorError(
            f"{self._name} has no status_url and has applied nothing yet", retriable=False
        )

    def scale_to(self, target_workers: int, command: cp.ScaleCommand) -> int:
        if not _HEADER_VALUE.match(command.command_id):
            raise ExecutorError(
                f"command_id {command.command_id!r} cannot be an Idempotency-Key header "
                "(printable ASCII only)",
                retriable=False,
            )
        payload = command_payload(command)
        payload["target_workers"] = target_workers
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": command.command_id,
            **self._headers,
        }
        request = _http_request(self.url, "POST", json.dumps(payload).encode("utf-8"), headers)
        answer = self._exchange(request)
        workers = _workers_from(answer)
        if workers is None:
            if answer is not None:
                log.warning(
                    'webhook %s answered without a valid "workers" count; assuming %d',
                    redact_url(self.url),
                    target_workers,
                )
            workers = target_workers
        self._last_applied = workers
        return workers

    def _exchange(self, request: urllib.request.Request) -> Any:
        """Send ``request``; the JSON answer, or None when the body is empty or not JSON."""
        what = f"{request.get_method()} {redact_url(request.full_url)}"
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                body = response.read(_MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            code = exc.code
            detail = exc.read(500).decode("utf-8", "replace").strip()
            exc.close()
            retriable = code >= 500 or code in _RETRIABLE_HTTP
            message = f"{what} answered HTTP {code} {exc.reason}"
            raise ExecutorError(
                message + (f": {detail}" if detail else ""), retriable=retriable
            ) from exc
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets
            raise ExecutorError(f"{what} failed: {_without_url(exc)}") from exc
        except (ValueError, UnicodeError) as exc:  # a header or URL the client refuses
            raise ExecutorError(
                f"{what} cannot be sent: {type(exc).__name__}", retriable=False
            ) from exc
        if not body.strip():
            return None
        try:
            return json.loads(body)
        except ValueError:
            return None


class CommandExecutor:
    """Runs ``argv`` (a template that may use ``{target}``, ``{job}`` and
    ``{command_id}``; no shell) for each command, the payload on its stdin. A non-zero
    exit raises :class:`~streamtrain.errors.ExecutorError` (retriable unless configured
    otherwise); if the last line of its stdout is an integer, that is the worker count
    after."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = 60.0,
        retriable: bool = True,
        status_argv: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        name: str = "command",
    ) -> None:
        if not argv:
            raise ConfigError("the scaling command must be a non-empty argv")
        for arg in argv:
            _check_template(arg)
        if status_argv is not None and not status_argv:
            raise ConfigError("status_argv must be None or a non-empty argv")
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s}")
        self.argv = tuple(argv)
        self.status_argv = tuple(status_argv) if status_argv is not None else None
        self.timeout_s = timeout_s
        self.retriable = retriable
        self._env = dict(env) if env is not None else None
        self._name = name
        self._last_applied: int | None = None

    @property
    def name(self) -> str:
        return self._name

    def current_workers(self) -> int:
        if self.status_argv is not None:
            workers = _last_int(self._run(self.status_argv, None))
            if workers is None:
                raise ExecutorError(
                    f"status command {list(self.status_argv)!r} printed no worker count",
                    retriable=False,
                )
            return workers
        if self._last_applied is not None:
            return self._last_applied
        raise ExecutorError(
            f"{self._name} has no status command and has applied nothing yet", retriable=False
        )

    def scale_to(self, target_workers: int, command: cp.ScaleCommand) -> int:
        for label, value in (("job", command.job), ("command_id", command.command_id)):
            if value.startswith("-") or any(ch in value for ch in "\x00\r\n"):
                raise ExecutorError(
                    f"refusing to pass {label} {value!r} to a command (option-like or control "
                    "characters)",
                    retriable=False,
                )
        fields = {
            "target": str(target_workers),
            "job": command.job,
            "command_id": command.command_id,
        }
        argv = [arg.format_map(fields) for arg in self.argv]
        payload = command_payload(command)
        payload["target_workers"] = target_workers
        stdout = self._run(argv, json.dumps(payload).encode("utf-8"))
        workers = _last_int(stdout)
        self._last_applied = target_workers if workers is None else workers
        return self._last_applied

    def _run(self, argv: Sequence[str], stdin: bytes | None) -> str:
        try:
            done = subprocess.run(  # noqa: S603 - argv is the operator's template, no shell
                list(argv),
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=self.timeout_s,
                env={**os.environ, **self._env} if self._env is not None else None,
                check=False,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ExecutorError(f"cannot run {list(argv)!r}: {exc}", retriable=False) from exc
        except subprocess.TimeoutExpired as exc:
            raise ExecutorError(
                f"{list(argv)!r} did not finish within {self.timeout_s:g} s"
            ) from exc
        except OSError as exc:
            raise ExecutorError(f"cannot run {list(argv)!r}: {exc}") from exc
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip()[-500:]
            raise ExecutorError(
                f"{list(argv)!r} exited with code {done.returncode}"
                + (f": {tail}" if tail else ""),
                retriable=self.retriable,
            )
        return done.stdout.decode("utf-8", "replace")


def _without_url(exc: BaseException) -> str:
    """An error's text with any URL in it redacted (urllib puts the URL in some)."""
    return re.sub(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+", lambda m: redact_url(m[0]), str(exc))


def _check_template(arg: str) -> None:
    """Allow only ``{target}``, ``{job}``, ``{command_id}`` (``{{``/``}}`` for braces)."""
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as exc:
        raise ConfigError(f"bad placeholder syntax in {arg!r}: {exc}") from exc
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in _PLACEHOLDERS or spec or conversion:
            raise ConfigError(
                f"unknown placeholder {{{field}}} in {arg!r}; use {{target}}, {{job}} or "
                "{command_id} (write {{ and }} for literal braces)"
            )


def _last_int(stdout: str) -> int | None:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    match = _INT_LINE.match(lines[-1])
    return int(match.group(1)) if match else None
