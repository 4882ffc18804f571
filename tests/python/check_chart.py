"""Checks the Helm chart in helm/toolgate offline, with Helm's own engine.

For the default values, examples/multi-replica.yaml and a few variants: runs Helm's
lint, renders the chart (helm-python-sdk: Helm v4's Go SDK through a C ABI, no helm
binary, no cluster), validates every rendered manifest against the Kubernetes API
schemas in strict mode (kubernetes-validate, unknown fields rejected) and asserts the
properties the chart promises: the restricted security context, the probes, the
config checksum, the PDB/HPA rules, the preStop drain, no bundled Redis.
Values files are checked against values.schema.json, and typos must be rejected —
in `config` too, whose schema is the gateway's own (tests/tests/helm_chart.rs keeps
it equal to `toolgate config-schema`).

Prints one line per check; the last line is a JSON summary. Exits non-zero (with the
reason) on the first failed check.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path

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
CRD_SHAPES = {("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR_SHAPE}


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
    deployment = one(docs, "Deployment")
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
    check("emptyDir" in volumes[mounts[data_dir]["name"]], f"{case}: data_dir is not an emptyDir")

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
    secret_ref = [e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e]
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
    service = one(docs, "Service")
    check(service["spec"]["selector"].items() <= pod_labels.items(), f"{case}: the Service misses the pods")
    check(service["spec"]["ports"][0]["targetPort"] == "http", f"{case}: Service targetPort")
    check(pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"], f"{case}: ServiceAccount")


def check_scaling(docs: list[dict], merged: dict, case: str) -> None:
    deployment = one(docs, "Deployment")
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
    service = one(docs, "Service")
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
        container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        check(
            {"name": "metrics", "containerPort": port, "protocol": "TCP"} in container["ports"],
            f"{case}: the pod has no metrics port {port}: {container['ports']}",
        )
        config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
        listen = (config.get("metrics") or {}).get("listen")
        check(listen == f"0.0.0.0:{port}", f"{case}: metrics.listen is {listen!r}")
        selector = monitor["spec"]["selector"]["matchLabels"]
        check(selector.items() <= service["metadata"]["labels"].items(), f"{case}: ServiceMonitor misses the Service")


def check_no_redis_inside(chart: helm.Chart, docs: list[dict], case: str) -> None:
    check(not chart.dependencies, f"{case}: subcharts bundled: {chart.dependencies}")
    check(not chart.metadata.get("dependencies"), f"{case}: Chart.yaml declares dependencies")
    check(not (CHART / "charts").exists(), f"{case}: helm/toolgate/charts exists")
    kinds = {d["kind"] for d in docs}
    check(not kinds & {"StatefulSet", "DaemonSet"}, f"{case}: unexpected workloads {kinds}")
    deployments = by_kind(docs, "Deployment")
    images = [c["image"] for d in deployments for c in d["spec"]["template"]["spec"]["containers"]]
    check(not any("redis" in i for i in images), f"{case}: a Redis image is deployed: {images}")


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
    check_no_redis_inside(chart, docs, case)
    kinds = sorted(d["kind"] for d in docs)
    summary["cases"].append({"case": case, "kinds": kinds})
    log(f"  rendered {len(docs)} manifests: {', '.join(kinds)}")
    return rendered


def checksum_of(chart: helm.Chart, values: dict | None) -> str:
    docs = manifests(render(chart, values))
    return one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


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


def main() -> int:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    values_validator = jsonschema.Draft202012Validator(schema)
    example = yaml.safe_load((CHART / "examples" / "multi-replica.yaml").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    log("values files against values.schema.json")
    for name, values in [("values.yaml", defaults), ("examples/multi-replica.yaml", example)]:
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in values_validator.iter_errors(values)]
        check(not errors, f"{name} does not match values.schema.json: {errors}")
        log(f"  {name}: valid")

    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(example)
        check(chart.schema == schema, "Helm did not load values.schema.json")

        default_render = run_case(chart, "default values", None)
        run_case(chart, "examples/multi-replica.yaml", example)

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
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: m for m in container(one(docs, "Deployment"))["volumeMounts"]}
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
