"""docker/k8s: every manifest is a valid object for the `kubernetes` client's models (no
field the model does not know: a typo is caught), and the pieces fit together: RBAC
limited to the scale subresource of the workers' Deployment, the KEDA scaler behind
client certificates, a ScaledObject that names the planner's job and the scaler's
Service, container arguments the streamtrain CLI accepts. No cluster is involved."""

import json
from pathlib import Path

import click
import pytest
import yaml
from kubernetes.client import ApiClient

from streamtrain.cli import main

K8S = Path(__file__).resolve().parents[2] / "docker" / "k8s"
MODELS = {
    "Namespace": "V1Namespace",
    "ConfigMap": "V1ConfigMap",
    "Deployment": "V1Deployment",
    "Service": "V1Service",
    "ServiceAccount": "V1ServiceAccount",
    "Role": "V1Role",
    "RoleBinding": "V1RoleBinding",
}
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}


def _docs():
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


DOCS = list(_docs())


def _by(kind, name=None):
    found = [d for _, d in DOCS if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert found, f"no {kind} {name or ''}"
    return found


class _Response:
    def __init__(self, doc):
        self.data = json.dumps(doc)


def _lost_fields(original, back, path=""):
    """Paths in ``original`` that did not survive the model (unknown or mistyped)."""
    if isinstance(original, dict):
        if not isinstance(back, dict):
            return [path or "/"]
        lost = []
        for key, value in original.items():
            if key not in back:
                lost.append(f"{path}/{key}")
            else:
                lost += _lost_fields(value, back[key], f"{path}/{key}")
        return lost
    if isinstance(original, list):
        if not isinstance(back, list) or len(back) != len(original):
            return [path]
        return [
            p
            for i, (a, b) in enumerate(zip(original, back, strict=True))
            for p in _lost_fields(a, b, f"{path}/{i}")
        ]
    return [] if original == back or str(original) == str(back) else [path]


def _round_trip(doc):
    api = ApiClient()
    model = api.deserialize(_Response(doc), MODELS[doc["kind"]])
    return api.sanitize_for_serialization(model)


def test_there_are_manifests_for_every_part():
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in DOCS}
    for part in (
        "streamtrain-control",
        "streamtrain-workers",
        "streamtrain-executor",
        "streamtrain-keda",
    ):
        assert ("Deployment", part) in kinds, part
    assert ("Role", "streamtrain-executor") in kinds
    assert ("ScaledObject", "streamtrain-workers") in kinds


@pytest.mark.parametrize(
    "source,doc", DOCS, ids=[f"{s}:{d['kind']}/{d['metadata']['name']}" for s, d in DOCS]
)
def test_every_manifest_is_a_valid_kubernetes_object(source, doc):
    if doc["kind"] in KEDA_KINDS:
        assert doc["apiVersion"] == "keda.sh/v1alpha1"
        return
    assert doc["kind"] in MODELS, f"{source}: unexpected kind {doc['kind']}"
    lost = _lost_fields(doc, _round_trip(doc))
    assert not lost, f"{source}: fields the {MODELS[doc['kind']]} model does not know: {lost}"
    if doc["kind"] != "Namespace":
        assert doc["metadata"]["namespace"] == "streamtrain"


def test_a_misspelt_field_is_caught():
    (deployment,) = _by("Deployment", "streamtrain-workers")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["replica"] = broken["spec"].pop("replicas")
    assert _lost_fields(broken, _round_trip(broken)) == ["/spec/replica"]


def test_selectors_and_service_ports_match_the_pods():
    for deployment in _by("Deployment"):
        selector = deployment["spec"]["selector"]["matchLabels"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), deployment["metadata"]["name"]
    for service in _by("Service"):
        (deployment,) = [
            d
            for d in _by("Deployment")
            if service["spec"]["selector"].items()
            <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        ports = {
            p["name"]
            for c in deployment["spec"]["template"]["spec"]["containers"]
            for p in c["ports"]
        }
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, (service["metadata"]["name"], port)


def _args(deployment_name):
    (deployment,) = _by("Deployment", deployment_name)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container["args"]


def _parse(args):
    command: click.Command = main
    args = list(args)
    while isinstance(command, click.Group):
        command = command.commands[args.pop(0)]
    return command.make_context(command.name, args).params


@pytest.mark.parametrize(
    "name",
    ["streamtrain-control", "streamtrain-workers", "streamtrain-executor", "streamtrain-keda"],
)
def test_container_arguments_are_ones_the_cli_accepts(name):
    assert _parse(_args(name))


def test_executor_rbac_is_limited_to_the_scale_subresource_of_the_workers():
    (role,) = _by("Role", "streamtrain-executor")
    (rule,) = role["rules"]
    assert rule["apiGroups"] == ["apps"]
    assert rule["resources"] == ["deployments/scale"]
    assert rule["resourceNames"] == ["streamtrain-workers"]
    assert set(rule["verbs"]) <= {"get", "patch", "update"}
    (binding,) = _by("RoleBinding", "streamtrain-executor")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "streamtrain-executor",
    }
    (subject,) = binding["subjects"]
    assert (subject["kind"], subject["name"]) == ("ServiceAccount", "streamtrain-executor")
    (executor,) = _by("Deployment", "streamtrain-executor")
    assert executor["spec"]["template"]["spec"]["serviceAccountName"] == "streamtrain-executor"
    params = _parse(_args("streamtrain-executor"))
    assert (params["executor"], params["k8s_kind"], params["k8s_name"]) == (
        "kubernetes",
        "Deployment",
        "streamtrain-workers",
    )
    assert params["job"] == _parse(_args("streamtrain-control"))["plan_job"]


def test_the_keda_scaler_listens_beyond_loopback_only_with_client_certificates():
    params = _parse(_args("streamtrain-keda"))
    assert params["host"] == "0.0.0.0"  # noqa: S104 - what the check is about
    (deployment,) = _by("Deployment", "streamtrain-keda")
    mounts = deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    mounted = {m["mountPath"] for m in mounts}
    for flag in ("tls_cert", "tls_key", "tls_client_ca"):
        assert params[flag] is not None and str(Path(params[flag]).parent) in mounted, flag


def test_the_scaled_object_points_keda_at_the_scaler_for_the_planners_job():
    (scaled,) = _by("ScaledObject", "streamtrain-workers")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == "streamtrain-workers"
    assert spec["scaleTargetRef"]["kind"] == "Deployment"
    control = _parse(_args("streamtrain-control"))
    assert spec["maxReplicaCount"] == control["max_workers"]
    (trigger,) = spec["triggers"]
    assert trigger["type"] in {"external", "external-push"}
    assert trigger.get("metricType", "AverageValue") == "AverageValue"  # target 1 per replica
    assert trigger["metadata"]["job"] == control["plan_job"]
    host, port = trigger["metadata"]["scalerAddress"].rsplit(":", 1)
    (service,) = _by("Service", "streamtrain-keda")
    assert host == f"streamtrain-keda.{service['metadata']['namespace']}.svc.cluster.local"
    grpc_port = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert int(port) == grpc_port["port"] == _parse(_args("streamtrain-keda"))["port"]
    (auth,) = _by("TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert {p["parameter"] for p in auth["spec"]["secretTargetRef"]} == {
        "caCert",
        "tlsClientCert",
        "tlsClientKey",
    }
