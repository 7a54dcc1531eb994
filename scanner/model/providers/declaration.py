"""What a node-pool declaration says about its nodes: every provider's one shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scanner.inventory import as_mapping
from scanner.model.records import Taint
from scanner.model.selectors import label_value


def unknown_identity() -> dict[str, Any]:
    """``node.identity`` before a provider fills it in: nothing known."""
    return {
        "provider": "",
        "known": False,
        "metadataMode": "",
        "hopLimit": 0,
        "httpTokens": "",
        "tokensPath": "",
        "broadScopes": False,
        "path": "",
        "scopesPath": "",
        "ref": "",
    }


@dataclass(slots=True)
class Declaration:
    """One declaration's nodes, as its provider reads them."""

    labels: dict[str, list[str]]
    """The labels it declares for its nodes: key -> the values they may carry."""
    labels_path: str
    taints: list[Taint]
    taints_path: str
    provider_labels: dict[str, list[str]] = field(default_factory=dict)
    """Labels the provider gives its nodes itself (``karpenter.sh/nodepool``), in the
    order they are added; a declared label of the same key wins."""
    implicit_taints: list[Taint] = field(default_factory=list)
    """Taints the provider adds itself (GKE's ``nvidia.com/gpu`` taint)."""
    gpu: bool = False
    gpu_count: int = 0
    identity: dict[str, Any] = field(default_factory=unknown_identity)
    sharing: str = ""
    """A GPU sharing strategy the provider configures (``time-sharing``, ``mps``,
    ``time-slicing``)."""
    replicas: int = 0
    """Replicas per GPU when its node labels do not say (Bottlerocket settings)."""
    rename_shared: bool = False
    """Shared replicas are advertised as ``nvidia.com/gpu.shared``."""
    one_share: bool = False
    """One container gets one replica at most (MPS, fail-requests-greater-than-one)."""
    mig_profile: str = ""
    """The MIG profile the provider partitions its GPUs into."""
    gke: bool = False
    """GKE: its own GPU taint is tolerated for GPU pods, and it advertises slices and
    shares as ``nvidia.com/gpu``."""


def taint(value: object) -> Taint:
    """A Kubernetes taint as written."""
    written = as_mapping(value)
    return {
        "key": text(written.get("key")),
        "value": label_value(written.get("value")),
        "effect": text(written.get("effect")),
    }


def string_lists(value: object) -> dict[str, list[str]]:
    """A label map as node facts hold labels: key -> [value]."""
    return {str(k): [label_value(v)] for k, v in as_mapping(value).items()}


def items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: object) -> str:
    return value if isinstance(value, str) else ""
