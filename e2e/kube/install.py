"""What `up` puts into the fresh cluster: the demo fleet (fake GPU Nodes with their real ResourceSlices, the NVIDIA
DeviceClasses, namespaces, the GPUs already in use) and gpuclaim as its Helm chart renders it.

The chart is rendered by real Helm (helm-python-sdk). Applied as rendered: ServiceAccounts, RBAC, the config
ConfigMap, the certs ValidatingAdmissionPolicy and the two webhook configurations, whose `clientConfig.service` is
rewritten to a loopback `url` (no kube-proxy, no Service endpoints: nothing routes a Service here). Not applied:
the Deployments, Services and the certs Job (no kubelet runs pods); in their place `gpuclaim certs`, the webhook
and the extender run as local processes, each authenticating with a token of its own ServiceAccount from the
TokenRequest API, so the real RBAC authorizer (and the certs policy) judges every call they make.
"""

from __future__ import annotations

import copy
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from e2e.kube.api import Api, ApiError, wait_for
from e2e.kube.cluster import ControlPlane, PlaneError, Proc, free_port, kubeconfig, spawn, stop_procs, tail
from gpuclaim.demo import inventory

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "gpuclaim"
RELEASE = NAMESPACE = "gpuclaim"
#: kinds of the chart the loopback install applies; the rest (Deployment, Service, Job, ...) need a kubelet
APPLIED_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingWebhookConfiguration",
                 "ValidatingWebhookConfiguration")
NODE_CAPACITY = {"cpu": "192", "memory": "2Ti", "pods": "110", "ephemeral-storage": "1Ti"}
TOKEN_SECONDS = 24 * 3600
#: chart values every loopback install starts from (a caller's values go over them): the quota controller on
#: (docs/migration.md), reconciling every 2 s so a test's new quota is kept at once. Its Lease needs a namespace,
#: which in a pod comes from POD_NAMESPACE; the local webhook has none, so gc.leaseNamespace names it, and the
#: collector stays off as it was without a namespace (its sweeps would annotate the templates tests look at).
BASE_VALUES: Obj = {"config": {"gc": {"enabled": False, "leaseNamespace": NAMESPACE},
                               "quota": {"enabled": True, "intervalSeconds": 2}}}


# ---- the fleet ---------------------------------------------------------------------------------------------------
def with_status(node: Obj) -> Obj:
    """A fake Node the scheduler accepts: capacity (allocatable defaults from it) and Ready; no kubelet ever
    updates it."""
    node = copy.deepcopy(node)
    node["status"] = {"capacity": dict(NODE_CAPACITY), "allocatable": dict(NODE_CAPACITY),
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                      "message": "fake node (gpuclaim e2e.kube: no kubelet)"}]}
    return node


@dataclass
class FleetPlan:
    setup: list[Obj] = field(default_factory=list)  # Namespaces, DeviceClasses, Nodes, ResourceSlices
    busy_pods: list[Obj] = field(default_factory=list)
    busy_claims: list[Obj] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)


def demo_fleet(nodes: int | None = None, *, whole_gpus: int | None = None) -> FleetPlan:
    """The demo fleet (19 nodes, the GPUs in use). With `nodes`, that many nodes cloned in turn from the demo
    fleet's node kinds (their real slices, renamed; pools follow the node), none busy; with `whole_gpus` too,
    cloned only from the nodes with exactly that many whole GPUs and no MIG devices (the p5 and p4d: 8)."""
    fleet = inventory.build()
    plan = FleetPlan(provenance=list(fleet.provenance))
    by_node: dict[str, list[Obj]] = {}
    for obj in fleet.objects:
        if obj["kind"] == "Node":
            by_node.setdefault(obj["metadata"]["name"], []).insert(0, obj)
        elif obj["kind"] == "ResourceSlice":
            by_node.setdefault(obj["spec"]["nodeName"], []).append(obj)
    plan.setup += [o for o in fleet.objects if o["kind"] in ("Namespace", "DeviceClass")]
    if nodes is None:
        for name, objs in by_node.items():
            plan.setup += [with_status(o) if o["kind"] == "Node" else o for o in objs]
            plan.nodes.append(name)
        plan.busy_pods = [o for o in fleet.objects if o["kind"] == "Pod"]
        plan.busy_claims = [o for o in fleet.objects if o["kind"] == "ResourceClaim"]
        return plan
    templates = [(name, objs) for name, objs in by_node.items()
                 if whole_gpus is None or _whole_gpus(objs) == (whole_gpus, 0)]
    if not templates:
        raise PlaneError(f"no node of the demo fleet has {whole_gpus} whole GPUs and no MIG devices")
    for i in range(nodes):
        source, objs = templates[i % len(templates)]
        name = f"{source}-n{i:03d}"
        for obj in objs:
            obj = copy.deepcopy(obj)
            if obj["kind"] == "Node":
                obj["metadata"]["name"] = name
                obj["metadata"]["labels"]["kubernetes.io/hostname"] = name
                obj = with_status(obj)
            else:
                obj["metadata"]["name"] = f"{name}-{obj['spec']['driver']}"
                obj["spec"]["nodeName"] = name
                obj["spec"]["pool"]["name"] = name
            plan.setup.append(obj)
        plan.nodes.append(name)
    plan.provenance.append(f"{nodes} nodes cloned in turn from the demo fleet's {len(templates)} nodes")
    return plan


def _whole_gpus(objs: list[Obj]) -> tuple[int, int]:
    """(whole GPUs, MIG devices) in a node's gpu.nvidia.com slices."""
    types = [d["attributes"]["type"]["string"] for o in objs if o["kind"] == "ResourceSlice"
             and o["spec"]["driver"] == inventory.DRIVER for d in o["spec"]["devices"]]
    return types.count("gpu"), types.count("mig")


def load_fleet(api: Api, plan: FleetPlan) -> None:
    api.apply_all(o for o in plan.setup if o["kind"] != "Node")
    for node in (o for o in plan.setup if o["kind"] == "Node"):
        status, body = api.request("POST", "/api/v1/nodes", node)
        if status not in (201, 409):
            raise ApiError("POST", "/api/v1/nodes", status, body)
        if status == 409 or not (body.get("status") or {}).get("conditions"):
            api.patch_status(node, node["status"])  # 1.34 keeps status on create; else say it through /status
    for ns in {o["metadata"]["namespace"] for o in plan.busy_pods}:
        wait_default_sa(api, ns)
    for pod, claim in zip(plan.busy_pods, plan.busy_claims, strict=True):
        pod = copy.deepcopy(pod)
        pod["metadata"].pop("uid", None)
        pod.pop("status", None)
        status, created = api.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
        if status == 409:
            continue
        if status != 201:
            raise ApiError("POST", "pods", status, created)
        claim = copy.deepcopy(claim)
        claim_status = claim.pop("status")
        claim_status["reservedFor"] = [{"resource": "pods", "name": created["metadata"]["name"],
                                        "uid": created["metadata"]["uid"]}]
        made = api.create(claim)
        api.patch_status(made, claim_status)


def wait_default_sa(api: Api, namespace: str, timeout: float = 60) -> None:
    """The ServiceAccount admission plugin refuses pods until the controller made the namespace's `default`."""
    wait_for(f"ServiceAccount {namespace}/default",
             lambda: api.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0] == 200,
             timeout=timeout)


# ---- the chart ---------------------------------------------------------------------------------------------------
def render_chart(values: Obj | None = None) -> list[Obj]:
    import helm_python as helm

    out = helm.Chart.load(str(CHART)).render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True,
                                              revision=1)
    objects: list[Obj] = []
    for path, text in sorted(out.items()):
        if not path.endswith("NOTES.txt"):
            objects.extend(d for d in yaml.safe_load_all(text) if d)
    return objects


def merge_values(base: Obj, over: Obj) -> Obj:
    """``over`` on top of ``base``, mappings merged key by key (as Helm merges values files)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = merge_values(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) \
            else copy.deepcopy(value)
    return out


def to_url(registration: Obj, port: int) -> Obj:
    """The registration with each webhook's Service reference replaced by the loopback URL of the same path."""
    out = copy.deepcopy(registration)
    for hook in out["webhooks"]:
        service = hook["clientConfig"].pop("service")
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{service.get('path', '/')}"
    return out


def extender_entries(rendered: list[Obj], port: int, ca_file: Path) -> list[Obj]:
    """The chart's documented `extenders[]` (its scheduler-extender ConfigMap), pointed at the loopback extender
    and the CA `gpuclaim certs` issued; serverName, weight, timeouts, ignorable as rendered."""
    maps = [o for o in rendered if o["kind"] == "ConfigMap" and "extenders.yaml" in (o.get("data") or {})]
    entries = []
    for entry in yaml.safe_load(maps[0]["data"]["extenders.yaml"])["extenders"]:
        entry["urlPrefix"] = f"https://127.0.0.1:{port}"
        entry["tlsConfig"] = {**(entry.get("tlsConfig") or {}), "caFile": str(ca_file)}
        entries.append(entry)
    return entries


def service_account(rendered: list[Obj], component: str) -> str:
    for obj in rendered:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] == "ServiceAccount" and labels.get("app.kubernetes.io/component") == component:
            return str(obj["metadata"]["name"])
    raise PlaneError(f"the chart renders no ServiceAccount for component {component!r}")


def certs_job_args(rendered: list[Obj]) -> list[str]:
    """The arguments the chart's certs Job passes to `gpuclaim certs` (namespace, service, secret, selector, DNS
    names), read from its rendered shell script."""
    for obj in rendered:
        if obj["kind"] == "Job":
            container = obj["spec"]["template"]["spec"]["containers"][0]
            script = " ".join([*(container.get("command") or ()), *(container.get("args") or ())])
            match = re.search(r"gpuclaim certs (.*?) -o json", script)
            if match:
                return shlex.split(match.group(1))
    raise PlaneError("the chart renders no certs Job running `gpuclaim certs ... -o json`")


def request_token(api: Api, namespace: str, name: str) -> str:
    review = api.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": TOKEN_SECONDS}})
    return str(review["status"]["token"])


@dataclass
class Gpuclaim:
    """gpuclaim installed from the chart into `plane`, its servers as local processes."""

    plane: ControlPlane
    values: Obj = field(default_factory=dict)
    rendered: list[Obj] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)
    certs_report: Obj = field(default_factory=dict)
    skipped_kinds: list[str] = field(default_factory=list)

    @property
    def tls(self) -> Path:
        return self.plane.run / "tls"

    @property
    def config_path(self) -> Path:
        return self.plane.run / "gpuclaim-config.yaml"

    def install(self, api: Api) -> None:
        for name in ("webhook", "webhook-metrics", "extender", "extender-metrics", "fleet"):
            self.ports[name] = free_port()
        # the address kube-apiserver's admission kubeconfig holds its client certificate for
        self.ports["webhook"] = self.plane.ports.get("gpuclaim-webhook", self.ports["webhook"])
        self.rendered = render_chart(merge_values(BASE_VALUES, self.values))
        self.skipped_kinds = sorted({o["kind"] for o in self.rendered if o["kind"] not in APPLIED_KINDS})
        objects = []
        for obj in self.rendered:
            if obj["kind"] not in APPLIED_KINDS:
                continue
            if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                obj = to_url(obj, self.ports["webhook"])
            objects.append(obj)
        # the namespace first (the chart does not create it; `helm install --create-namespace` would)
        api.apply_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        # registrations last: until the servers run, the chart's failurePolicy governs (and certs has no CA yet)
        first = [o for o in objects if not o["kind"].endswith("WebhookConfiguration")]
        api.apply_all(first)
        api.apply_all(o for o in objects if o["kind"].endswith("WebhookConfiguration"))
        config_map = next(o for o in self.rendered if o["kind"] == "ConfigMap" and "config.yaml" in o["data"])
        self.config_path.write_text(self.local_config(api, config_map["data"]["config.yaml"]))
        for component in ("webhook", "extender", "certs"):
            self.accounts[component] = service_account(self.rendered, component)
            token = request_token(api, NAMESPACE, self.accounts[component])
            path = self.plane.kubeconfig_path(f"sa-{component}")
            path.write_text(kubeconfig(self.plane.server, self.plane.ca_file.read_bytes(), token,
                                       f"system:serviceaccount:{NAMESPACE}:{self.accounts[component]}"))
            path.chmod(0o600)
        self.run_certs()

    def local_config(self, api: Api, text: str) -> str:
        """The rendered config for the local webhook process: files the pod would mount are read from where the
        chart mounts them from. The client CA (`webhook.clientAuth`) is the ConfigMap of the Deployment's
        `client-ca` volume (by default `kube-root-ca.crt`, which kube-controller-manager publishes)."""
        config = yaml.safe_load(text) or {}
        auth = (config.get("webhook") or {}).get("clientAuth") or {}
        if not auth.get("caFile"):
            return text
        volumes = [v for o in self.rendered if o["kind"] == "Deployment"
                   for v in o["spec"]["template"]["spec"].get("volumes") or () if v["name"] == "client-ca"]
        name = volumes[0]["configMap"]["name"]
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}"
        wait_for(f"ConfigMap {NAMESPACE}/{name}", lambda: api.request("GET", path)[0] == 200, timeout=60)
        ca = self.plane.run / "client-ca" / "ca.crt"
        ca.parent.mkdir(exist_ok=True)
        ca.write_text(api.get(path)["data"]["ca.crt"])
        auth["caFile"] = str(ca)
        return yaml.safe_dump(config, sort_keys=False)

    def run_certs(self) -> None:
        """`gpuclaim certs` as the chart's certs Job runs it, with the certs ServiceAccount's token: the Secret,
        the caBundle injected into both registrations, and the files the local servers read."""
        argv = [sys.executable, "-m", "gpuclaim", "certs", *certs_job_args(self.rendered),
                "--kubeconfig", str(self.plane.kubeconfig_path("sa-certs")), "--ip", "127.0.0.1",
                "--out-dir", str(self.tls), "-o", "json"]
        done = subprocess.run(argv, capture_output=True, timeout=120, check=False, cwd=self.plane.run)
        (self.plane.logs / "certs.log").write_bytes(done.stderr)
        if done.returncode != 0:
            raise PlaneError(f"gpuclaim certs exited {done.returncode}: {done.stderr.decode(errors='replace')[-600:]}")
        self.certs_report = orjson.loads(done.stdout)

    def server_argv(self, component: str) -> list[str]:
        argv = [sys.executable, "-m", "gpuclaim", component, "--config", str(self.config_path),
                "--listen", f"127.0.0.1:{self.ports[component]}",
                "--metrics-listen", f"127.0.0.1:{self.ports[component + '-metrics']}",
                "--tls-cert", str(self.tls / "tls.crt"), "--tls-key", str(self.tls / "tls.key"),
                "--kubeconfig", str(self.plane.kubeconfig_path(f"sa-{component}"))]
        if component == "extender" and self.fleet_enabled:
            # the chart's fleet.listen names the pod's port; locally a free loopback port stands for it
            argv += ["--fleet-listen", f"127.0.0.1:{self.ports['fleet']}"]
        return argv

    @property
    def fleet_enabled(self) -> bool:
        config = merge_values(BASE_VALUES, self.values).get("config") or {}
        return bool((config.get("fleet") or {}).get("listen"))

    @property
    def fleet_url(self) -> str | None:
        return f"https://127.0.0.1:{self.ports['fleet']}/fleet" if self.fleet_enabled else None

    def start_server(self, component: str, *, wait: bool = True) -> None:
        self.procs[component] = spawn(component, self.server_argv(component), self.plane.logs)
        if wait:
            self.wait_ready(component)

    def start_servers(self) -> None:
        for component in ("webhook", "extender"):  # both import at once, then wait
            self.start_server(component, wait=False)
        for component in ("webhook", "extender"):
            self.wait_ready(component)

    def stop_server(self, component: str) -> None:
        proc = self.procs.pop(component, None)
        if proc is not None:
            stop_procs([proc])

    def ready(self, component: str) -> bool:
        import ssl
        import urllib.request

        context = ssl.create_default_context(cafile=str(self.tls / "ca.crt"))
        context.check_hostname = False  # the cert names 127.0.0.1 as an IP SAN: verified by the chain
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.ports[component]}/readyz", context=context,
                                        timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def wait_ready(self, component: str, timeout: float = 60) -> None:
        proc = self.procs[component]
        deadline = time.monotonic() + timeout
        while not self.ready(component):
            if not proc.alive():
                raise PlaneError(f"{component} exited while starting (log {proc.log}):\n{tail(proc.log)}")
            if time.monotonic() > deadline:
                raise PlaneError(f"{component}: not ready after {timeout:.0f}s (log {proc.log}):\n{tail(proc.log)}")
            time.sleep(0.1)

    def extenders(self) -> list[Obj]:
        return extender_entries(self.rendered, self.ports["extender"], self.tls / "ca.crt")

    def stop(self) -> None:
        stop_procs([self.procs.pop(n) for n in list(self.procs)])

