"""NVIDIA_VISIBLE_DEVICES as Kubernetes resolves it, and the toolkit hardening (PG307)."""

from __future__ import annotations

from typing import Any

import pytest

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.visibledevices import (
    attach_visible_devices,
    container_setting,
    envvar_ignored,
)
from scanner.model.workloads import build_workloads


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def pod(*containers: dict[str, Any]) -> KubeObject:
    return obj(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": list(containers)},
        }
    )


def config_map(data: dict[str, Any], name: str = "env") -> KubeObject:
    return obj(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team"},
            "data": data,
        }
    )


def cluster_policy(toolkit: list[Any], plugin: list[Any], api: str = "nvidia.com/v1") -> KubeObject:
    return obj(
        {
            "apiVersion": api,
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"toolkit": {"env": toolkit}, "devicePlugin": {"env": plugin}},
        }
    )


def visible(*objects: KubeObject) -> list[dict[str, Any]]:
    index = ObjectIndex(objects)
    workloads, _ = build_workloads(objects, index)
    attach_visible_devices(workloads, index)
    return [entry for w in workloads for entry in w.facts["visibleDevices"]]


def test_env_wins_over_env_from_and_the_last_entry_wins() -> None:
    found = visible(
        config_map({"NVIDIA_VISIBLE_DEVICES": "void"}),
        pod(
            {
                "name": "c",
                "envFrom": [{"configMapRef": {"name": "env"}}],
                "env": [
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                ],
            }
        ),
    )
    assert [(f["container"], f["value"], f["path"]) for f in found] == [
        ("c", "all", "spec.containers[0].env[1].value")
    ]


def test_a_later_env_from_source_not_seen_leaves_the_value_unjudged() -> None:
    container = {
        "name": "c",
        "path": "spec.containers[0]",
        "envFrom": [{"configMapRef": {"name": "env"}}, {"secretRef": {"name": "s"}}],
    }
    index = ObjectIndex([config_map({"NVIDIA_VISIBLE_DEVICES": "all"})])
    assert container_setting(container, "team", index) is None
    container["envFrom"] = [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "env"}}]
    assert container_setting(container, "team", index) == ("all", "spec.containers[0].envFrom[1]")


@pytest.mark.parametrize(
    "env",
    [
        "not a list",
        [None, 3, "x", {"name": 5, "value": "all"}],
        [{"name": "NVIDIA_VISIBLE_DEVICES", "value": 3}],
        [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": "x"}],
        [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": ["x"]}}}],
    ],
)
def test_malformed_env_is_not_judged(env: object) -> None:
    assert visible(config_map({"x": "all"}), pod({"name": "c", "env": env})) == []


@pytest.mark.parametrize(
    ("toolkit", "plugin", "api", "ignored"),
    [
        ("false", "volume-mounts", "nvidia.com/v1", True),
        (False, "envvar, volume-mounts", "nvidia.com/v1", True),
        ("true", "volume-mounts", "nvidia.com/v1", False),
        ("false", "envvar", "nvidia.com/v1", False),
        ("false", "volume-mounts", "kyverno.io/v1", False),  # Kyverno's ClusterPolicy
    ],
)
def test_hardened_toolkit(toolkit: object, plugin: str, api: str, ignored: bool) -> None:
    policy = cluster_policy(
        [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": toolkit}],
        [{"name": "DEVICE_LIST_STRATEGY", "value": plugin}],
        api,
    )
    assert envvar_ignored(ObjectIndex([policy])) is ignored
    assert envvar_ignored(ObjectIndex([])) is False
