"""Checks the Helm chart in helm/toolgate offline, with Helm's own engine.

For the default values, every file in examples/ and variants: runs Helm's lint,
renders the chart (helm-python-sdk: Helm v4's Go SDK through a C ABI, no helm binary,
no cluster), validates every rendered manifest against the Kubernetes API schemas in
strict mode (kubernetes-validate, unknown fields rejected; custom resources against
their CRD's shape) and asserts the properties the chart promises: the restricted
security context, the probes, the config checksum, the PDB/HPA rules, the preStop
drain, data_dir on a claim exactly when the state stays in one pod, a Redis only when
asked for, NetworkPolicy ports and peers, alerts that name only metrics and labels the
gateway exports (--metrics: a /metrics body of a running gateway), and pods rolled by
the Secrets they read (rendered as `helm upgrade` would, against a stand-in API server
answering `lookup`).
Values files are checked against values.schema.json, and typos must be rejected —
in `config` too, whose schema is the gateway's own (tests/tests/helm_chart.rs keeps
it equal to `toolgate config-schema`).

Prints one line per check; the last line is a JSON summary. Exits non-zero (with the
reason) on the first failed check.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate import utils as kv_utils

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "toolgate"
RELEASE, NAMESPACE = "toolgate", "tools"
FULLNAME = "toolgate"  # the release name holds the chart name
# The chart's kubeVersion floor, and the newest API the validator bundles.
K8S_VERSIONS = ["1.30.0", kv_utils.latest_version()]
RUNTIME_USER = 65532

summary: dict = {"cases": [], "manifests_validated": 0, "crd_shape_checked": [], "rejected": []}
# The gateway's metric families (name -> {"samples": [...], "labels": [...]}), from
# the exposition file given with --metrics.
EXPORTED: dict = {}


def log(message: str) -> None:
    print(message, flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


# --- rendering ----------------------------------------------------------------------


def render(chart: helm.Chart, values: dict | None) -> dict[str, str]:
    return chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


def manifests(rendered: dict[str, str]) -> list[dict]:
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc["__template"] = path
                docs.append(doc)
    return docs


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str) -> dict:
    found = by_kind(docs, kind)
    check(len(found) == 1, f"expected exactly one {kind}, got {len(found)}")
    return found[0]


def named(docs: list[dict], kind: str, name: str) -> dict:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    check(len(found) == 1, f"expected one {kind} named {name}, got {len(found)}")
    return found[0]


def gateway(docs: list[dict]) -> dict:
    """The gateway's Deployment (the in-chart Redis has one too)."""
    return named(docs, "Deployment", FULLNAME)


def selects(selector: dict, labels: dict) -> bool:
    return selector.items() <= labels.items()


def pod_labels(deployment: dict) -> dict:
    return deployment["spec"]["template"]["metadata"]["labels"]


def state_backend(merged: dict) -> str:
    """Where the values put the gateway's state: the in-chart Redis counts as Redis."""
    if merged["redis"]["enabled"]:
        return "redis"
    return ((merged.get("config") or {}).get("state") or {}).get("backend", "memory")


def referenced_secrets(merged: dict) -> list[str]:
    """The Secrets the values make the pods read that the chart does not create."""
    names = [merged["secrets"]["existingSecret"]]
    names += [(e.get("secretRef") or {}).get("name") for e in merged["extraEnvFrom"]]
    names += [((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") for e in merged["extraEnv"]]
    for volume in merged["extraVolumes"]:
        names.append((volume.get("secret") or {}).get("secretName"))
        names += [(s.get("secret") or {}).get("name") for s in (volume.get("projected") or {}).get("sources", [])]
    return sorted({n for n in names if n})


def container_port(deployment: dict, port) -> int:
    """A port of the gateway's container by name or number, as a NetworkPolicy or a
    Service's targetPort resolves it."""
    ports = container(deployment)["ports"]
    for p in ports:
        if port in (p["name"], p["containerPort"]):
            return p["containerPort"]
    raise AssertionError(f"port {port!r} is not one of the container's: {ports}")


# --- Kubernetes API validation ------------------------------------------------------

# Custom resources are not in the Kubernetes API schemas: each is checked against the
# shape of the fields the chart sets (from the prometheus-operator CRD).
DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
SERVICE_MONITOR_SHAPE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": LABELS},
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": LABELS},
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                        },
                    },
                },
            },
        },
    },
}
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
PROMETHEUS_RULE_SHAPE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": SERVICE_MONITOR_SHAPE["properties"]["metadata"],
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": DURATION},
                            "rules": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "required": ["alert", "expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                                        "expr": {"type": "string", "minLength": 1},
                                        "for": {"type": "string", "pattern": DURATION},
                                        "labels": STRINGS,
                                        "annotations": STRINGS,
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
CRD_SHAPES = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR_SHAPE,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE_SHAPE,
}


def validate_manifest(doc: dict, case: str) -> None:
    body = {k: v for k, v in doc.items() if k != "__template"}
    name = f"{body['kind']}/{body['metadata']['name']}"
    shape = CRD_SHAPES.get((body["apiVersion"], body["kind"]))
    if shape is not None:
        errors = sorted(jsonschema.Draft7Validator(shape).iter_errors(body), key=str)
        check(not errors, f"{case}: {name} does not have the expected shape: {[e.message for e in errors]}")
        log(f"  {name}: custom resource, not in the Kubernetes API schemas; checked against the CRD's shape")
        summary["crd_shape_checked"].append(f"{case}: {name}")
        return
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(body, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            raise AssertionError(
                f"{case}: {name} is not valid Kubernetes {version} (strict): {path}: {e.message}"
            ) from None
        except kv_utils.SchemaNotFoundError as e:
            raise AssertionError(f"{case}: {name}: {e.message}") from None
        summary["manifests_validated"] += 1
    log(f"  {name}: valid (strict) for Kubernetes {', '.join(K8S_VERSIONS)}")


# --- the chart's promises ----------------------------------------------------------


def container(deployment: dict) -> dict:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    check(len(containers) == 1, f"one container expected, got {len(containers)}")
    return containers[0]


def check_deployment(docs: list[dict], rendered: dict[str, str], values: dict, case: str) -> None:
    deployment = gateway(docs)
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment)

    psc = pod["securityContext"]
    check(psc.get("runAsNonRoot") is True, f"{case}: pod runAsNonRoot: {psc}")
    check(psc.get("runAsUser") == RUNTIME_USER, f"{case}: pod runAsUser: {psc}")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{case}: pod seccompProfile: {psc}")
    sc = c["securityContext"]
    check(sc.get("runAsNonRoot") is True, f"{case}: container runAsNonRoot: {sc}")
    check(sc.get("runAsUser") == RUNTIME_USER, f"{case}: container runAsUser: {sc}")
    check(sc.get("readOnlyRootFilesystem") is True, f"{case}: readOnlyRootFilesystem: {sc}")
    check(sc.get("allowPrivilegeEscalation") is False, f"{case}: allowPrivilegeEscalation: {sc}")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{case}: capabilities.drop: {sc}")
    check(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{case}: container seccompProfile: {sc}")

    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check("http" in ports, f"{case}: no port named http: {c['ports']}")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", f"{case}: liveness: {c['livenessProbe']}")
    check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{case}: readiness: {c['readinessProbe']}")
    check(c["startupProbe"]["httpGet"]["path"] == "/healthz", f"{case}: startup: {c['startupProbe']}")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        check(c[probe]["httpGet"]["port"] in ("http", ports["http"]), f"{case}: {probe} port")

    args = c["args"]
    check(args[:3] == ["serve", "--config", "/etc/toolgate/config.yaml"], f"{case}: args {args}")
    check(
        "--listen" in args and args[args.index("--listen") + 1] == f"0.0.0.0:{ports['http']}",
        f"{case}: the gateway must listen on 0.0.0.0:<containerPort>: {args}",
    )

    sleep = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    grace = pod["terminationGracePeriodSeconds"]
    check(sleep > 0, f"{case}: preStop sleep {sleep}")
    check(grace > sleep, f"{case}: terminationGracePeriodSeconds {grace} <= preStop sleep {sleep}")

    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    check("/tmp" in mounts, f"{case}: nothing mounted at /tmp: {list(mounts)}")
    check("emptyDir" in volumes[mounts["/tmp"]["name"]], f"{case}: /tmp is not an emptyDir")
    config_mount = mounts.get("/etc/toolgate")
    check(config_mount is not None and config_mount.get("readOnly") is True, f"{case}: config mount {config_mount}")
    configmap = one(docs, "ConfigMap")
    check(
        volumes[config_mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"],
        f"{case}: the config volume is not the chart's ConfigMap",
    )
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    data_dir = config["data_dir"]
    check(data_dir in mounts, f"{case}: data_dir {data_dir} is not mounted (read-only root): {list(mounts)}")
    check_persistence(docs, deployment, volumes[mounts[data_dir]["name"]], values, case)

    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    expected = hashlib.sha256(rendered[f"{CHART.name}/templates/configmap.yaml"].encode()).hexdigest()
    check(
        annotations.get("checksum/config") == expected,
        f"{case}: checksum/config {annotations.get('checksum/config')} is not the sha256 of the ConfigMap ({expected})",
    )

    spread = pod.get("topologySpreadConstraints") or []
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    if not values.get("topologySpreadConstraints"):
        check(len(spread) == 1, f"{case}: default topology spread missing: {spread}")
        s = spread[0]
        check(s["topologyKey"] == "kubernetes.io/hostname", f"{case}: spread key {s}")
        check(s["whenUnsatisfiable"] == "ScheduleAnyway", f"{case}: spread mode {s}")
        selector = s["labelSelector"]["matchLabels"]
        check(selector.items() <= pod_labels.items(), f"{case}: spread selector {selector} misses the pods")
    check(
        deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items(),
        f"{case}: the Deployment's selector does not match its pods",
    )

    # Secret-held variables reach the container.
    # The chart's own Secret reference comes first, then extraEnvFrom's.
    env_from = c.get("envFrom", [])
    check(env_from[len(env_from) - len(values["extraEnvFrom"]):] == values["extraEnvFrom"], f"{case}: extraEnvFrom {env_from}")
    secret_ref = [e["secretRef"]["name"] for e in env_from[: len(env_from) - len(values["extraEnvFrom"])]]
    existing = values.get("secrets", {}).get("existingSecret")
    made = by_kind(docs, "Secret")
    if existing:
        check(secret_ref == [existing], f"{case}: envFrom {secret_ref}, want the existing Secret {existing}")
        check(not made, f"{case}: a Secret was created although existingSecret is set")
    elif values.get("secrets", {}).get("env"):
        check(len(made) == 1, f"{case}: the chart did not create the Secret")
        check(secret_ref == [made[0]["metadata"]["name"]], f"{case}: envFrom {secret_ref}")
        check(set(made[0]["stringData"]) == set(values["secrets"]["env"]), f"{case}: Secret keys")
        check("checksum/secret" in annotations, f"{case}: no checksum/secret annotation")
    else:
        check(not secret_ref and not made, f"{case}: a Secret without secrets.env/existingSecret")

    # The Service reaches the pods on the named port.
    service = named(docs, "Service", FULLNAME)
    check(service["spec"]["selector"].items() <= pod_labels.items(), f"{case}: the Service misses the pods")
    check(service["spec"]["ports"][0]["targetPort"] == "http", f"{case}: Service targetPort")
    check(pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"], f"{case}: ServiceAccount")


def check_persistence(docs: list[dict], deployment: dict, data_volume: dict, merged: dict, case: str) -> None:
    """data_dir on a claim exactly when the state stays in the pod, one pod at a time."""
    persistence = merged["persistence"]
    claims = by_kind(docs, "PersistentVolumeClaim")
    strategy = deployment["spec"]["strategy"]["type"]
    if not persistence["enabled"] or state_backend(merged) == "redis":
        check("emptyDir" in data_volume, f"{case}: data_dir is not an emptyDir: {data_volume}")
        check(not claims, f"{case}: a claim is rendered though data_dir keeps nothing: {claims}")
        check(strategy == "RollingUpdate", f"{case}: strategy {strategy} without a volume")
        return
    claim = (data_volume.get("persistentVolumeClaim") or {}).get("claimName")
    check(claim, f"{case}: data_dir is not on a PersistentVolumeClaim: {data_volume}")
    check(not merged["autoscaling"]["enabled"] and merged["replicaCount"] == 1, f"{case}: a claim for several pods")
    check(strategy == "Recreate", f"{case}: strategy {strategy}: a second pod would wait on the volume")
    psc = deployment["spec"]["template"]["spec"]["securityContext"]
    check(psc.get("fsGroup") == psc.get("runAsGroup"), f"{case}: the volume is not writable by the runtime group: {psc}")
    if persistence["existingClaim"]:
        check(claim == persistence["existingClaim"], f"{case}: claim {claim} is not the existing one")
        check(not claims, f"{case}: a claim is rendered beside the existing one")
        return
    check(len(claims) == 1 and claims[0]["metadata"]["name"] == claim, f"{case}: the mounted claim {claim} is not rendered")
    spec = claims[0]["spec"]
    check(spec["accessModes"] == persistence["accessModes"], f"{case}: accessModes {spec['accessModes']}")
    check(spec["resources"]["requests"]["storage"] == persistence["size"], f"{case}: size {spec['resources']}")
    wanted_class = {"": None, "-": ""}.get(persistence["storageClass"], persistence["storageClass"])
    check(spec.get("storageClassName") == wanted_class, f"{case}: storageClassName {spec.get('storageClassName')!r}")


def check_scaling(docs: list[dict], merged: dict, case: str) -> None:
    deployment = gateway(docs)
    hpa_on = merged["autoscaling"]["enabled"]
    multi = hpa_on or merged["replicaCount"] > 1
    pdbs = by_kind(docs, "PodDisruptionBudget")
    check(len(pdbs) == (1 if multi else 0), f"{case}: {len(pdbs)} PDBs with replicas>1 or HPA = {multi}")
    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    check(len(hpas) == (1 if hpa_on else 0), f"{case}: {len(hpas)} HPAs with autoscaling.enabled = {hpa_on}")
    if hpa_on:
        hpa = hpas[0]
        check(hpa["apiVersion"] == "autoscaling/v2", f"{case}: HPA apiVersion {hpa['apiVersion']}")
        target = hpa["spec"]["scaleTargetRef"]
        check(
            target["kind"] == "Deployment" and target["name"] == deployment["metadata"]["name"],
            f"{case}: HPA target {target}",
        )
        check("replicas" not in deployment["spec"], f"{case}: the Deployment fixes replicas under an HPA")
    else:
        check(deployment["spec"]["replicas"] == merged["replicaCount"], f"{case}: replicas")
    if pdbs:
        selector = pdbs[0]["spec"]["selector"]["matchLabels"]
        check(selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items(), f"{case}: PDB selector")
    if multi:
        config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
        state = config.get("state", {})
        check(state.get("backend") == "redis" and state.get("url"), f"{case}: several pods without Redis: {state}")


def check_ingress_and_monitoring(docs: list[dict], merged: dict, case: str) -> None:
    service = named(docs, "Service", FULLNAME)
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    hosts = config.get("allowed_hosts", [])
    for name in (FULLNAME, f"{FULLNAME}.{NAMESPACE}.svc.cluster.local"):
        check(name in hosts, f"{case}: {name} not in allowed_hosts {hosts}")
    ingresses = by_kind(docs, "Ingress")
    check(len(ingresses) == (1 if merged["ingress"]["enabled"] else 0), f"{case}: Ingress count")
    for ingress in ingresses:
        check(ingress["apiVersion"] == "networking.k8s.io/v1", f"{case}: Ingress apiVersion")
        for rule in ingress["spec"]["rules"]:
            check(rule["host"] in hosts, f"{case}: Ingress host {rule['host']} not in allowed_hosts {hosts}")
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                check(backend["name"] == service["metadata"]["name"], f"{case}: Ingress backend {backend}")
                check(backend["port"] == {"name": "http"}, f"{case}: Ingress backend port {backend}")
    monitors = by_kind(docs, "ServiceMonitor")
    check(len(monitors) == (1 if merged["serviceMonitor"]["enabled"] else 0), f"{case}: ServiceMonitor count")
    for monitor in monitors:
        endpoint = monitor["spec"]["endpoints"][0]
        check(endpoint["port"] == "metrics" and endpoint["path"] == "/metrics", f"{case}: scrape {endpoint}")
        # Scraped on the gateway's own metrics listener: named on the Service and the
        # pod, and set in the config (the main port keeps /metrics behind credentials).
        port = merged["serviceMonitor"]["port"]
        service_ports = {p["name"]: p for p in service["spec"]["ports"]}
        check("metrics" in service_ports, f"{case}: the Service has no metrics port")
        container = gateway(docs)["spec"]["template"]["spec"]["containers"][0]
        check(
            {"name": "metrics", "containerPort": port, "protocol": "TCP"} in container["ports"],
            f"{case}: the pod has no metrics port {port}: {container['ports']}",
        )
        config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
        listen = (config.get("metrics") or {}).get("listen")
        check(listen == f"0.0.0.0:{port}", f"{case}: metrics.listen is {listen!r}")
        selector = monitor["spec"]["selector"]["matchLabels"]
        check(selector.items() <= service["metadata"]["labels"].items(), f"{case}: ServiceMonitor misses the Service")


def check_redis(chart: helm.Chart, docs: list[dict], merged: dict, case: str) -> None:
    """No subchart; a Redis only with redis.enabled: one pod, nothing saved, restricted,
    and the gateway pointed at its Service."""
    check(not chart.dependencies, f"{case}: subcharts bundled: {chart.dependencies}")
    check(not chart.metadata.get("dependencies"), f"{case}: Chart.yaml declares dependencies")
    check(not (CHART / "charts").exists(), f"{case}: helm/toolgate/charts exists")
    kinds = {d["kind"] for d in docs}
    check(not kinds & {"StatefulSet", "DaemonSet"}, f"{case}: unexpected workloads {kinds}")
    gw = gateway(docs)
    others = [d for d in by_kind(docs, "Deployment") if d is not gw]
    env = {e["name"]: e.get("value") for e in container(gw).get("env", [])}
    if not merged["redis"]["enabled"]:
        check(not others, f"{case}: more workloads than the gateway: {[d['metadata']['name'] for d in others]}")
        check("REDIS_URL" not in env, f"{case}: REDIS_URL set without the in-chart Redis")
        return
    check(len(others) == 1, f"{case}: one Redis Deployment expected, got {len(others)}")
    redis = others[0]
    spec = redis["spec"]
    check(spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate", f"{case}: Redis replicas/strategy {spec}")
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    image = merged["redis"]["image"]
    check(c["image"] == f"{image['repository']}:{image['tag']}", f"{case}: Redis image {c['image']}")
    args = c["command"] + c["args"]
    options = dict(zip(args, args[1:]))
    check(options.get("--save") == "" and options.get("--appendonly") == "no", f"{case}: Redis saves: {args}")
    check(all("emptyDir" in v for v in pod.get("volumes", [])), f"{case}: Redis has persistent volumes: {pod.get('volumes')}")
    sc = c["securityContext"]
    check(sc.get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True, f"{case}: Redis security {sc}")
    check(sc.get("allowPrivilegeEscalation") is False and sc.get("capabilities", {}).get("drop") == ["ALL"], f"{case}: Redis security {sc}")
    # Neither workload's selector picks the other's pods (Services, PDB, spread).
    check(not selects(gw["spec"]["selector"]["matchLabels"], pod_labels(redis)), f"{case}: the gateway selects Redis pods")
    check(not selects(spec["selector"]["matchLabels"], pod_labels(gw)), f"{case}: Redis selects gateway pods")
    # REDIS_URL names the Redis Service, whose port reaches the Redis container.
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    check(config["state"]["url"] == "${REDIS_URL}", f"{case}: state.url {config['state']}")
    url = urlsplit(env.get("REDIS_URL") or "")
    check(url.scheme == "redis" and url.hostname, f"{case}: REDIS_URL {env.get('REDIS_URL')!r}")
    service_name, namespace = url.hostname.split(".")[:2]
    check(namespace == NAMESPACE, f"{case}: REDIS_URL in namespace {namespace}")
    service = named(docs, "Service", service_name)
    check(selects(service["spec"]["selector"], pod_labels(redis)), f"{case}: the Redis Service misses its pod")
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == url.port]
    target = port["targetPort"]
    check(any(target in (p["name"], p["containerPort"]) for p in c["ports"]), f"{case}: Redis Service targets {target}")
    for service in by_kind(docs, "Service"):
        check(
            selects(service["spec"]["selector"], pod_labels(gw)) != selects(service["spec"]["selector"], pod_labels(redis)),
            f"{case}: Service {service['metadata']['name']} selects both workloads or none",
        )


def check_network_policy(docs: list[dict], merged: dict, case: str) -> None:
    """Ingress to the gateway's own ports from the configured sources; egress to DNS,
    Redis and the configured upstreams; the in-chart Redis reachable from the gateway only."""
    policies = by_kind(docs, "NetworkPolicy")
    np = merged["networkPolicy"]
    if not np["enabled"]:
        check(not policies, f"{case}: NetworkPolicies without networkPolicy.enabled")
        return
    gw = gateway(docs)
    policy = named(docs, "NetworkPolicy", FULLNAME)
    spec = policy["spec"]
    check(selects(spec["podSelector"]["matchLabels"], pod_labels(gw)), f"{case}: the policy misses the gateway's pods")
    service = named(docs, "Service", FULLNAME)
    served = {p["name"]: container_port(gw, p["targetPort"]) for p in service["spec"]["ports"]}
    rules = {}
    for rule in spec["ingress"]:
        for port in rule["ports"]:
            rules[container_port(gw, port["port"])] = rule
    check(set(rules) == set(served.values()), f"{case}: ingress ports {sorted(rules)} are not the Service's {served}")
    check(rules[served["http"]].get("from", []) == np["ingress"]["from"], f"{case}: ingress sources {rules[served['http']]}")
    if "metrics" in served:
        check(rules[served["metrics"]].get("from", []) == np["ingress"]["metricsFrom"], f"{case}: metrics sources")
    if not np["egress"]["enabled"]:
        check(spec["policyTypes"] == ["Ingress"], f"{case}: egress restricted though disabled: {spec['policyTypes']}")
        return
    check("Egress" in spec["policyTypes"], f"{case}: policyTypes {spec['policyTypes']}")
    egress = spec["egress"]
    dns = [r for r in egress if {(p["port"], p["protocol"]) for p in r["ports"]} == {(53, "UDP"), (53, "TCP")}]
    check(len(dns) == 1 and dns[0].get("to", []) == np["egress"]["dns"]["to"], f"{case}: no DNS rule: {egress}")
    for upstream_rule in np["egress"]["upstreams"]:
        check(upstream_rule in egress, f"{case}: upstream rule {upstream_rule} missing")
    redis_rules = [r for r in egress if r not in dns and r not in np["egress"]["upstreams"]]
    if state_backend(merged) != "redis":
        check(not redis_rules, f"{case}: unexpected egress {redis_rules}")
    elif merged["redis"]["enabled"]:
        redis = next(d for d in by_kind(docs, "Deployment") if d is not gw)
        check(len(redis_rules) == 1, f"{case}: one egress rule for Redis expected: {redis_rules}")
        (rule,) = redis_rules
        # An empty `to` would allow every destination.
        check(rule.get("to") and all(selects(t["podSelector"]["matchLabels"], pod_labels(redis)) for t in rule["to"]), f"{case}: Redis egress {rule}")
        redis_ports = {p["containerPort"] for p in redis["spec"]["template"]["spec"]["containers"][0]["ports"]}
        check({p["port"] for p in rule["ports"]} <= redis_ports, f"{case}: Redis egress ports {rule['ports']}")
        # Redis' own policy: the gateway's pods in, nothing out.
        own = [p for p in policies if p is not policy]
        check(len(own) == 1, f"{case}: no NetworkPolicy for the in-chart Redis")
        own_spec = own[0]["spec"]
        check(selects(own_spec["podSelector"]["matchLabels"], pod_labels(redis)), f"{case}: Redis policy selector")
        check(own_spec["egress"] == [] and "Egress" in own_spec["policyTypes"], f"{case}: Redis may connect out")
        (inbound,) = own_spec["ingress"]
        check(all(selects(f["podSelector"]["matchLabels"], pod_labels(gw)) for f in inbound["from"]), f"{case}: Redis ingress {inbound}")
    else:
        check(len(redis_rules) == 1, f"{case}: one egress rule for Redis expected: {redis_rules}")
        (rule,) = redis_rules
        check(rule.get("to") and rule["to"] == np["egress"]["redis"]["to"], f"{case}: Redis egress {rule}")
        check([p["port"] for p in rule["ports"]] == [np["egress"]["redis"]["port"]], f"{case}: Redis egress ports {rule}")


# Labels Prometheus adds to every scraped series (the ServiceMonitor's target labels).
TARGET_LABELS = {"namespace", "job", "instance", "pod", "service", "container", "endpoint"}


def check_prometheus_rule(docs: list[dict], merged: dict, exported: dict, case: str) -> None:
    """Each enabled alert is there, and its expression names only metrics and labels the
    gateway exports (`exported`: family -> sample names and label names, scraped from
    a running gateway by tests/tests/helm_chart.rs)."""
    rules_values = merged["prometheusRule"]
    found = by_kind(docs, "PrometheusRule")
    if not rules_values["enabled"]:
        check(not found, f"{case}: a PrometheusRule without prometheusRule.enabled")
        return
    check(exported, f"{case}: no metrics exposition given (--metrics)")
    (rule_doc,) = found
    selector = rules_values["seriesSelector"] or f'namespace="{NAMESPACE}", job="{named(docs, "Service", FULLNAME)["metadata"]["name"]}"'
    samples = {sample: family for family, info in exported.items() for sample in info["samples"]}
    alerts = {}
    for group in rule_doc["spec"]["groups"]:
        for rule in group["rules"]:
            alerts[rule["alert"]] = rule
            expr = rule["expr"]
            check(selector in expr, f"{case}: {rule['alert']} does not select this release's series ({selector}): {expr}")
            names = set(re.findall(r"\btoolgate_[a-z0-9_]+", expr))
            check(names, f"{case}: {rule['alert']} uses no toolgate metric: {expr}")
            for name in names:
                check(name in samples, f"{case}: {rule['alert']} uses {name}, which the gateway does not export ({sorted(samples)})")
            family_labels = set().union(*(exported[samples[n]]["labels"] for n in names))
            without_selector = expr.replace(selector, "")
            used = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"", without_selector))
            for clause in re.findall(r"\bby\s*\(([^)]*)\)", expr):
                used |= {label.strip() for label in clause.split(",") if label.strip()}
            unknown = used - family_labels - TARGET_LABELS
            check(not unknown, f"{case}: {rule['alert']} uses labels {unknown} that {sorted(names)} do not have")
            check(re.fullmatch(DURATION, rule["for"]), f"{case}: {rule['alert']} for {rule['for']}")
    wanted = {
        "ToolgateUpstreamDown": rules_values["upstreamDown"],
        "ToolgateUpstreamErrorRatio": rules_values["errorRatio"],
        "ToolgateUpstreamSaturated": rules_values["saturation"],
    }
    for alert, settings in wanted.items():
        check((alert in alerts) == settings["enabled"], f"{case}: {alert} present = {alert in alerts}")
        if alert in alerts:
            rule = alerts[alert]
            check(rule["for"] == settings["for"] and rule["labels"]["severity"] == settings["severity"], f"{case}: {alert} {rule}")
            check(rules_values["additionalLabels"].items() <= rule["labels"].items(), f"{case}: {alert} labels {rule['labels']}")
            if "threshold" in settings:
                check(rule["expr"].rstrip().endswith(f"> {settings['threshold']}"), f"{case}: {alert} threshold: {rule['expr']}")
    if "ToolgateUpstreamErrorRatio" in alerts:
        outcomes = re.search(r'outcome=~"([^"]*)"', alerts["ToolgateUpstreamErrorRatio"]["expr"]).group(1)
        check(outcomes.split("|") == rules_values["errorRatio"]["outcomes"], f"{case}: error outcomes {outcomes}")


def check_rollout(docs: list[dict], merged: dict, case: str) -> None:
    """checksum/secrets, rollout/token and the Reloader annotation follow the values."""
    deployment = gateway(docs)
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    names = referenced_secrets(merged)
    rollout = merged["rollout"]
    check(("checksum/secrets" in annotations) == bool(names and rollout["secretChecksums"]), f"{case}: checksum/secrets {annotations}")
    check(annotations.get("rollout/token") == (rollout["token"] or None), f"{case}: rollout/token {annotations}")
    reload = (deployment["metadata"].get("annotations") or {}).get("secret.reloader.stakater.com/reload")
    expected = ",".join(names) if rollout["reloader"] and names else None
    check(reload == expected, f"{case}: Reloader annotation {reload!r}, expected {expected!r}")


def lint(values: dict | None, case: str) -> None:
    report = helm.lint(CHART, values, strict=True, kube_version="v1.30.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    for m in report["messages"]:
        if m["severity"] < 2:
            log(f"  lint (info): {m['path']}: {m['error']}")
    check(not report["errors"] and not problems, f"{case}: helm lint: {report}")
    log(f"  helm lint --strict: {report['total_charts_linted']} chart, no warnings or errors")


def run_case(chart: helm.Chart, case: str, values: dict | None) -> dict[str, str]:
    log(f"case {case}")
    lint(values, case)
    rendered = render(chart, values)
    docs = manifests(rendered)
    for doc in docs:
        validate_manifest(doc, case)
    merged = chart.merge_values(values)
    check_deployment(docs, rendered, merged, case)
    check_scaling(docs, merged, case)
    check_ingress_and_monitoring(docs, merged, case)
    check_redis(chart, docs, merged, case)
    check_network_policy(docs, merged, case)
    check_prometheus_rule(docs, merged, EXPORTED, case)
    check_rollout(docs, merged, case)
    kinds = sorted(d["kind"] for d in docs)
    summary["cases"].append({"case": case, "kinds": kinds})
    log(f"  rendered {len(docs)} manifests: {', '.join(kinds)}")
    return rendered


def checksum_of(chart: helm.Chart, values: dict | None) -> str:
    docs = manifests(render(chart, values))
    return gateway(docs)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


def pod_annotations(rendered: dict[str, str]) -> dict:
    return gateway(manifests(rendered))["spec"]["template"]["metadata"]["annotations"]


class FakeKube:
    """Just enough of a Kubernetes API server for Helm's `lookup` of Secrets: the
    chart rendered as `helm install`/`upgrade` would, against Secrets the test sets."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                status, body = fake.answer(self.path.split("?")[0])
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str) -> tuple[int, dict]:
        if path == "/api/v1":
            secrets = {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret", "verbs": ["get"]}
            return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [secrets]}
        parts = path.strip("/").split("/")
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
            data = self.secrets.get((parts[3], parts[5]))
            if data is not None:
                encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
                meta = {"name": parts[5], "namespace": parts[3]}
                return 200, {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": encoded}
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}

    def kubeconfig(self) -> str:
        server = f"http://127.0.0.1:{self.server.server_address[1]}"
        return yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": server}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": NAMESPACE}}],
            "current-context": "fake",
        })

    def close(self) -> None:
        self.server.shutdown()


def check_secret_rollout(chart: helm.Chart, example: dict) -> None:
    """checksum/secrets changes when, and only when, a referenced Secret's data changes
    in the cluster the chart is rendered against."""
    names = referenced_secrets(chart.merge_values(example))
    check(len(names) >= 2, f"the example references fewer than two Secrets: {names}")
    kube = FakeKube()
    try:
        with helm.Config(kubeconfig_content=kube.kubeconfig(), namespace=NAMESPACE) as cluster:
            def annotations() -> dict:
                return pod_annotations(cluster.render(chart, example, name=RELEASE, namespace=NAMESPACE, is_upgrade=True))

            for name in names:
                kube.secrets[(NAMESPACE, name)] = {"TOKEN": f"{name}-1"}
            first = annotations()
            check(annotations() == first, "checksum/secrets is not deterministic")
            kube.secrets[(NAMESPACE, "unrelated")] = {"TOKEN": "x"}
            check(annotations() == first, "a Secret the pods do not read rolled them")
            seen = {first["checksum/secrets"]}
            for name in names:
                kube.secrets[(NAMESPACE, name)] = {"TOKEN": f"{name}-2"}
                now = annotations()
                check(now["checksum/secrets"] not in seen, f"changing Secret {name} left checksum/secrets as it was")
                check(now["checksum/config"] == first["checksum/config"], "a Secret's change moved checksum/config")
                seen.add(now["checksum/secrets"])
                log(f"  Secret {name} changed: checksum/secrets {now['checksum/secrets'][:12]}…")
            offline = pod_annotations(render(chart, example))["checksum/secrets"]
            check(offline not in seen, "offline rendering saw the cluster's Secrets")
    finally:
        kube.close()
    summary["secret_rollout_checked"] = names


def expect_rejected(chart: helm.Chart, case: str, values: dict, error: type, needle: str) -> None:
    try:
        render(chart, values)
    except error as e:
        check(needle in str(e), f"{case}: the error does not name {needle!r}: {e}")
        first = str(e).strip().splitlines()[-1].strip()
        log(f"  rejected as expected: {case}: {first}")
        summary["rejected"].append(case)
        return
    raise AssertionError(f"{case}: rendered although it must be rejected: {values}")


def load_exported(path: str) -> None:
    """The metric families a running gateway exposed (classic text format)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(Path(path).read_text()):
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        EXPORTED[family.name] = {
            "samples": sorted({family.name + s for s in suffixes} | {s.name for s in family.samples}),
            "labels": sorted({label for s in family.samples for label in s.labels} - {"le"}),
        }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", help="a /metrics body of the gateway, for the PrometheusRule's checks")
    args = parser.parse_args()
    if args.metrics:
        load_exported(args.metrics)
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    values_validator = jsonschema.Draft202012Validator(schema)
    examples = {
        f"examples/{path.name}": yaml.safe_load(path.read_text())
        for path in sorted((CHART / "examples").glob("*.yaml"))
    }
    example = examples["examples/multi-replica.yaml"]
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    log("values files against values.schema.json")
    for name, values in [("values.yaml", defaults), *examples.items()]:
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in values_validator.iter_errors(values)]
        check(not errors, f"{name} does not match values.schema.json: {errors}")
        log(f"  {name}: valid")

    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(example)
        check(chart.schema == schema, "Helm did not load values.schema.json")

        default_render = run_case(chart, "default values", None)
        for name, values in examples.items():
            chart.validate_schema(values)
            run_case(chart, name, values)

        # Variants: a fixed replica count (PDB, no HPA) with a chart-made Secret; and
        # replicas > 1 turned into a single pod again (no PDB).
        redis_config = {"state": {"backend": "redis", "url": "${REDIS_URL}"}}
        run_case(
            chart,
            "2 replicas, chart-made Secret",
            {
                "replicaCount": 2,
                "config": redis_config,
                "secrets": {"env": {"REDIS_URL": "redis://redis:6379/0", "ACME_KEY_HASH": "sha256:" + "0" * 64}},
            },
        )
        # A managed Redis over TLS whose CA comes from a Secret (values.yaml's
        # extraVolumes comment): the file `state.tls_ca_file` names is mounted.
        managed = copy.deepcopy(example)
        ca_dir = "/var/run/toolgate/redis-ca"
        managed["config"]["state"]["tls_ca_file"] = f"{ca_dir}/ca.crt"
        managed["extraVolumes"] = [{"name": "redis-ca", "secret": {"secretName": "redis-ca"}}]
        managed["extraVolumeMounts"] = [{"name": "redis-ca", "mountPath": ca_dir, "readOnly": True}]
        docs = manifests(run_case(chart, "multi-replica with a managed Redis CA", managed))
        pod = gateway(docs)["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: m for m in container(gateway(docs))["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        check(ca_dir in mounts, f"the Redis CA directory is not mounted: {list(mounts)}")
        check(
            volumes[mounts[ca_dir]["name"]].get("secret", {}).get("secretName") == "redis-ca",
            f"the Redis CA mount is not the Secret: {volumes}",
        )
        rendered_config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
        check(
            rendered_config["state"]["tls_ca_file"] == f"{ca_dir}/ca.crt",
            f"the config does not name the mounted CA: {rendered_config['state']}",
        )

        single = copy.deepcopy(example)
        single["replicaCount"] = 1
        single["autoscaling"]["enabled"] = False
        run_case(chart, "multi-replica example scaled to 1", single)

        # Where data_dir lives.
        run_case(chart, "persistence off", {"persistence": {"enabled": False}})
        run_case(chart, "an existing claim", {"persistence": {"existingClaim": "toolgate-registrations"}})
        run_case(chart, "a claim without a storage class", {"persistence": {"storageClass": "-", "size": "500Mi"}})
        run_case(chart, "one replica on Redis", {"config": redis_config, "secrets": {"env": {"REDIS_URL": "redis://r:6379"}}})
        # The in-chart Redis: scaled out and autoscaled without a Redis of one's own.
        run_case(chart, "in-chart Redis, 3 replicas", {"redis": {"enabled": True}, "replicaCount": 3})
        run_case(chart, "in-chart Redis, HPA", {"redis": {"enabled": True}, "autoscaling": {"enabled": True}})
        # NetworkPolicy variants: open egress; an external Redis; the metrics port.
        run_case(chart, "NetworkPolicy, ingress only", {"networkPolicy": {"enabled": True, "egress": {"enabled": False}}})
        run_case(chart, "NetworkPolicy with an external Redis and metrics", {
            "replicaCount": 2,
            "config": redis_config,
            "serviceMonitor": {"enabled": True},
            "networkPolicy": {"enabled": True, "egress": {"redis": {"to": [{"ipBlock": {"cidr": "10.0.5.7/32"}}], "port": 6380}}},
        })
        # Alerts: each can be turned off; thresholds and outcomes are the values'.
        run_case(chart, "PrometheusRule, errors only", {"prometheusRule": {
            "enabled": True,
            "upstreamDown": {"enabled": False},
            "saturation": {"enabled": False},
            "errorRatio": {"threshold": 0.2, "outcomes": ["timeout"]},
        }})
        # What rolls the pods: every kind of Secret reference, a token, Reloader.
        rollout_values = {
            "secrets": {"existingSecret": "env"},
            "extraEnv": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "from-key", "key": "x"}}}],
            "extraEnvFrom": [{"secretRef": {"name": "from-envfrom"}}, {"configMapRef": {"name": "not-a-secret"}}],
            "extraVolumes": [
                {"name": "ca", "secret": {"secretName": "from-volume"}},
                {"name": "both", "projected": {"sources": [{"secret": {"name": "from-projected"}}]}},
            ],
            "extraVolumeMounts": [{"name": "ca", "mountPath": "/ca"}, {"name": "both", "mountPath": "/both"}],
            "rollout": {"token": "2026-11-29", "reloader": True},
        }
        run_case(chart, "every kind of Secret reference", rollout_values)
        run_case(chart, "Secret checksums off", {**rollout_values, "rollout": {"secretChecksums": False}})
        log("checksum/secrets follows the referenced Secrets (lookup against a fake API server)")
        check_secret_rollout(chart, rollout_values)
        log("rollout/token rolls the pods")
        first = pod_annotations(render(chart, {"rollout": {"token": "a"}}))
        second = pod_annotations(render(chart, {"rollout": {"token": "b"}}))
        check(first["rollout/token"] != second["rollout/token"], "rollout.token did not change the pod template")

        log("checksum/config follows the config")
        base = checksum_of(chart, None)
        check(checksum_of(chart, None) == base, "checksum/config is not deterministic")
        changed = checksum_of(chart, {"config": {"call_timeout": "3m"}})
        check(changed != base, "checksum/config did not change with the config")
        log(f"  {base[:12]}… -> {changed[:12]}… when call_timeout changes")
        check(
            any(path.endswith("NOTES.txt") for path in default_render), "NOTES.txt was not rendered"
        )

        log("values Helm must refuse")
        typos = [
            ("top-level typo replicaCont", {"replicaCont": 3}, "replicaCont"),
            ("nested typo ingress.enabeld", {"ingress": {"enabeld": True}}, "enabeld"),
            ("nested typo autoscaling.maxReplica", {"autoscaling": {"maxReplica": 5}}, "maxReplica"),
            ("wrong type service.port", {"service": {"port": "80"}}, "/service/port"),
            # The gateway's own config schema: a transport typo fails at install.
            ("config transport typo stdoi",
             {"config": {"upstreams": {"fs": {"stdoi": {"command": "mcp-fs"}}}}}, "stdoi"),
            ("config typo call_timout", {"config": {"call_timout": "3m"}}, "call_timout"),
            ("nested typo persistence.sise", {"persistence": {"sise": "1Gi"}}, "sise"),
            ("bad size persistence.size", {"persistence": {"size": "lots"}}, "/persistence/size"),
            ("unknown access mode", {"persistence": {"accessModes": ["ReadWriteAll"]}}, "/persistence/accessModes"),
            ("nested typo networkPolicy.egress.upstream",
             {"networkPolicy": {"egress": {"upstream": []}}}, "upstream"),
            ("error ratio above 1", {"prometheusRule": {"errorRatio": {"threshold": 5}}}, "/prometheusRule/errorRatio/threshold"),
            ("nested typo redis.image.tga", {"redis": {"image": {"tga": "7"}}}, "tga"),
            ("numeric rollout.token", {"rollout": {"token": 1}}, "/rollout/token"),
            ("config wrong type sessions.max_sessions",
             {"config": {"sessions": {"max_sessions": "many"}}}, "max_sessions"),
        ]
        for case, values, needle in typos:
            check(not values_validator.is_valid(values), f"{case}: values.schema.json accepts it")
            expect_rejected(chart, case, values, helm.HelmValuesError, needle)
        guards = [
            ("3 replicas without Redis", {"replicaCount": 3}, "state.backend"),
            ("HPA without Redis", {"autoscaling": {"enabled": True}}, "state.backend"),
            ("Redis without a URL", {"config": {"state": {"backend": "redis"}}}, "state.url"),
            ("grace period not above the preStop sleep",
             {"shutdown": {"preStopSleepSeconds": 30, "terminationGracePeriodSeconds": 30}}, "terminationGracePeriodSeconds"),
            ("existingSecret and secrets.env together",
             {"secrets": {"existingSecret": "mine", "env": {"A": "b"}}}, "existingSecret"),
            ("an existing claim for state in Redis",
             {"persistence": {"existingClaim": "mine"}, "config": redis_config}, "persistence.existingClaim"),
            ("in-chart Redis and a state URL",
             {"redis": {"enabled": True}, "config": redis_config}, "config.state.url"),
            ("in-chart Redis and the memory backend",
             {"redis": {"enabled": True}, "config": {"state": {"backend": "memory"}}}, "config.state.backend"),
            ("restricted egress without the external Redis' address",
             {"config": redis_config, "networkPolicy": {"enabled": True}}, "networkPolicy.egress.redis.to"),
        ]
        for case, values, needle in guards:
            expect_rejected(chart, case, values, helm.HelmRenderError, needle)

    summary["ok"] = True
    summary["kubernetes_versions"] = K8S_VERSIONS
    summary["helm_sdk"] = helm.helm_sdk_version()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except helm.HelmError as e:
        print(f"FAILED: Helm: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
