"""Named kind sets, and where each pod-template kind keeps its pod spec.

Rules match on these names (``match.kinds``) and the model uses the paths, so
no rule ever switches on kinds itself.
"""

from __future__ import annotations

POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
}
"""Pod-template-bearing core kinds -> the keys leading to their pod spec."""

WORKLOAD_KINDS: frozenset[str] = frozenset(POD_SPEC_PATHS)

CONTAINER_FIELDS: tuple[tuple[str, str], ...] = (
    ("initContainers", "initContainer"),
    ("containers", "container"),
    ("ephemeralContainers", "ephemeralContainer"),
)
"""Pod spec list fields holding containers, with the type name the model exposes."""
