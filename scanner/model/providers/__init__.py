"""Node-pool providers: the objects that declare the nodes to come, one file each.

Manifest repositories have no Nodes; they declare node pools (docs/platform-model.md,
"GPU nodes"). A provider reads one declaration object into a ``Declaration``: the
labels and taints its nodes get, the labels the provider adds itself, whether its
nodes have GPUs and how many, and the node identity; ``scanner.model.nodes`` turns it
into the same ``node`` facts a Node has. Adding a provider is one file here with a
``declare`` function, its ``Provider`` (kind, group, the kinds its facts are joined
from) in ``scanner.model.factkinds.PROVIDERS``, its API resource in
``scanner.kinds.resources``, and its line in ``DECLARE`` below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from scanner.inventory import KubeObject
from scanner.model import factkinds
from scanner.model.index import ObjectIndex
from scanner.model.providers import clusterapi, gke, karpenter
from scanner.model.providers.declaration import Declaration

Declare = Callable[[KubeObject, ObjectIndex], Declaration]
"""What a provider's nodes are, read from its declaration object (and the objects it
refers to, through the index)."""

DECLARE: Final[Mapping[factkinds.Provider, Declare]] = {
    factkinds.KARPENTER: karpenter.declare,
    factkinds.GKE: gke.declare,
    factkinds.CLUSTER_API: clusterapi.declare,
}
"""Each provider of ``scanner.model.factkinds.PROVIDERS`` and its reader, in that order."""
