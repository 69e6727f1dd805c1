"""The Kubernetes executor: sets ``replicas`` through a workload's scale subresource.

Owned here: :class:`KubernetesExecutor` reads and patches
``/apis/apps/v1/namespaces/{namespace}/{deployments|statefulsets}/{name}/scale`` with the
official ``kubernetes`` client, and translates its failures into
:class:`~streamtrain.errors.ExecutorError`:

* 400, 401, 403, 404, 422 and other 4xx: not retriable (wrong name, namespace, RBAC or
  credentials; retrying cannot help), the message names kind, namespace and name;
* 408, 409, 429, 5xx, timeouts and connection errors: retriable.

The body is ``{"spec": {"replicas": n}}``; the client sends it as
``application/strategic-merge-patch+json``, which the scale subresource accepts.
Patching to N twice is harmless, so a retry after a lost answer is safe.

``current_workers`` is the scale's ``spec.replicas`` (the count Kubernetes converges
on, the one this executor sets); :meth:`KubernetesExecutor.observed_workers` is
``status.replicas`` (pods that exist now). The API server omits ``replicas: 0`` from
``spec``, read here as 0.

``kubernetes`` is the optional extra ``k8s``: it is imported when first needed, and a
missing install raises :class:`~streamtrain.errors.ConfigError` with the pip hint.
"""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Final, Literal

from streamtrain.errors import ConfigError, ExecutorError
from streamtrain.proto import control_plane_pb2 as cp

__all__ = ["KubernetesExecutor", "WorkloadKind"]

log = logging.getLogger(__name__)

WorkloadKind = Literal["Deployment", "StatefulSet"]

_INSTALL_HINT: Final = "pip install 'streamtrain[k8s]'"
_RETRIABLE_STATUSES: Final = frozenset({408, 409, 429})
_SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _import_kubernetes() -> ModuleType:
    try:
        return importlib.import_module("kubernetes")
    except ImportError as exc:
        raise ConfigError(
            f"the Kubernetes executor needs the kubernetes client: {_INSTALL_HINT}"
        ) from exc


def _bearer_token_compat(configuration: Any) -> None:
    """Make the loaded token reach the request headers on every client release.

    The config loaders (kubeconfig, service account) put the token in
    ``api_key["authorization"]`` and refresh it there through ``refresh_api_key_hook``;
    kubernetes 36's ``Configuration.auth_settings`` reads only ``api_key["BearerToken"]``,
    so without this the requests go out with no ``Authorization`` header at all (35 and
    earlier read either key). Mirror the token into ``BearerToken``, also after every
    refresh, whenever the client would otherwise send none.
    """
    api_key = configuration.api_key
    if "authorization" not in api_key or "BearerToken" in api_key:
        return
    if configuration.auth_settings():
        return  # this release reads "authorization" itself
    inner = configuration.refresh_api_key_hook

    def refresh(conf: Any) -> None:
        if inner is not None:
            inner(conf)
        if "authorization" in conf.api_key:
            conf.api_key["BearerToken"] = conf.api_key["authorization"]

    api_key["BearerToken"] = api_key["authorization"]
    configuration.refresh_api_key_hook = refresh


class KubernetesExecutor:
    """Scales a Deployment or StatefulSet (see the module docstring).

    ``api_client`` is a ``kubernetes.client.ApiClient``; without one, a client with the
    library's default configuration is made on first use (no I/O in ``__init__``). Use
    :meth:`from_environment` to configure it from a kubeconfig or the pod's service
    account.
    """

    def __init__(
        self,
        kind: WorkloadKind,
        name: str,
        namespace: str = "default",
        api_client: Any | None = None,
        *,
        request_timeout_s: float = 10.0,
    ) -> None:
        if kind not in ("Deployment", "StatefulSet"):
            raise ConfigError(f"kind must be 'Deployment' or 'StatefulSet', got {kind!r}")
        for label, value in (("name", name), ("namespace", namespace)):
            if not value or "/" in value:
                raise ConfigError(f"the workload {label} must be a non-empty name, got {value!r}")
        if request_timeout_s <= 0:
            raise ConfigError(f"request_timeout_s must be positive, got {request_timeout_s}")
        self.kind: WorkloadKind = kind
        self.workload = name
        self.namespace = namespace
        self.request_timeout_s = request_timeout_s
        self._api_client = api_client
        self._owns_client = api_client is None
        self._apps: Any | None = None

    @property
    def name(self) -> str:
        return f"kubernetes:{self.kind}/{self.namespace}/{self.workload}"

    @classmethod
    def from_environment(
        cls,
        kind: WorkloadKind,
        name: str,
        namespace: str | None = None,
        *,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        in_cluster: bool | None = None,
        request_timeout_s: float = 10.0,
    ) -> KubernetesExecutor:
        """Configure from the pod's service account or from a kubeconfig file.

        ``in_cluster=None`` picks the service account when the service-account namespace
        file exists (as in every pod), else the kubeconfig (``kubeconfig`` or the
        client's default, ``~/.kube/config``). Without ``namespace``, the pod's namespace
        or the kubeconfig context's is used, else ``"default"``.
        """
        k8s = _import_kubernetes()
        if in_cluster is None:
            in_cluster = kubeconfig is None and _SERVICE_ACCOUNT_NAMESPACE.is_file()
        configuration = k8s.client.Configuration()
        try:
            if in_cluster:
                k8s.config.load_incluster_config(client_configuration=configuration)
                if namespace is None:
                    namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
            else:
                config_file = str(kubeconfig) if kubeconfig is not None else None
                k8s.config.load_kube_config(
                    config_file=config_file,
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
                if namespace is None:
                    namespace = _context_namespace(k8s, config_file, context)
            _bearer_token_compat(configuration)
        except (k8s.config.ConfigException, OSError) as exc:
            where = "the pod's service account" if in_cluster else "the kubeconfig"
            raise ConfigError(
                f"cannot load the Kubernetes configuration from {where}: {exc}"
            ) from exc
        return cls(
            kind,
            name,
            namespace or "default",
            k8s.client.ApiClient(configuration),
            request_timeout_s=request_timeout_s,
        )

    # -- the Executor protocol ---------------------------------------------------------

    def current_workers(self) -> int:
        """``spec.replicas`` of the scale subresource."""
        scale = self._request("read")
        return _replicas(scale.spec)

    def observed_workers(self) -> int:
        """``status.replicas`` of the scale subresource: the pods that exist now."""
        scale = self._request("read")
        return _replicas(scale.status)

    def scale_to(self, target_workers: int, command: cp.ScaleCommand | None = None) -> int:
        """Patch ``spec.replicas`` to ``target_workers``; returns the replicas accepted."""
        if target_workers < 0:
            raise ExecutorError(f"cannot scale to {target_workers} replicas", retriable=False)
        body = {"spec": {"replicas": target_workers}}
        scale = self._request("patch", body)
        workers = _replicas(scale.spec)
        log.info(
            "patched %s %s/%s to %d replicas%s",
            self.kind,
            self.namespace,
            self.workload,
            workers,
            f" (command {command.command_id})" if command is not None else "",
        )
        return workers

    # -- plumbing ----------------------------------------------------------------------

    def _request(self, verb: Literal["read", "patch"], *body: dict[str, Any]) -> Any:
        """One call to the scale subresource; failures become :class:`ExecutorError`."""
        k8s = _import_kubernetes()
        import urllib3  # a dependency of kubernetes, so present when it is

        resource = "deployment" if self.kind == "Deployment" else "stateful_set"
        method = getattr(self._apps_api(k8s), f"{verb}_namespaced_{resource}_scale")
        what = f"{verb} the scale of {self.kind} {self.namespace}/{self.workload}"
        try:
            return method(
                self.workload, self.namespace, *body, _request_timeout=self.request_timeout_s
            )
        except k8s.client.exceptions.ApiException as exc:
            raise self._api_error(what, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ExecutorError(f"cannot {what}: the API server did not answer: {exc}") from exc

    def _api_error(self, what: str, exc: Any) -> ExecutorError:
        status = getattr(exc, "status", None) or 0
        reason = getattr(exc, "reason", None) or "unknown"
        detail = _status_message(getattr(exc, "body", None))
        retriable = status == 0 or status in _RETRIABLE_STATUSES or status >= 500
        hint = ""
        if status == 404:
            hint = " (check the kind, namespace and name)"
        elif status in (401, 403):
            hint = " (check the credentials and RBAC: get and patch on the scale subresource)"
        message = f"cannot {what}: HTTP {status} {reason}{hint}"
        if detail:
            message += f": {detail}"
        return ExecutorError(message, retriable=retriable)

    def _apps_api(self, k8s: ModuleType) -> Any:
        if self._apps is None:
            if self._api_client is None:
                self._api_client = k8s.client.ApiClient()
            self._apps = k8s.client.AppsV1Api(self._api_client)
        return self._apps

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the API client if this executor made it."""
        if self._owns_client and self._api_client is not None:
            self._api_client.close()
            self._api_client = None
            self._apps = None

    def __enter__(self) -> KubernetesExecutor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _replicas(part: Any) -> int:
    replicas = getattr(part, "replicas", None) if part is not None else None
    return int(replicas) if replicas is not None else 0


def _status_message(body: Any) -> str:
    """The ``message`` of a Kubernetes ``Status`` body, else the body's start."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        status = json.loads(text)
    except ValueError:
        return text[:200]
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return str(status["message"])
    return text[:200]


def _context_namespace(k8s: ModuleType, config_file: str | None, context: str | None) -> str | None:
    contexts, active = k8s.config.list_kube_config_contexts(config_file=config_file)
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), None)
    if not isinstance(chosen, dict):
        return None
    namespace = chosen.get("context", {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else None
