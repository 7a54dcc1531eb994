"""Property tests: generated YAML through the whole pipeline, on both CEL engines.

For any text: parsing never raises, evaluation never raises, every reporter renders
the result, and the two CEL engines (independent implementations) report the same
findings. Kubernetes-shaped objects (workloads with random containers, security
contexts, GPU resources with random quantities, wrong types in odd places) reach
deep into the rules; YAML-ish noise reaches into the parser. For longer runs, see
fuzz/fuzz_yaml.py (atheris) and docs/development.md, "Fuzzing".
"""

from __future__ import annotations

import datetime
import io
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scanner.audit import run as audit
from scanner.errors import UsageError
from scanner.findings.report import Report
from scanner.pipeline import Ruleset, ScanOptions, evaluate_inventory, load_ruleset
from scanner.reporters import FORMATS, writer_for
from scanner.sources import snapshot
from scanner.sources.yaml.document import parse_stream

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@cache
def ruleset(engine: str) -> Ruleset:
    return load_ruleset(ScanOptions(engine=engine, enable_all=True))


# --- strategies --------------------------------------------------------------------

names = st.sampled_from(["a", "main", "cuda", "sidecar", "x" * 70, "naïve", "", "init"])
text = st.text(max_size=20) | names
quantity = st.one_of(
    st.sampled_from(["1", "2", "0", "-1", "0.5", "100m", "2Gi", "1e3", "one", "", "8"]),
    st.integers(min_value=-3, max_value=16),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
resource_name = st.sampled_from(
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-3g.40gb.shared",
        "cpu",
        "memory",
        "example.com/fpga",
    ]
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.dictionaries(resource_name, quantity, max_size=3),
        "requests": st.dictionaries(resource_name, quantity, max_size=3),
    },
)
image = st.one_of(
    st.sampled_from(
        [
            "nvcr.io/nvidia/cuda:12.4.1-base",
            "busybox",
            "ghcr.io/acme/app@sha256:" + "a" * 64,
            "ghcr.io/acme/app:1@sha256:" + "b" * 63,
            "",
        ]
    ),
    text,
)
security_context = st.fixed_dictionaries(
    {},
    optional={
        "privileged": st.booleans() | text,
        "allowPrivilegeEscalation": st.booleans(),
        "runAsNonRoot": st.booleans() | st.none(),
        "capabilities": st.fixed_dictionaries(
            {}, optional={"drop": st.lists(st.sampled_from(["ALL", "NET_RAW"]), max_size=2)}
        ),
    },
)
container = st.fixed_dictionaries(
    {"name": names, "image": image},
    optional={"resources": resources | text, "securityContext": security_context | text},
)
containers = st.lists(container, max_size=3) | st.dictionaries(text, text, max_size=2) | text
pod_spec = st.fixed_dictionaries(
    {"containers": containers},
    optional={
        "initContainers": st.lists(container, max_size=2),
        "runtimeClassName": st.sampled_from(["nvidia", "runc", ""]) | st.integers(),
        "serviceAccountName": names,
        "nodeSelector": st.dictionaries(st.sampled_from(["sku", "pool", "x"]), text, max_size=2),
        "hostPID": st.booleans(),
        "hostNetwork": st.booleans() | text,
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {"key": st.sampled_from(["nvidia.com/gpu", "x"])},
                optional={"operator": st.sampled_from(["Exists", "Equal"]), "effect": text},
            ),
            max_size=2,
        ),
    },
)
metadata = st.fixed_dictionaries(
    {"name": names | st.integers()},
    optional={
        "namespace": st.sampled_from(["gpu-operator", "kube-system", "default", "ml", ""]),
        "labels": st.dictionaries(text, text, max_size=3),
        "annotations": st.dictionaries(
            st.sampled_from(["poolgate.io/ignore", "x", "poolgate.io/exempt"]), text, max_size=2
        ),
    },
)


@st.composite
def workload(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Pod", "Deployment", "Job", "DaemonSet", "StatefulSet"]))
    spec = draw(pod_spec | text)
    body: dict[str, Any] = {"kind": kind}
    if draw(st.integers(min_value=0, max_value=9)):  # now and then none, as with a typo
        body["metadata"] = draw(metadata)
    body["apiVersion"] = {"Pod": "v1", "Job": "batch/v1"}.get(kind, "apps/v1")
    body["spec"] = spec if kind == "Pod" else {"template": {"spec": spec}}
    return body


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)
other_object = st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(["v1", "x/v1"]), "kind": st.sampled_from(["ConfigMap", "X"])},
    optional={"metadata": metadata, "data": plain},
)
documents = st.lists(workload() | other_object | plain, min_size=1, max_size=4)


@st.composite
def manifest_text(draw: st.DrawFn) -> str:
    """Generated documents as YAML (block or flow style) or JSON, multi-document."""
    docs = draw(documents)
    flow = draw(st.sampled_from([False, True, None]))
    return yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=draw(st.booleans()))


yaml_noise = st.text(
    alphabet=st.sampled_from(list("abk01:-?[]{},#&*!|>'\"\n\t %@`\\.\ufeff\u2028\x85")),
    max_size=200,
)


# --- the property ------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _rulesets_loaded_before_hypothesis_runs() -> None:
    """cel-python raises the recursion limit when its first environment is built;
    doing that inside a Hypothesis test makes Hypothesis warn."""
    ruleset("cpp")
    ruleset("python")
    audit_ruleset("cpp")
    audit_ruleset("python")


def _run(source: str, engine: str) -> Report:
    inventory = parse_stream(source, "fuzz.yaml")
    report = evaluate_inventory(inventory, ruleset(engine), Path("/repo"), now=NOW)
    for fmt in FORMATS:
        writer_for(fmt)(report, io.StringIO())
    return report


def _comparable(report: Report) -> list[tuple[Any, ...]]:
    """Findings as both engines must agree on them. Error texts come from each engine
    (cel-cpp and cel-python word their errors differently), so an error is compared by
    where it is and that it is an error."""
    return sorted(
        (
            finding.rule_id,
            finding.location.line,
            finding.location.column,
            finding.location.path,
            finding.level,
            finding.outcome.value,
            finding.message if finding.outcome.value == "fail" else "",
        )
        for finding in report.findings
    )


def _check(source: str) -> None:
    cpp, python = _run(source, "cpp"), _run(source, "python")
    assert _comparable(cpp) == _comparable(python)
    assert cpp.notifications == python.notifications


@SETTINGS
@given(manifest_text())
# Found by this test: an integer past int64 made cel-python fail building the activation.
@example("apiVersion: v1\nkind: Pod\nmetadata:\n  name: 9223372036854775808\nspec: {}\n")
# Found by fuzz/fuzz_yaml.py --compare: cel-python's has() hid the missing metadata.
@example("apiVersion: v1\nkind: Pod\nmetafata: {name: a, namespace: gpu-operator}\n")
# Found by this test: cel-expr-python cut "\0" strings short.
@example('apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {runtimeClassName: "nvidia\\0x"}\n')
def test_kubernetes_shaped_documents_agree_on_both_engines(source: str) -> None:
    _check(source)


@SETTINGS
@given(yaml_noise)
def test_yaml_noise_never_breaks_the_pipeline(source: str) -> None:
    _check(source)


# --- live snapshots ------------------------------------------------------------------
# The audit's input: a JSON List as `poolgate snapshot` or `kubectl get -o json` writes
# it, with what only live objects carry (owner references, node names, status). No
# cluster is available here; the snapshot is the live path's input after listing.

node_names = st.sampled_from(["gpu-1", "gpu-2", "cpu-1"])
owner = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["apps/v1", "batch/v1", "v1", ""]),
        "kind": st.sampled_from(["ReplicaSet", "Deployment", "StatefulSet", "Job", "X"]),
        "name": names,
        "uid": st.sampled_from(["u1", "u2", ""]) | st.integers(),
    },
    optional={"controller": st.booleans() | text},
)
live_metadata = st.fixed_dictionaries(
    {"name": names, "namespace": st.sampled_from(["ml", "gpu-operator", "default"])},
    optional={
        "uid": st.sampled_from(["u1", "u2"]),
        "ownerReferences": st.lists(owner, max_size=2) | text,
        "labels": st.dictionaries(st.sampled_from(["pod-template-hash", "app", "x"]), text),
        "creationTimestamp": st.sampled_from(["2025-12-31T00:00:00Z", "yesterday", ""]),
    },
)
gpu_labels = st.dictionaries(
    st.sampled_from(
        [
            "nvidia.com/gpu.present",
            "nvidia.com/gpu.count",
            "nvidia.com/gpu.replicas",
            "nvidia.com/mig.strategy",
            "nvidia.com/mig.config",
            "nvidia.com/mig.config.state",
            "nvidia.com/gpu.product",
            "pool",
        ]
    ),
    quantity
    | st.sampled_from(
        ["true", "mixed", "single", "all-1g.10gb", "failed", "A100-SXM4-40GB-MIG-1g.5gb"]
    ),
    max_size=5,
)
live_node = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Node"),
        "metadata": st.fixed_dictionaries({"name": node_names}, optional={"labels": gpu_labels}),
    },
    optional={
        "status": st.fixed_dictionaries(
            {},
            optional={
                "allocatable": st.dictionaries(resource_name, quantity, max_size=3) | text,
                "capacity": st.dictionaries(resource_name, quantity, max_size=3),
            },
        )
        | plain
    },
)


@st.composite
def live_object(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(workload())
    body["metadata"] = draw(live_metadata)
    spec = body["spec"] if body["kind"] == "Pod" else body["spec"]["template"]["spec"]
    if isinstance(spec, dict) and draw(st.booleans()):
        spec["nodeName"] = draw(node_names)
    if draw(st.booleans()):
        body["status"] = draw(
            st.fixed_dictionaries(
                {}, optional={"phase": st.sampled_from(["Pending", "Running", 7])}
            )
            | plain
        )
    return body


sharing_resources = st.lists(
    st.fixed_dictionaries(
        {"name": resource_name | text, "replicas": quantity},
        optional={"rename": text, "devices": st.sampled_from(["all", [0, 1], "0"]) | quantity},
    ),
    max_size=2,
)
sharing = st.fixed_dictionaries(
    {},
    optional={
        mode: st.fixed_dictionaries(
            {},
            optional={
                "renameByDefault": st.booleans() | text,
                "failRequestsGreaterThanOne": st.booleans() | quantity,
                "resources": sharing_resources | text,
            },
        )
        for mode in ("timeSlicing", "mps")
    },
)
device_plugin_config = st.fixed_dictionaries(
    {"version": st.sampled_from(["v1", "v2", 1]) | st.none()},
    optional={
        "flags": st.fixed_dictionaries(
            {}, optional={"migStrategy": st.sampled_from(["none", "single", "mixed", 3])}
        ),
        "sharing": sharing | text,
    },
)
config_map = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("ConfigMap"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["dp-config", "x"]), "namespace": st.just("gpu-operator")}
        ),
        "data": st.dictionaries(
            st.sampled_from(["any", "a100", ""]),
            device_plugin_config.map(yaml.safe_dump) | text,
            max_size=2,
        ),
    }
)
cluster_policy = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["nvidia.com/v1", "x/v1"]),
        "kind": st.just("ClusterPolicy"),
        "metadata": st.just({"name": "cluster-policy"}),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "devicePlugin": st.fixed_dictionaries(
                    {},
                    optional={
                        "config": st.fixed_dictionaries(
                            {},
                            optional={
                                "name": st.sampled_from(["dp-config", "missing"]) | quantity,
                                "default": st.sampled_from(["any", "a100", ""]),
                            },
                        ),
                        "image": image,
                        "version": text,
                    },
                ),
                "mig": st.fixed_dictionaries({}, optional={"strategy": text}),
            },
        )
        | plain,
        "status": st.fixed_dictionaries({}, optional={"state": text}) | plain,
    }
)
namespace = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Namespace"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["ml", "gpu-operator", "default"])},
            optional={
                "labels": st.dictionaries(
                    st.sampled_from(
                        [
                            "poolgate.io/trust-domain",
                            "pod-security.kubernetes.io/enforce",
                            "pod-security.kubernetes.io/enforce-version",
                        ]
                    ),
                    text | quantity,
                    max_size=3,
                )
            },
        ),
    }
)
subject = st.fixed_dictionaries(
    {"kind": st.sampled_from(["User", "Group", "ServiceAccount", 3]), "name": names},
    optional={"namespace": st.sampled_from(["ml", "gpu-operator"]), "apiGroup": text},
)
binding = st.fixed_dictionaries(
    {
        "apiVersion": st.just("rbac.authorization.k8s.io/v1"),
        "kind": st.sampled_from(["RoleBinding", "ClusterRoleBinding"]),
        "metadata": st.fixed_dictionaries(
            {"name": names}, optional={"namespace": st.sampled_from(["gpu-operator", "ml"])}
        ),
        "roleRef": st.fixed_dictionaries(
            {"kind": st.sampled_from(["ClusterRole", "Role"]), "name": names}
        )
        | plain,
    },
    optional={"subjects": st.lists(subject, max_size=2) | plain},
)
role = st.fixed_dictionaries(
    {
        "apiVersion": st.just("rbac.authorization.k8s.io/v1"),
        "kind": st.sampled_from(["Role", "ClusterRole"]),
        "metadata": st.fixed_dictionaries(
            {"name": names}, optional={"namespace": st.sampled_from(["gpu-operator", "ml"])}
        ),
    },
    optional={
        "rules": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "verbs": st.lists(st.sampled_from(["get", "*", "create", "escalate"]) | text),
                    "resources": st.lists(st.sampled_from(["pods", "*", "secrets", "pods/exec"])),
                    "apiGroups": st.lists(st.sampled_from(["", "*", "apps"])),
                },
            ),
            max_size=2,
        )
        | plain
    },
)
network_policy = st.fixed_dictionaries(
    {
        "apiVersion": st.just("networking.k8s.io/v1"),
        "kind": st.just("NetworkPolicy"),
        "metadata": st.fixed_dictionaries({"name": names, "namespace": st.just("ml")}),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "podSelector": st.just({}) | plain,
                "policyTypes": st.lists(st.sampled_from(["Ingress", "Egress", "x"])) | text,
                "ingress": st.lists(plain, max_size=1),
            },
        )
        | plain,
    }
)
runtime_class = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["node.k8s.io/v1", "node.k8s.io/v1beta1"]),
        "kind": st.just("RuntimeClass"),
        "metadata": st.fixed_dictionaries({"name": st.sampled_from(["nvidia", "runc"]) | names}),
    },
    optional={"handler": text, "scheduling": plain},
)
admission_policy = st.fixed_dictionaries(
    {
        "apiVersion": st.just("admissionregistration.k8s.io/v1"),
        "kind": st.just("ValidatingAdmissionPolicy"),
        "metadata": st.just({"name": "floor"}),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "matchConstraints": st.fixed_dictionaries(
                    {},
                    optional={
                        "resourceRules": st.lists(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "resources": st.lists(
                                        st.sampled_from(["pods", "deployments", "*"]) | text
                                    ),
                                    "operations": st.lists(
                                        st.sampled_from(["CREATE", "UPDATE", "*"])
                                    ),
                                    "apiGroups": st.lists(st.sampled_from(["", "apps", "*"])),
                                },
                            ),
                            max_size=2,
                        )
                        | plain
                    },
                ),
                "validations": st.lists(
                    st.fixed_dictionaries(
                        {
                            "expression": st.sampled_from(
                                [
                                    "has(object.spec.runtimeClassName)",
                                    "object.spec.nodeSelector['sku'] != ''",
                                    "(",
                                ]
                            )
                            | text
                        }
                    ),
                    max_size=2,
                )
                | plain,
                "failurePolicy": st.sampled_from(["Fail", "Ignore"]) | text,
            },
        )
        | plain,
    }
)
admission_binding = st.fixed_dictionaries(
    {
        "apiVersion": st.just("admissionregistration.k8s.io/v1"),
        "kind": st.just("ValidatingAdmissionPolicyBinding"),
        "metadata": st.just({"name": "floor"}),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "policyName": st.sampled_from(["floor", "other"]) | quantity,
                "validationActions": st.lists(st.sampled_from(["Deny", "Warn", "Audit", "x"]))
                | text,
            },
        )
        | plain,
    }
)
live_items = st.lists(
    live_object()
    | live_node
    | config_map
    | cluster_policy
    | namespace
    | binding
    | role
    | network_policy
    | runtime_class
    | admission_policy
    | admission_binding
    | other_object
    | plain,
    min_size=1,
    max_size=8,
)


def _audit(text: str, engine: str, tmp: Path) -> Report | None:
    path = tmp / f"snap-{engine}.json"
    path.write_text(text)
    try:
        capture = snapshot.read(str(path))
    except UsageError:
        return None  # one clear line, as the CLI prints it
    report, _ = audit.evaluate(capture, audit_ruleset(engine), now=NOW)
    for fmt in FORMATS:
        writer_for(fmt)(report, io.StringIO())
    return report


@cache
def audit_ruleset(engine: str) -> Ruleset:
    return load_ruleset(ScanOptions(engine=engine, mode="audit", enable_all=True))


@SETTINGS
@given(live_items)
def test_live_snapshots_agree_on_both_engines_and_never_raise(items: list[Any]) -> None:
    """Integers past int64, NaN and deep values send the snapshot through the standard
    JSON parser, everything else through msgspec: either way the audit runs to the end."""
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    with tempfile.TemporaryDirectory() as tmp:
        cpp, python = _audit(text, "cpp", Path(tmp)), _audit(text, "python", Path(tmp))
    assert (cpp is None) == (python is None)
    if cpp is not None and python is not None:
        assert _comparable(cpp) == _comparable(python)
