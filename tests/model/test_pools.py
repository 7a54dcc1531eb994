"""Nodes, declarations and pools: GPU detection, sharing modes, advertised names, diagnosis."""

from __future__ import annotations

from typing import Any

from scanner.config.values import Config
from scanner.model import build_model
from scanner.sources.yaml.document import parse_plain, parse_stream

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {labels}
spec:
  taints: [{{key: nvidia.com/gpu, value: present, effect: NoSchedule}}]
{status}
"""


def node(name: str, labels: str, status: str = "") -> str:
    return NODE.format(name=name, labels=labels, status=status)


def model_of(*documents: str) -> Any:
    return build_model(
        parse_stream("---\n".join(documents), "t.yaml"), Config(), read_yaml=parse_plain
    )


def node_facts(model: Any, name: str) -> dict[str, Any]:
    return next(facts for obj, facts in model.nodes if obj.name == name)


def test_gpu_detection_and_sharing_modes_from_labels() -> None:
    model = model_of(
        node("a", '{pool: p, nvidia.com/gpu.present: "true"}'),
        node(
            "b",
            "{pool: p, nvidia.com/gpu.sharing-strategy: mps, nvidia.com/gpu.product: NVIDIA-L4}",
        ),
        node(
            "c",
            '{pool: q, nvidia.com/mig.config: all-1g.10gb, nvidia.com/mig.strategy: mixed, nvidia.com/gpu.replicas: "2", feature.node.kubernetes.io/pci-10de.present: "true"}',
        ),
        node("d", "{pool: cpu}"),
    )
    assert [node_facts(model, n)["sharing"] for n in "abc"] == [
        "exclusive",
        "mps",
        "mig+time-slicing",
    ]
    assert node_facts(model, "c")["advertises"] == ["nvidia.com/mig-1g.10gb"]
    assert not node_facts(model, "d")["gpu"]
    assert [p.facts["name"] for p in model.pools] == ["p", "q"]
    assert model.pools[0].facts["sharing"] == "mixed" and model.pools[0].facts["shared"]


def test_live_allocatable_wins_over_derived_names() -> None:
    model = model_of(
        node("a", "{pool: p}", "status:\n  allocatable: {nvidia.com/gpu: '4', cpu: '64'}")
    )
    facts = node_facts(model, "a")
    assert facts["gpu"] and facts["advertises"] == ["nvidia.com/gpu"] and facts["gpuCount"] == 4


def test_device_plugin_config_resolution_through_clusterpolicy() -> None:
    model = model_of(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\n"
        "spec: {devicePlugin: {config: {name: dp, default: ts}}}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dp, namespace: gpu-operator}\ndata:\n"
        "  ts: |\n    version: v1\n    sharing:\n      timeSlicing:\n        renameByDefault: true\n"
        "        resources: [{name: nvidia.com/gpu, replicas: 4}]\n"
        "  none: |\n    version: v1\n",
        node("default-key", '{pool: p, nvidia.com/gpu.present: "true"}'),
        node(
            "explicit",
            '{pool: q, nvidia.com/gpu.present: "true", nvidia.com/device-plugin.config: none}',
        ),
    )
    assert node_facts(model, "default-key")["sharing"] == "time-slicing"
    assert node_facts(model, "default-key")["advertises"] == ["nvidia.com/gpu.shared"]
    assert node_facts(model, "explicit")["sharing"] == "exclusive"
    assert model.cluster["devicePlugin"]["configFound"]


def test_a_node_selecting_a_config_not_in_scope_shares_unknown() -> None:
    """Absence of evidence: a device-plugin config the scan does not hold makes the
    node's sharing unknown, not exclusive, and a ConfigMap other than the one
    ClusterPolicy names is not read as the nodes' config."""
    model = model_of(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\n"
        "spec: {devicePlugin: {config: {name: dp, default: ts}}}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: plugin}\ndata:\n"
        "  ts: |\n    version: v1\n    sharing:\n      timeSlicing:\n"
        "        resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
        node("default-key", '{pool: p, nvidia.com/gpu.present: "true"}'),
        node(
            "mig",
            '{pool: p, nvidia.com/gpu.present: "true", nvidia.com/mig.config: all-1g.10gb, '
            "nvidia.com/mig.strategy: mixed}",
        ),
        node("labelled", '{pool: q, nvidia.com/gpu.present: "true", nvidia.com/gpu.replicas: "2"}'),
        node(
            "named", '{pool: q, nvidia.com/gpu.present: "true", nvidia.com/device-plugin.config: x}'
        ),
    )
    assert node_facts(model, "default-key")["sharing"] == "unknown"
    assert node_facts(model, "default-key")["replicas"] == 0
    assert node_facts(model, "mig")["sharing"] == "mig+unknown"
    assert node_facts(model, "labelled")["sharing"] == "time-slicing"  # GFD says so
    assert not model.pools[0].facts["shared"]
    assert node_facts(model, "named")["sharing"] == "unknown"
    # Only ClusterPolicy's own reference dangles; key x is not judged against "other".
    assert list(model.cluster["devicePlugin"]["dangling"]) == ["ClusterPolicy/cp"]


WORKLOAD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml}}
spec:
  nodeSelector: {selector}
  tolerations: {tolerations}
  containers:
    - name: c
      image: x
      resources: {{limits: {{{resource}: {count}}}}}
"""


def pod(
    name: str,
    selector: str = "{}",
    tolerations: str = "[]",
    resource: str = "nvidia.com/gpu",
    count: int = 1,
) -> str:
    return WORKLOAD.format(
        name=name, selector=selector, tolerations=tolerations, resource=resource, count=count
    )


def test_diagnosis_names_the_pool_contract_cause() -> None:
    pools = node(
        "n", '{pool: h100, sku: h100, nvidia.com/gpu.present: "true", nvidia.com/gpu.count: "4"}'
    )
    toleration = "[{key: nvidia.com/gpu, operator: Exists}]"
    model = model_of(
        pools,
        pod("nomatch", "{sku: b200}"),
        pod("taint", "{sku: h100}"),
        pod("name", "{sku: h100}", toleration, "nvidia.com/mig-1g.10gb"),
        pod("big", "{sku: h100}", toleration, count=8),
        pod("fine", "{sku: h100}", toleration),
    )
    diagnosis = {w.obj.name: w.facts["diagnosis"] for w in model.workloads}
    assert diagnosis["nomatch"] == "its node selection matches no GPU pool"
    assert diagnosis["taint"] == "untolerated taints: h100: nvidia.com/gpu=present:NoSchedule"
    assert diagnosis["name"] == "nvidia.com/mig-1g.10gb not advertised by h100 (nvidia.com/gpu)"
    assert diagnosis["big"] == "asks for 8 GPUs in one container; the largest node has 4"
    assert diagnosis["fine"] == ""


def test_no_visible_pool_means_no_targets_and_no_diagnosis() -> None:
    model = model_of(pod("alone", "{sku: h100}"))
    [workload] = model.workloads
    assert workload.facts["poolsKnown"] is False and workload.facts["diagnosis"] == ""


def test_tenants_and_trust_domains() -> None:
    namespaces = "".join(
        f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}, labels: {{poolgate.io/trust-domain: {d}}}}}\n---\n"
        for n, d in (("a1", "alpha"), ("a2", "alpha"), ("b1", "bravo"))
    )
    shared = node("n", '{pool: l4, nvidia.com/gpu.present: "true", nvidia.com/gpu.replicas: "4"}')
    toleration = "[{operator: Exists}]"
    docs = [namespaces + shared]
    for ns in ("a1", "a2", "gpu-operator"):
        docs.append(pod("p", "{pool: l4}", toleration).replace("namespace: ml", f"namespace: {ns}"))
    model = model_of(*docs)
    [pool] = model.pools
    assert pool.facts["trustDomains"] == ["alpha"]  # the operator namespace is platform
    docs.append(pod("q", "{pool: l4}", toleration).replace("namespace: ml", "namespace: b1"))
    [pool] = model_of(*docs).pools
    assert pool.facts["trustDomains"] == ["alpha", "bravo"]


def test_hyphenated_mig_profiles_are_gpu_resources_of_a_node() -> None:
    model = model_of(
        node("rtx", "{pool: p}", "status:\n  allocatable: {nvidia.com/mig-1g.24gb-me: '4'}")
    )
    facts = node_facts(model, "rtx")
    assert facts["gpu"] and facts["allocatable"] == {"nvidia.com/mig-1g.24gb-me": 4}
    assert facts["advertises"] == ["nvidia.com/mig-1g.24gb-me"]


def test_mps_with_rename_by_default_advertises_shared_names() -> None:
    model = model_of(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dp, namespace: gpu-operator}\ndata:\n"
        "  mps: |\n    version: v1\n    sharing:\n      mps:\n        renameByDefault: true\n"
        "        resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
        node(
            "l4", '{pool: p, nvidia.com/gpu.present: "true", nvidia.com/device-plugin.config: mps}'
        ),
    )
    facts = node_facts(model, "l4")
    assert facts["sharing"] == "mps" and facts["renameShared"]
    assert facts["advertises"] == ["nvidia.com/gpu.shared"]


def test_only_all_profile_mig_configs_name_a_profile() -> None:
    mixed = "nvidia.com/mig.strategy: mixed"
    model = model_of(
        node("named", f"{{pool: a, {mixed}, nvidia.com/mig.config: five-1g-one-2g}}"),
        node("balanced", f"{{pool: b, {mixed}, nvidia.com/mig.config: all-balanced}}"),
        node("me", f"{{pool: c, {mixed}, nvidia.com/mig.config: all-1g.10gb.me}}"),
        node("dash", f"{{pool: d, {mixed}, nvidia.com/mig.config: all-1g.24gb-me}}"),
    )
    named = node_facts(model, "named")
    assert named["sharing"] == "mig" and named["migProfiles"] == []
    assert named["advertises"] == ["nvidia.com/mig-*"]
    assert named["migLayouts"] == ["five-1g-one-2g"]
    assert node_facts(model, "balanced")["advertises"] == ["nvidia.com/mig-*"]
    assert node_facts(model, "me")["advertises"] == ["nvidia.com/mig-1g.10gb.me"]
    assert node_facts(model, "dash")["advertises"] == ["nvidia.com/mig-1g.24gb-me"]


def test_mig_strategy_label_and_allocatable_slices_are_mig_signals() -> None:
    """GFD labels every GPU node with the cluster's MIG strategy, MIG-enabled or not:
    alone, the label leaves both whole GPUs and MIG slices possible."""
    present = 'nvidia.com/gpu.present: "true"'
    model = model_of(
        node("mixed", f"{{pool: p, {present}, nvidia.com/mig.strategy: mixed}}"),
        node("single", f"{{pool: q, {present}, nvidia.com/mig.strategy: single}}"),
        node(
            "whole",
            f"{{pool: r, {present}, nvidia.com/mig.strategy: mixed}}",
            "status:\n  allocatable: {nvidia.com/gpu: '1'}",
        ),
        node(
            "disabled",
            f"{{pool: t, {present}, nvidia.com/mig.strategy: mixed, nvidia.com/mig.config: all-disabled}}",
        ),
        node("slices", "{pool: s}", "status:\n  allocatable: {nvidia.com/mig-1g.10gb: '7'}"),
    )
    got = {
        name: (
            node_facts(model, name)["sharing"],
            node_facts(model, name)["migStrategy"],
            node_facts(model, name)["advertises"],
        )
        for name in ("mixed", "single", "whole", "disabled", "slices")
    }
    assert got == {
        "mixed": ("exclusive", "none", ["nvidia.com/gpu", "nvidia.com/mig-*"]),
        "single": ("exclusive", "none", ["nvidia.com/gpu"]),
        "whole": ("exclusive", "none", ["nvidia.com/gpu"]),
        "disabled": ("exclusive", "none", ["nvidia.com/gpu"]),
        "slices": ("mig", "mixed", ["nvidia.com/mig-1g.10gb"]),
    }


def test_mig_requests_compare_with_known_slices_only() -> None:
    """An all-1g.10gb node makes 7 slices of an H100 and 4 of an A100 40GB: a node
    without status says how many GPUs it has, not how many slices."""
    toleration = "[{key: nvidia.com/gpu, operator: Exists}]"
    labels = '{{pool: {0}, sku: {0}, nvidia.com/gpu.count: "1", nvidia.com/mig.config: all-1g.10gb, nvidia.com/mig.strategy: mixed}}'
    model = model_of(
        node("declared", labels.format("declared")),
        node(
            "live", labels.format("live"), "status:\n  allocatable: {nvidia.com/mig-1g.10gb: '7'}"
        ),
        pod("two", "{sku: declared}", toleration, "nvidia.com/mig-1g.10gb", 2),
        pod("eight", "{sku: live}", toleration, "nvidia.com/mig-1g.10gb", 8),
        pod("whole", "{sku: declared}", toleration, "nvidia.com/gpu", 2),
    )
    workloads = {w.obj.name: w.facts for w in model.workloads}
    assert workloads["two"]["targets"][0]["perNode"] == {}  # unknown, not 0
    assert workloads["two"]["diagnosis"] == ""
    assert workloads["eight"]["targets"][0]["perNode"] == {"nvidia.com/mig-1g.10gb": 7}
    assert workloads["eight"]["diagnosis"] == (
        "asks for 8 nvidia.com/mig-1g.10gb in one container; the largest node has 7"
    )
    # Whole GPUs still compare with the node's GPU count.
    assert workloads["whole"]["targets"][0]["perNode"] == {"nvidia.com/gpu": 1}


def test_pool_layouts_tell_named_mig_configs_apart() -> None:
    mixed = 'nvidia.com/gpu.present: "true", nvidia.com/mig.strategy: mixed'
    model = model_of(
        node("a", f"{{pool: p, {mixed}, nvidia.com/mig.config: five-1g-one-2g}}"),
        node("b", f"{{pool: p, {mixed}, nvidia.com/mig.config: all-1g.10gb}}"),
    )
    [pool] = model.pools
    assert pool.facts["migProfiles"] == ["1g.10gb"]
    assert pool.facts["migLayouts"] == ["1g.10gb", "five-1g-one-2g"]


def test_whole_gpus_of_a_live_node_are_neither_slices_nor_replicas() -> None:
    """A mixed-strategy node with one GPU whole and one in 7 slices has one whole GPU
    (the slices counted as GPUs let a pod asking for 4 look as if it fit); a node
    advertising 32 time-sliced ``nvidia.com/gpu`` with 4 replicas has 8 GPUs. Under
    the single strategy GFD's ``nvidia.com/gpu.count`` counts MIG devices, as the
    status does."""
    toleration = "[{key: nvidia.com/gpu, operator: Exists}]"
    mixed_status = "status:\n  allocatable: {nvidia.com/gpu: '1', nvidia.com/mig-1g.10gb: '7'}"
    model = model_of(
        node("mixed", "{pool: mixed, sku: mixed, nvidia.com/mig.strategy: mixed}", mixed_status),
        node(
            "sliced",
            '{pool: sliced, sku: sliced, nvidia.com/gpu.replicas: "4"}',
            "status:\n  allocatable: {nvidia.com/gpu: '32'}",
        ),
        node(
            "single",
            '{pool: single, nvidia.com/gpu.count: "7", nvidia.com/mig.strategy: single, '
            "nvidia.com/mig.config: all-1g.10gb}",
            "status:\n  allocatable: {nvidia.com/gpu: '7'}",
        ),
        pod("four", "{sku: mixed}", toleration, "nvidia.com/gpu", 4),
    )
    assert node_facts(model, "mixed")["gpuCount"] == 1
    assert node_facts(model, "sliced")["gpuCount"] == 8
    assert node_facts(model, "single")["gpuCount"] == 7
    four = next(w.facts for w in model.workloads if w.obj.name == "four")
    assert four["targets"][0]["perNode"] == {"nvidia.com/gpu": 1}
    assert four["diagnosis"] == "asks for 4 GPUs in one container; the largest node has 1"


def test_a_live_node_with_every_gpu_split_offers_no_whole_gpu() -> None:
    """GFD labels both nodes with their 8 GPUs; one has split them all into slices, so
    whole GPUs are found on the other only (its one unsplit GPU)."""
    toleration = "[{key: nvidia.com/gpu, operator: Exists}]"
    labels = '{pool: mixed, sku: mixed, nvidia.com/mig.strategy: mixed, nvidia.com/gpu.count: "8"}'
    model = model_of(
        node(
            "split",
            labels,
            "status:\n  allocatable: {nvidia.com/gpu: '0', nvidia.com/mig-3g.40gb: '16'}",
        ),
        node(
            "one-left",
            labels,
            "status:\n  allocatable: {nvidia.com/gpu: '1', nvidia.com/mig-3g.40gb: '14'}",
        ),
        pod("four", "{sku: mixed}", toleration, "nvidia.com/gpu", 4),
    )
    four = next(w.facts for w in model.workloads if w.obj.name == "four")
    assert four["targets"][0]["perNode"] == {"nvidia.com/gpu": 1}
    assert four["diagnosis"] == "asks for 4 GPUs in one container; the largest node has 1"


def test_cluster_policy_mig_strategy_overrides_the_plugin_config_file() -> None:
    """The GPU Operator passes ClusterPolicy ``spec.mig.strategy`` to the device plugin
    as ``MIG_STRATEGY``, and the plugin takes a flag or environment variable over its
    config file's ``flags.migStrategy``. Without the operator's plugin (devicePlugin
    disabled) the config file decides."""
    config_map = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dp, namespace: gpu-operator}\n"
        "data:\n  a100: |\n    version: v1\n    flags:\n      migStrategy: single\n"
    )
    mig_node = node("a100", "{pool: p, nvidia.com/mig.config: all-1g.10gb}")

    def policy(plugin: str) -> str:
        return (
            "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\n"
            "spec:\n  mig: {strategy: mixed}\n"
            f"  devicePlugin: {{{plugin}config: {{name: dp, default: a100}}}}\n"
        )

    facts = node_facts(model_of(policy(""), config_map, mig_node), "a100")
    assert facts["migStrategy"] == "mixed"
    assert facts["advertises"] == ["nvidia.com/mig-1g.10gb"]
    facts = node_facts(model_of(policy("enabled: false, "), config_map, mig_node), "a100")
    assert facts["migStrategy"] == "single"
    assert facts["advertises"] == ["nvidia.com/gpu"]


def test_a_selection_reaching_no_gpu_pool_names_the_nodes_it_matches() -> None:
    """``nonGpuMatches``: where a GPU workload that selects no GPU pool would land,
    taints aside (PG105 names them): pools by label, declarations by name, unpooled
    Nodes by name; nothing when the selection matches no node at all."""
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: ml}}\n"
        "spec:\n  template:\n    spec:\n      nodeSelector: {selector}\n"
        "      containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"
    )
    model = model_of(
        node("gpu-1", '{pool: gpu, nvidia.com/gpu.present: "true"}'),
        node("cpu-1", "{pool: general, tier: batch}"),
        node("cpu-2", "{pool: general, tier: batch}"),
        node("loose", "{tier: batch}"),
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: spot}\n"
        "spec:\n  template:\n    metadata:\n      labels: {tier: batch}\n",
        deployment.format(name="batch", selector="{tier: batch}"),
        deployment.format(name="gpu", selector="{pool: gpu}"),
        deployment.format(name="nowhere", selector="{pool: b200}"),
    )
    matches = {w.obj.name: w.facts["nonGpuMatches"] for w in model.workloads}
    assert matches == {
        "batch": ["Node/loose", "NodePool/spot", "pool general"],
        "gpu": [],
        "nowhere": [],
    }


def test_a_helm_plugin_config_applies_its_fallback_key_to_unlabelled_nodes() -> None:
    """The device plugin's Helm chart runs its config manager with the fallback
    strategies ``named`` then ``single``: a node without the
    ``nvidia.com/device-plugin.config`` label uses the key ``default``, else the only
    key (found in review: the pool was taken as exclusive, so PG106 refused
    ``nvidia.com/gpu.shared`` and PG201 never ran). The GPU Operator's plugin has no
    fallback: with a ClusterPolicy naming no default, nothing is assumed."""
    time_slicing = (
        "version: v1\n    sharing:\n      timeSlicing:\n        renameByDefault: true\n"
        "        resources: [{name: nvidia.com/gpu, replicas: 4}]\n"
    )

    def config_map(*keys: str) -> str:
        data = "".join(f"  {key}: |\n    {time_slicing}" for key in keys)
        return (
            "apiVersion: v1\nkind: ConfigMap\n"
            "metadata: {name: nvdp-configs, namespace: nvidia-device-plugin}\n"
            f"data:\n{data}"
        )

    gpu_node = node("l4", '{pool: p, nvidia.com/gpu.present: "true"}')
    for keys in (("default", "other"), ("only",)):
        facts = node_facts(model_of(config_map(*keys), gpu_node), "l4")
        assert (facts["sharing"], facts["advertises"]) == (
            "time-slicing",
            ["nvidia.com/gpu.shared"],
        ), keys
    facts = node_facts(model_of(config_map("a", "b"), gpu_node), "l4")
    assert facts["sharing"] == "exclusive"  # two keys, none named default: no fallback
    policy = (
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\n"
        "spec:\n  devicePlugin: {config: {name: nvdp-configs}}\n"
    )
    facts = node_facts(model_of(policy, config_map("default"), gpu_node), "l4")
    assert facts["sharing"] == "exclusive"
    # A ClusterPolicy that does not run the plugin leaves it to the Helm chart.
    disabled = policy.replace("{config: {name: nvdp-configs}}", "{enabled: false}")
    facts = node_facts(model_of(disabled, config_map("default"), gpu_node), "l4")
    assert facts["sharing"] == "time-slicing"


def test_naming_non_gpu_matches_does_not_check_every_node_for_every_selection(
    monkeypatch: Any,
) -> None:
    """Found in review: 3,000 GPU pods pinned by hostname to nodes that do not exist, on
    5,000 CPU nodes, made 15 million selector checks (46 s instead of 5 s). Nodes are
    looked up by the label values a selection requires; counted, not timed."""
    from scanner.model import pools

    calls = 0
    real = pools.selects

    def counted(*args: Any, **kwargs: Any) -> bool:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pools, "selects", counted)
    cpu = [node(f"cpu-{i}", f"{{kubernetes.io/hostname: cpu-{i}}}") for i in range(600)]
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{0}, namespace: ml}}\n"
        "spec:\n  nodeSelector: {{kubernetes.io/hostname: {1}}}\n"
        "  containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"
    )
    pods = [pod.format(i, "cpu-7" if i == 0 else f"nowhere-{i}") for i in range(300)]
    gpu = node("gpu-1", '{pool: gpu, nvidia.com/gpu.present: "true"}')
    model = model_of(gpu, *cpu, *pods)
    matches = {w.obj.name: w.facts["nonGpuMatches"] for w in model.workloads}
    assert matches["p0"] == ["Node/cpu-7"] and matches["p1"] == []
    assert calls < 5_000  # 300 selections x 600 nodes would be 180,000


def test_a_selection_of_a_pool_declared_outside_the_scan_leaves_its_pools_unknown() -> None:
    """A label no node or declaration in scope carries (issue 24: pools declared
    outside the scan); one some declaration carries decides."""
    karpenter = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: h100}
spec:
  template:
    metadata: {labels: {sku: h100}}
    spec:
      requirements:
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: In, values: ["8"]}
"""
    model = model_of(
        karpenter,
        pod("gke", "{cloud.google.com/gke-nodepool: l4}", "[]", "nvidia.com/gpu", 1),
        pod("custom", "{acme.io/pool: research}", "[]", "nvidia.com/gpu", 1),
        pod("typo", "{sku: b200}", "[]", "nvidia.com/gpu", 1),
        pod("karpenter", "{karpenter.k8s.aws/instance-gpu-name: h100}", "[]", "nvidia.com/gpu", 1),
        pod("os", "{kubernetes.io/os: linux}", "[]", "nvidia.com/gpu", 1),
    )
    known = {w.obj.name: w.facts["poolsKnown"] for w in model.workloads}
    assert known == {
        "gke": False,
        "custom": False,
        "typo": True,
        "karpenter": True,  # Karpenter is in scope: its runtime labels are undecided
        "os": True,
    }


def test_a_live_cluster_shows_every_node_so_no_pool_is_outside() -> None:
    """An audit: a selection of a label no Node carries selects nothing."""
    nodes = node("n", '{pool: h100, sku: h100, nvidia.com/gpu.present: "true"}')
    workload = pod("custom", "{acme.io/pool: research}", "[]", "nvidia.com/gpu", 1)
    live = build_model(
        parse_stream("---\n".join([nodes, workload]), "cluster://prod/x", source_type="cluster"),
        Config(),
        read_yaml=parse_plain,
    )
    [facts] = [w.facts for w in live.workloads]
    assert facts["poolsKnown"] and facts["targets"] == []
    assert not model_of(nodes, workload).workloads[0].facts["poolsKnown"]
