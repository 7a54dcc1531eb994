"""The ``cluster`` subject and its admission facts: which policies match Pods, read the
contract, and are bound with Deny."""

from __future__ import annotations

from typing import Any

import pytest

from scanner.config.values import Config
from scanner.model import Subject, build_model
from scanner.model.admission import BINDING, GROUP, POLICY
from scanner.model.cluster import ClusterScope
from scanner.sources.yaml.document import parse_plain, parse_stream

GPU_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers:
    - name: c
      image: x
      resources: {limits: {nvidia.com/gpu: 1}}
"""


def policy(name: str, rules: str, validations: str, extra: str = "") -> str:
    return f"""\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules: {rules}
  validations: {validations}
{extra}"""


def binding(name: str, policy_name: str, actions: str, extra: str = "") -> str:
    return f"""\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec:
  policyName: {policy_name}
  validationActions: {actions}
{extra}"""


PODS = '[{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]'
BOTH = """[{expression: "object.spec.runtimeClassName == 'nvidia'"},
           {expression: "'sku' in object.spec.nodeSelector"}]"""


def cluster(
    *documents: str, config: Config | None = None, scope: ClusterScope | None = None
) -> Subject:
    inventory = parse_stream("---\n".join(documents), "t.yaml")
    [subject] = build_model(inventory, config or Config(), scope, read_yaml=parse_plain).subjects()[
        "cluster"
    ]
    return subject


def policies(*documents: str, config: Config | None = None) -> dict[str, Any]:
    facts = cluster(*documents, config=config).variables["admission"]["policies"]
    return {item["name"]: item for item in facts}


def test_exactly_one_cluster_subject_with_a_stable_identity_and_uri() -> None:
    subject = cluster(GPU_POD, scope=ClusterScope("admin@prod"))
    assert subject.type == "cluster"
    assert subject.obj.origin.uri == "cluster://admin%40prod/_cluster"
    assert subject.obj.origin.source_type == "cluster"
    assert subject.obj.ref.logical_name == "Cluster/cluster"
    assert subject.obj.ref.api_version == "poolgate.io/v1alpha1"
    assert cluster(GPU_POD).obj.origin.uri == "cluster://manifests/_cluster"


def test_gpu_workloads_are_counted_once_per_object_with_the_first_names() -> None:
    pods = [GPU_POD.replace("train", f"p{number:02}") for number in range(12, 0, -1)]
    cpu = GPU_POD.replace("nvidia.com/gpu: 1", "cpu: 1").replace("train", "cpu")
    ray = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: r, namespace: ml}
spec:
  headGroupSpec:
    template: {spec: {containers: [{name: h, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}}
  workerGroupSpecs:
    - template: {spec: {containers: [{name: w, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}}
"""
    gpu = cluster(*pods, cpu, ray).variables["gpuWorkloads"]
    assert gpu == {"count": 13, "names": [f"ml/Pod/p{number:02}" for number in range(1, 11)]}
    assert cluster(cpu).variables["gpuWorkloads"] == {"count": 0, "names": []}


def test_known_from_presence_in_a_scan_and_from_listing_in_an_audit() -> None:
    assert not cluster(GPU_POD).variables["admission"]["known"]
    assert cluster(GPU_POD, binding("b", "p", "[Deny]")).variables["admission"]["known"]
    listed = frozenset({(GROUP, POLICY), (GROUP, BINDING), ("", "Pod")})
    audited = cluster(GPU_POD, scope=ClusterScope("prod", listed))
    assert audited.variables["admission"] == {"known": True, "policies": []}
    half = ClusterScope("prod", frozenset({(GROUP, POLICY), ("", "Pod")}))
    assert not cluster(GPU_POD, scope=half).variables["admission"]["known"]


@pytest.mark.parametrize(
    ("rules", "pods"),
    [
        (PODS, True),
        ('[{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]', True),
        ('[{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"]}]', True),
        (
            '[{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: ["pods/*"]}]',
            False,
        ),
        ('[{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods]}]', False),
        (
            "[{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [pods]}]",
            False,
        ),
        ('[{apiGroups: [""], apiVersions: [v2], operations: [CREATE], resources: [pods]}]', False),
        (
            '[{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], '
            "scope: Cluster}]",
            False,
        ),
        (
            '[{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], '
            "resourceNames: [one]}]",
            False,
        ),
        ("[]", False),
        ("not-a-list", False),
    ],
)
def test_which_resource_rules_match_pods_on_create(rules: str, pods: bool) -> None:
    assert policies(policy("p", rules, BOTH))["p"]["pods"] is pods


def test_exclude_rules_and_pod_controllers() -> None:
    excluded = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]
    excludeResourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations: [{expression: "object.spec.runtimeClassName == 'nvidia'"}]
"""
    facts = policies(excluded)["p"]
    assert not facts["pods"]
    assert "deployments.apps" in facts["controllers"]
    controllers = policy(
        "c",
        "[{apiGroups: [apps, batch], apiVersions: [v1], operations: [CREATE], "
        "resources: [deployments, jobs]}]",
        BOTH,
    )
    facts = policies(controllers)["c"]
    assert (facts["pods"], facts["controllers"]) == (False, ["deployments.apps", "jobs.batch"])


def test_expressions_read_runtime_class_and_pool_label_keys() -> None:
    found = policies(
        policy("rc", PODS, "[{expression: \"object.spec.runtimeClassName != ''\"}]"),
        policy("sku-field", PODS, '[{expression: "has(object.spec.nodeSelector.sku)"}]'),
        policy(
            "pool-variable",
            PODS,
            '[{expression: "variables.terms.all(t, t.key == \\"karpenter.sh/nodepool\\")"}]',
            "  variables: [{name: terms, expression: object.spec.affinity.nodeAffinity}]\n",
        ),
        policy("label-only", PODS, "[{expression: \"'sku' in object.metadata.labels\"}]"),
        policy("skus", PODS, '[{expression: "has(object.spec.nodeSelector.skus)"}]'),
        policy("message-only", PODS, '[{expression: "true", message: runtimeClassName}]'),
    )
    assert [name for name, facts in found.items() if facts["runtimeClass"]] == ["rc"]
    assert sorted(name for name, facts in found.items() if facts["sku"]) == [
        "pool-variable",
        "sku-field",
    ]
    custom = policies(
        policy("p", PODS, "[{expression: \"'gpu-class' in object.spec.nodeSelector\"}]"),
        config=Config(sku_label="gpu-class", pool_labels=()),
    )
    assert custom["p"]["sku"]


def test_bindings_actions_deny_and_failure_policy() -> None:
    found = policies(
        policy("warn", PODS, BOTH),
        binding("warn-1", "warn", "[Warn]"),
        binding("warn-2", "warn", "[Audit, Warn]"),
        policy("deny", PODS, BOTH, "  failurePolicy: Ignore\n"),
        binding("deny-1", "deny", "[Deny]"),
        policy("narrowed", PODS, BOTH),
        binding(
            "narrowed-1",
            "narrowed",
            "[Deny]",
            "  matchResources:\n"
            "    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], "
            "resources: [deployments]}]\n",
        ),
        policy("lonely", PODS, BOTH),
        binding("other-group", "lonely", "[Deny]").replace(
            "admissionregistration.k8s.io/v1", "example.com/v1"
        ),
    )
    assert found["warn"]["actions"] == ["Audit", "Warn"]
    assert [b["name"] for b in found["warn"]["bindings"]] == ["warn-1", "warn-2"]
    assert not found["warn"]["deny"]
    assert found["warn"]["failurePolicy"] == "Fail"
    assert found["deny"]["deny"] and found["deny"]["failurePolicy"] == "Ignore"
    assert found["narrowed"]["actions"] == ["Deny"] and not found["narrowed"]["deny"]
    assert found["narrowed"]["bindings"][0]["pods"] is False
    assert found["lonely"]["bindings"] == [] and not found["lonely"]["deny"]


def test_malformed_policies_are_facts_not_crashes() -> None:
    broken = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints: [pods]
  validations: {expression: runtimeClassName}
  failurePolicy: 3
"""
    found = policies(broken, binding("b", "broken", "Deny"), binding("c", "[x]", "[Deny]"))
    assert found["broken"] == {
        "name": "broken",
        "pods": False,
        "controllers": [],
        "runtimeClass": False,
        "sku": False,
        "failurePolicy": "Fail",
        "bindings": [{"name": "b", "actions": [], "pods": True}],
        "actions": [],
        "deny": False,
    }


PARAMS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: contract, namespace: gpu-operator}
data: {skuLabel: sku, operatorNamespaces: "gpu-operator,nvidia-gpu-operator"}
"""
FROM_PARAMS = """[{expression: "params.data.skuLabel in object.spec.nodeSelector"}]"""
PARAM_KIND = "  paramKind: {apiVersion: v1, kind: ConfigMap}\n"
PARAM_REF = "  paramRef: {name: contract, namespace: gpu-operator}\n"


@pytest.mark.parametrize(
    ("documents", "sku"),
    [
        # The label key is a value of the ConfigMap the binding names: it counts.
        (
            (
                policy("p", PODS, FROM_PARAMS, PARAM_KIND),
                binding("p", "p", "[Deny]", PARAM_REF),
                PARAMS,
            ),
            True,
        ),
        # The ConfigMap is not in scope: the key is unknown.
        (
            (policy("p", PODS, FROM_PARAMS, PARAM_KIND), binding("p", "p", "[Deny]", PARAM_REF)),
            False,
        ),
        # The policy's params are not ConfigMaps.
        ((policy("p", PODS, FROM_PARAMS), binding("p", "p", "[Deny]", PARAM_REF), PARAMS), False),
        # The binding names another ConfigMap.
        (
            (
                policy("p", PODS, FROM_PARAMS, PARAM_KIND),
                binding("p", "p", "[Deny]", PARAM_REF.replace("contract", "other")),
                PARAMS,
            ),
            False,
        ),
    ],
)
def test_a_label_key_read_from_a_params_config_map_counts(
    documents: tuple[str, ...], sku: bool
) -> None:
    assert policies(GPU_POD, *documents)["p"]["sku"] is sku
