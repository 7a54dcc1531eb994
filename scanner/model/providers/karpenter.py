"""Karpenter ``NodePool`` (``karpenter.sh``), with its AWS ``EC2NodeClass``.

Labels are ``spec.template.metadata.labels``, taints ``spec.template.spec.taints``,
and each requirement ``key In [values]`` is a label its nodes carry. Its nodes have
GPUs when a requirement asks for them (``karpenter.k8s.aws/instance-gpu-count``,
``-gpu-name``, ``-gpu-manufacturer In nvidia``), selects only EC2 instances with
NVIDIA GPUs, or its ``limits`` name a GPU resource. The node identity comes from the
``EC2NodeClass`` its template names: the instance metadata options; and so does GPU
sharing configured in Bottlerocket's user data (``scanner.model.providers.bottlerocket``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from scanner.inventory import KubeObject, as_mapping
from scanner.model.index import ObjectIndex
from scanner.model.providers import bottlerocket
from scanner.model.providers.declaration import Declaration, items, string_lists, taint, text
from scanner.model.quantity import positive_count
from scanner.model.selectors import label_value
from scanner.model.workloads import GPU_RESOURCE

AWS_NVIDIA_FAMILIES: Final = frozenset(
    {
        *("p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6e-gb200"),
        *("g3", "g3s", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f"),
    }
)
"""EC2 instance families with NVIDIA GPUs (not g4ad: AMD; not inf, trn, dl: other
accelerators). Karpenter's own GPU examples select them by family."""


def declare(obj: KubeObject, index: ObjectIndex) -> Declaration:
    spec = as_mapping(obj.body.get("spec"))
    template = as_mapping(spec.get("template"))
    node_spec = as_mapping(template.get("spec"))
    found = Declaration(
        labels=string_lists(as_mapping(template.get("metadata")).get("labels")),
        labels_path="spec.template.metadata.labels",
        taints=[taint(t) for t in items(node_spec.get("taints"))],
        taints_path="spec.template.spec.taints",
        provider_labels={"karpenter.sh/nodepool": [obj.name]},
    )
    for requirement in items(node_spec.get("requirements")):
        _require(found, as_mapping(requirement))
    limits = as_mapping(spec.get("limits"))
    if any(isinstance(k, str) and GPU_RESOURCE.match(k) for k in limits):
        found.gpu = True
    found.identity["provider"] = "aws"
    node_class = text(as_mapping(node_spec.get("nodeClassRef")).get("name"))
    ec2 = index.get("EC2NodeClass", "", node_class) if node_class else None
    if ec2 is not None:
        _metadata_options(found.identity, ec2)
        shared = bottlerocket.sharing(ec2)
        if shared is not None:
            found.sharing = shared.mode
            found.replicas = shared.replicas
            found.rename_shared = shared.rename
            found.one_share = shared.mode == "mps" or shared.fail_requests
    else:
        found.identity["known"] = False
    return found


def _require(found: Declaration, requirement: Any) -> None:
    """One node requirement: a label its nodes carry, and what it says about GPUs."""
    key, operator = text(requirement.get("key")), requirement.get("operator")
    values = [label_value(v) for v in items(requirement.get("values"))]
    if operator == "In" and key:
        found.provider_labels.setdefault(key, values)
    if key == "karpenter.k8s.aws/instance-gpu-count":
        if operator == "Gt" and values:  # more than N GPUs: at least one
            found.gpu = True
        elif operator == "In" and any(positive_count(v) > 0 for v in values):
            found.gpu = True
            found.gpu_count = max(positive_count(v) for v in values)
    if key == "karpenter.k8s.aws/instance-gpu-name" and operator in ("In", "Exists"):
        found.gpu = True
    if (
        key == "karpenter.k8s.aws/instance-gpu-manufacturer"
        and operator == "In"
        and "nvidia" in values
    ):
        found.gpu = True
    if operator == "In" and _nvidia_instances(key, values):
        found.gpu = True


def _metadata_options(identity: dict[str, Any], ec2: KubeObject) -> None:
    """The node identity of an ``EC2NodeClass``: its instance metadata options."""
    options = as_mapping(as_mapping(ec2.body.get("spec")).get("metadataOptions"))
    hop = options.get("httpPutResponseHopLimit")
    identity["hopLimit"] = hop if isinstance(hop, int) and not isinstance(hop, bool) else 1
    identity["ref"] = ec2.ref.logical_name
    identity["path"] = (
        "spec.metadataOptions.httpPutResponseHopLimit"
        if "httpPutResponseHopLimit" in options
        else "spec"
    )
    # Karpenter's default is required (IMDSv2 only); optional keeps IMDSv1,
    # which the hop limit does not guard (it limits the token's PUT response).
    tokens = options.get("httpTokens")
    identity["httpTokens"] = tokens if isinstance(tokens, str) and tokens else "required"
    identity["tokensPath"] = (
        "spec.metadataOptions.httpTokens" if "httpTokens" in options else "spec"
    )
    # httpEndpoint disabled: nothing on the node reaches the metadata service,
    # whatever the hop limit and tokens say (AWS InstanceMetadataOptions).
    identity["endpoint"] = "disabled" if options.get("httpEndpoint") == "disabled" else ""
    identity["known"] = True


def _nvidia_instances(key: str, values: Sequence[str]) -> bool:
    """Whether a Karpenter requirement ``key In values`` admits only EC2 instances with
    NVIDIA GPUs: families (``g5``), types (``p4d.24xlarge``), or the ``p`` category."""
    if not values:
        return False
    if key == "karpenter.k8s.aws/instance-family":
        return all(value in AWS_NVIDIA_FAMILIES for value in values)
    if key == "node.kubernetes.io/instance-type":
        return all(value.partition(".")[0] in AWS_NVIDIA_FAMILIES for value in values)
    if key == "karpenter.k8s.aws/instance-category":
        return all(value == "p" for value in values)
    return False
