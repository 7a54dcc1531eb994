"""Node-pool providers (``scanner.model.providers``): each reads its declaration into
the one ``Declaration`` shape, and ``scanner.model.nodes`` makes node facts of it."""

from __future__ import annotations

from scanner.config.values import Config
from scanner.inventory import KubeObject
from scanner.model import build_model
from scanner.model.facts import NodeFacts
from scanner.model.index import ObjectIndex
from scanner.model.providers import clusterapi, gke, karpenter
from scanner.sources.yaml.document import parse_plain, parse_stream

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: h100}
spec:
  template:
    metadata:
      labels: {pool: h100, karpenter.sh/nodepool: written}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [p5]}
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: In, values: ["8"]}
        - {key: kubernetes.io/arch, operator: NotIn, values: [arm64]}
"""
EC2NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: gpu}
spec:
  metadataOptions: {httpPutResponseHopLimit: 2, httpTokens: optional}
"""
CONTAINERNODEPOOL = """\
apiVersion: container.cnrm.cloud.google.com/v1beta1
kind: ContainerNodePool
metadata: {name: a100, namespace: infra}
spec:
  resourceID: a100-pool
  nodeConfig:
    labels: {pool: a100}
    taint: [{key: dedicated, value: ml, effect: NO_EXECUTE}]
    oauthScopes: [https://www.googleapis.com/auth/cloud-platform]
    workloadMetadataConfig: {mode: GKE_METADATA}
    guestAccelerator:
      - type: nvidia-tesla-a100
        count: 2
        gpuPartitionSize: 1g.5gb
        gpuSharingConfig: {gpuSharingStrategy: TIME_SHARING, maxSharedClientsPerGpu: 4}
"""
MACHINEDEPLOYMENT = """\
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: l4
  namespace: infra
  annotations: {capacity.cluster-autoscaler.kubernetes.io/gpu-count: "4"}
spec:
  template:
    metadata:
      labels: {pool: l4}
    spec:
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""


def objects(*documents: str) -> list[KubeObject]:
    return parse_stream("---\n".join(documents), "pools.yaml").objects


def node_facts(*documents: str) -> dict[str, NodeFacts]:
    model = build_model(
        parse_stream("---\n".join(documents), "pools.yaml"), Config(), read_yaml=parse_plain
    )
    return {obj.name: facts for obj, facts in model.nodes}


def test_karpenter_reads_requirements_and_the_node_class() -> None:
    pool, node_class = objects(NODEPOOL, EC2NODECLASS)
    declared = karpenter.declare(pool, ObjectIndex([pool, node_class]))
    assert declared.gpu and declared.gpu_count == 8
    assert declared.labels == {"pool": ["h100"], "karpenter.sh/nodepool": ["written"]}
    assert declared.provider_labels == {
        "karpenter.sh/nodepool": ["h100"],
        "karpenter.k8s.aws/instance-family": ["p5"],
        "karpenter.k8s.aws/instance-gpu-count": ["8"],
    }  # NotIn is no label its nodes carry
    assert declared.taints == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    identity = declared.identity
    assert (identity["provider"], identity["known"], identity["hopLimit"]) == ("aws", True, 2)
    assert identity["httpTokens"] == "optional"
    assert identity["ref"] == "EC2NodeClass/gpu"


def test_karpenter_without_its_node_class_has_an_unknown_identity() -> None:
    [pool] = objects(NODEPOOL)
    identity = karpenter.declare(pool, ObjectIndex([pool])).identity
    assert (identity["provider"], identity["known"], identity["ref"]) == ("aws", False, "")


def test_karpenter_gpu_signals() -> None:
    def gpu(requirement: str) -> bool:
        text = NODEPOOL.split("      requirements:")[0] + f"      requirements: [{requirement}]\n"
        [pool] = objects(text)
        return karpenter.declare(pool, ObjectIndex([pool])).gpu

    assert gpu("{key: karpenter.k8s.aws/instance-gpu-count, operator: Gt, values: ['0']}")
    assert gpu("{key: karpenter.k8s.aws/instance-gpu-name, operator: Exists}")
    assert gpu("{key: karpenter.k8s.aws/instance-gpu-manufacturer, operator: In, values: [nvidia]}")
    assert gpu("{key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge]}")
    assert gpu("{key: karpenter.k8s.aws/instance-category, operator: In, values: [p]}")
    assert not gpu("{key: karpenter.k8s.aws/instance-family, operator: In, values: [g4ad]}")
    assert not gpu(
        "{key: karpenter.k8s.aws/instance-gpu-manufacturer, operator: In, values: [amd]}"
    )


def test_gke_reads_accelerators_sharing_and_identity() -> None:
    [pool] = objects(CONTAINERNODEPOOL)
    declared = gke.declare(pool, ObjectIndex([pool]))
    assert declared.gke and declared.gpu and declared.gpu_count == 2
    assert declared.taints == [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]
    assert declared.implicit_taints == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert declared.provider_labels == {
        "cloud.google.com/gke-nodepool": ["a100-pool"],
        "cloud.google.com/gke-accelerator": ["nvidia-tesla-a100"],
        "cloud.google.com/gke-gpu-partition-size": ["1g.5gb"],
        "cloud.google.com/gke-gpu-sharing-strategy": ["time-sharing"],
        "cloud.google.com/gke-max-shared-clients-per-gpu": ["4"],
    }
    assert (declared.sharing, declared.mig_profile) == ("time-sharing", "1g.5gb")
    identity = declared.identity
    assert (identity["provider"], identity["metadataMode"], identity["broadScopes"]) == (
        "gcp",
        "GKE_METADATA",
        True,
    )


def test_cluster_api_gpus_come_from_the_autoscaler_annotation() -> None:
    [deployment] = objects(MACHINEDEPLOYMENT)
    declared = clusterapi.declare(deployment, ObjectIndex([deployment]))
    assert (declared.gpu, declared.gpu_count) == (True, 4)
    assert declared.provider_labels == {"cluster.x-k8s.io/deployment-name": ["l4"]}
    assert declared.taints == [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]
    assert declared.identity["known"] is False


def test_declarations_become_node_facts() -> None:
    facts = node_facts(NODEPOOL, EC2NODECLASS, CONTAINERNODEPOOL, MACHINEDEPLOYMENT)
    assert set(facts) == {"h100", "a100", "l4"}
    h100, a100, l4 = facts["h100"], facts["a100"], facts["l4"]
    for declared in (h100, a100, l4):
        assert declared["source"] == "declaration" and declared["gpu"]
        assert declared["pool"] == declared["name"]  # a declaration is its own pool
    # A label the declaration writes wins over the provider's own.
    assert h100["labels"]["karpenter.sh/nodepool"] == ["written"]
    assert (h100["gpuCount"], h100["identity"]["hopLimit"], h100["gke"]) == (8, 2, False)
    assert h100["taintsPath"] == "spec.template.spec.taints"
    assert h100["devicePluginConfigPath"] == (
        "spec.template.metadata.labels['nvidia.com/device-plugin.config']"
    )
    assert a100["gke"] and a100["sharing"] == "mig+time-slicing"
    assert a100["migProfiles"] == ["1g.5gb"] and a100["advertises"] == ["nvidia.com/gpu"]
    assert a100["taints"][-1] == {
        "key": "nvidia.com/gpu",
        "value": "present",
        "effect": "NoSchedule",
    }
    assert a100["implicitTaints"] == a100["taints"][-1:]
    assert a100["taintsPath"] == "spec.nodeConfig.taint"
    assert (l4["gpuCount"], l4["sharing"], l4["implicitTaints"]) == (4, "exclusive", [])


def test_a_declaration_without_gpus_is_no_pool() -> None:
    text = MACHINEDEPLOYMENT.replace('"4"', '"0"')
    model = build_model(parse_stream(text, "pools.yaml"), Config(), read_yaml=parse_plain)
    [(_, facts)] = model.nodes
    assert not facts["gpu"] and model.pools == []


def _bottlerocket(user_data: str) -> str:
    indented = "".join(f"    {line}\n" for line in user_data.splitlines())
    return EC2NODECLASS + "  userData: |\n" + indented


TIME_SLICING = """\
[settings.kubelet-device-plugins.nvidia]
device-sharing-strategy = "time-slicing"

[settings.kubelet-device-plugins.nvidia.time-slicing]
replicas = 4
rename-by-default = true
fail-requests-greater-than-one = true
"""


def test_bottlerocket_time_slicing_in_the_node_class_shares_the_pool() -> None:
    """Issue 24, item 7: sharing set outside device-plugin ConfigMaps is a sharing mode."""
    node = node_facts(NODEPOOL, _bottlerocket(TIME_SLICING))["h100"]
    assert node["sharing"] == "time-slicing"
    assert (node["replicas"], node["oneShare"], node["renameShared"]) == (4, True, True)
    assert node["advertises"] == ["nvidia.com/gpu.shared"]
    [(node_class, config)] = [
        (obj, facts)
        for obj, facts in build_model(
            parse_stream("---\n".join((NODEPOOL, _bottlerocket(TIME_SLICING))), "p.yaml"),
            read_yaml=parse_plain,
        ).sharing_configs
    ]
    assert node_class.kind == "EC2NodeClass"
    [entry] = config["entries"]
    assert (entry["mode"], entry["renameByDefault"], entry["failRequestsGreaterThanOne"]) == (
        "time-slicing",
        True,
        True,
    )
    # The block starts on the line after userData: the table, then its keys.
    data = node_class.position("spec.userData")[0]
    assert (entry["line"], entry["renameLine"], entry["failLine"]) == (data + 1, data + 6, data + 7)
    assert config["resources"][0]["replicas"] == 4


def test_bottlerocket_mps_and_defaults() -> None:
    mps = '[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = "mps"\n'
    node = node_facts(NODEPOOL, _bottlerocket(mps))["h100"]
    assert (node["sharing"], node["oneShare"]) == ("mps", True)
    # Defaults: rename-by-default and fail-requests-greater-than-one are false.
    bare = TIME_SLICING.replace("rename-by-default = true\n", "").replace(
        "fail-requests-greater-than-one = true\n", ""
    )
    node = node_facts(NODEPOOL, _bottlerocket(bare))["h100"]
    assert (node["sharing"], node["oneShare"], node["renameShared"]) == (
        "time-slicing",
        False,
        False,
    )
    assert node["advertises"] == ["nvidia.com/gpu"]


def test_bottlerocket_settings_that_share_nothing_or_do_not_parse_leave_the_pool_exclusive() -> (
    None
):
    for user_data in (
        TIME_SLICING.replace('"time-slicing"', '"none"'),  # the table alone does nothing
        TIME_SLICING.replace("replicas = 4", "replicas = 1"),
        TIME_SLICING.replace("replicas = 4", 'replicas = "4"'),
        TIME_SLICING.replace("replicas = 4", "replicas = ["),  # not TOML
        "#!/bin/bash\n# kubelet-device-plugins\necho hi\n",  # an AL2 script
        "[settings.kubelet-device-plugins.nvidia]\nx = " + "[" * 5000 + "]" * 5000 + "\n",
    ):
        node = node_facts(NODEPOOL, _bottlerocket(user_data))["h100"]
        assert node["sharing"] == "exclusive", user_data[:80]


def test_bottlerocket_user_data_past_the_limit_is_not_parsed() -> None:
    from scanner.model.providers import bottlerocket

    padding = "# " + "x" * bottlerocket.MAX_USER_DATA + "\n"
    node = node_facts(NODEPOOL, _bottlerocket(padding + TIME_SLICING))["h100"]
    assert node["sharing"] == "exclusive"


def test_gke_sharing_on_any_accelerator_shares_the_pool() -> None:
    second = CONTAINERNODEPOOL.replace(
        "      - type: nvidia-tesla-a100\n        count: 2\n        gpuPartitionSize: 1g.5gb\n"
        "        gpuSharingConfig: {gpuSharingStrategy: TIME_SHARING, maxSharedClientsPerGpu: 4}\n",
        "      - {type: nvidia-tesla-a100, count: 2}\n"
        "      - type: nvidia-tesla-a100\n        count: 2\n"
        "        gpuSharingConfig: {gpuSharingStrategy: MPS, maxSharedClientsPerGpu: 4}\n",
    )
    assert second != CONTAINERNODEPOOL
    node = node_facts(second)["a100"]
    assert node["sharing"] == "mps"
    assert node["labels"]["cloud.google.com/gke-gpu-sharing-strategy"] == ["mps"]
