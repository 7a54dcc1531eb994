"""Weight buckets: mounts joined with declarations (PG405, PG406), and hostile shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scanner.config.values import Config, Require
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.buckets import attach_buckets, declarations
from scanner.model.index import ObjectIndex
from scanner.model.workloads import build_workloads
from scanner.pipeline import ScanOptions, load_ruleset, scan_paths


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def pod(volumes: Any, namespace: str | None = "ml") -> KubeObject:
    meta: dict[str, Any] = {"name": "p"}
    if namespace is not None:
        meta["namespace"] = namespace
    return obj(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"containers": [{"name": "c"}], "volumes": volumes},
        }
    )


def buckets(*objects: KubeObject) -> list[dict[str, Any]]:
    index = ObjectIndex(objects)
    workloads, _ = build_workloads(objects, index)
    attach_buckets(workloads, index)
    return [b for w in workloads for b in w.facts["weightBuckets"]]


def gcs(name: str, spec: Any) -> KubeObject:
    return obj(
        {
            "apiVersion": "storage.cnrm.cloud.google.com/v1beta1",
            "kind": "StorageBucket",
            "metadata": {"name": name, "namespace": "infra"},
            "spec": spec,
        }
    )


def csi(bucket: Any, driver: str = "gcsfuse.csi.storage.gke.io") -> dict[str, Any]:
    return {"name": "w", "csi": {"driver": driver, "volumeAttributes": {"bucketName": bucket}}}


def test_a_claim_without_namespace_binds_a_pv_whose_claim_ref_has_none() -> None:
    pv = obj(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv"},
            "spec": {
                "claimRef": {"name": "weights"},
                "csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeHandle": "b"},
            },
        }
    )
    volume = {"name": "w", "persistentVolumeClaim": {"claimName": "weights"}}
    found = buckets(gcs("b", {}), pv, pod([volume], namespace=None))
    assert [(b["bucket"], b["via"], b["declared"], b["cmek"]) for b in found] == [
        ("b", "pvc", True, False)
    ]
    assert found[0]["path"] == "spec.volumes[0].persistentVolumeClaim"


def test_resource_id_names_the_bucket_and_grants_join_by_object_name() -> None:
    member = obj(
        {
            "apiVersion": "iam.cnrm.cloud.google.com/v1beta1",
            "kind": "IAMPartialPolicy",
            "metadata": {"name": "grants", "namespace": "infra"},
            "spec": {
                "resourceRef": {"kind": "StorageBucket", "name": "weights"},
                "bindings": [{"members": [{"member": "user:a@x"}, {"member": "allUsers"}]}],
            },
        }
    )
    spec = {"resourceID": "acme-weights", "publicAccessPrevention": "enforced"}
    [found] = buckets(gcs("weights", spec), member, pod([csi("acme-weights")]))
    assert [r["path"] for r in found["public"]] == ["spec.bindings[0].members[1].member"]


@pytest.mark.parametrize(
    "volumes",
    [
        "not a list",
        [None, 3, {"csi": "x"}, {"csi": {"driver": 5}}, csi(["b"]), csi(None)],
        [{"persistentVolumeClaim": {"claimName": ["x"]}}],
        [csi("b", driver="other.csi.example.com")],
    ],
)
def test_hostile_or_unrelated_volumes_mount_nothing(volumes: Any) -> None:
    assert buckets(gcs("b", {}), pod(volumes)) == []


@pytest.mark.parametrize(
    "spec",
    [None, "x", {"encryption": "x", "publicAccessPrevention": ["enforced"]}],
)
def test_a_malformed_declaration_is_judged_by_what_it_fails_to_say(spec: Any) -> None:
    [declaration] = declarations(ObjectIndex([gcs("b", spec)])).values()
    assert not declaration.cmek
    assert declaration.public[0]["path"] == "spec.publicAccessPrevention"


def test_the_config_switches_turn_the_rules_off() -> None:
    """``require.weightBucketPublicAccess: true`` and ``require.cmek: false`` silence
    PG405 and PG406 on buckets that break both."""
    repo = Path(__file__).resolve().parents[2]
    fixture = str(repo / "fixtures" / "rules" / "PG405" / "fire-s3.yaml")

    def rule_ids(config: Config) -> set[str]:
        ruleset = load_ruleset(ScanOptions(engine="cpp", config=config))
        return {f.rule_id for f in scan_paths([fixture], ruleset, repo_root=repo).findings}

    assert {"PG405", "PG406"} <= rule_ids(Config())
    off = Require(weight_bucket_public_access=True, cmek=False)
    assert not {"PG405", "PG406"} & rule_ids(Config(require=off))
