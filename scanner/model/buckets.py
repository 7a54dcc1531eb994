"""Weight buckets: cloud buckets GPU pods mount, joined with their declarations (PG405,
PG406).

docs/platform-model.md ("Weight buckets"). A pod mounts a bucket through a CSI driver:
an inline ``csi`` volume, or a PersistentVolumeClaim bound to a PersistentVolume of
that driver. GitOps platforms declare the bucket itself as a Kubernetes object (Config
Connector, ACK, Crossplane), so both sides may be in scope. A bucket is judged only
when its declaration is in scope; what it says about public access and encryption is
read with the provider's documented defaults for new buckets, and a missing setting
whose default is not documented as safe is named as missing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

from scanner.inventory import KubeObject, as_mapping, is_mapping, join_path
from scanner.kinds import api_group
from scanner.model.index import ObjectIndex
from scanner.model.workloads import Join, Workload, join_complete

DRIVERS: Final = {
    "gcsfuse.csi.storage.gke.io": "gcs",
    "s3.csi.aws.com": "s3",
    "blob.csi.azure.com": "azure",
}
"""CSI drivers that mount buckets: Cloud Storage FUSE, Mountpoint for Amazon S3, Azure Blob."""
PUBLIC_MEMBERS: Final = ("allUsers", "allAuthenticatedUsers")
S3_BLOCKS: Final = {
    "s3.services.k8s.aws": (
        "blockPublicACLs",
        "blockPublicPolicy",
        "ignorePublicACLs",
        "restrictPublicBuckets",
    ),
    "s3.aws.upbound.io": (
        "blockPublicAcls",
        "blockPublicPolicy",
        "ignorePublicAcls",
        "restrictPublicBuckets",
    ),
}
"""The four S3 Block Public Access settings, as each provider spells them."""
KMS_ALGORITHMS: Final = ("aws:kms", "aws:kms:dsse")
EXTERNAL_NAME: Final = "crossplane.io/external-name"


class Declaration(NamedTuple):
    """What a bucket's declarations say: where (``ref``), why it may be public (each
    reason with its object and field) and whether a customer-managed key encrypts it."""

    ref: str
    kind: str
    public: list[dict[str, str]]
    cmek: bool
    cmek_reason: str
    path: str


def attach_buckets(workloads: Sequence[Workload], index: ObjectIndex) -> Join:
    """Set ``workload.weightBuckets`` on every workload (``join_complete``)."""
    declared = declarations(index)

    def join(workload: Workload) -> None:
        found = []
        for mount in mounts(workload, index):
            declaration = declared.get((mount["provider"], mount["bucket"]))
            mount["declared"] = declaration is not None
            if declaration is not None:
                mount.update(
                    declaration=declaration.ref,
                    declarationKind=declaration.kind,
                    public=declaration.public,
                    cmek=declaration.cmek,
                    cmekReason=declaration.cmek_reason,
                )
            found.append(mount)
        workload.facts["weightBuckets"] = found

    return join_complete(workloads, join)


def mounts(workload: Workload, index: ObjectIndex) -> Iterator[dict[str, Any]]:
    """The buckets a workload's pod volumes mount: ``bucket``, ``provider``, ``via``
    (``csi`` or ``pvc``), ``volume``, ``path`` (the volume's source field)."""
    pod_path = workload.facts["podSpecPath"]
    namespace = workload.obj.ref.namespace
    volumes = workload.facts["podSpec"].get("volumes")
    for position, volume in enumerate(volumes if isinstance(volumes, list) else ()):
        if not is_mapping(volume):
            continue
        path = join_path(join_path(pod_path, "volumes"), position)
        name = _text(volume.get("name"))
        if is_mapping(volume.get("csi")):
            found = _csi_bucket(volume["csi"], "")
            if found is not None:
                yield _mount(found, "csi", name, join_path(path, "csi"))
        claim = as_mapping(volume.get("persistentVolumeClaim")).get("claimName")
        if isinstance(claim, str) and claim:
            source = _bound_volume(claim, namespace, index)
            found = _csi_bucket(source.get("csi"), "volumeHandle") if source else None
            if found is not None:
                yield _mount(found, "pvc", name, join_path(path, "persistentVolumeClaim"))


def _mount(found: tuple[str, str], via: str, volume: str, path: str) -> dict[str, Any]:
    provider, bucket = found
    return {"bucket": bucket, "provider": provider, "via": via, "volume": volume, "path": path}


def _csi_bucket(csi: object, handle: str) -> tuple[str, str] | None:
    """(provider, bucket) of a CSI volume source of a bucket driver. A PV's bucket is its
    ``volumeAttributes.bucketName``, else (Cloud Storage FUSE) its ``volumeHandle``;
    an Azure Blob volume is its ``storageAccount/containerName``."""
    csi = as_mapping(csi)
    provider = DRIVERS.get(csi.get("driver", "")) if isinstance(csi.get("driver"), str) else None
    if provider is None:
        return None
    attributes = as_mapping(csi.get("volumeAttributes"))
    if provider == "azure":
        account, container = attributes.get("storageAccount"), attributes.get("containerName")
        if isinstance(account, str) and isinstance(container, str):
            return provider, f"{account}/{container}"
        return None
    bucket = attributes.get("bucketName")
    if not isinstance(bucket, str) and handle and provider == "gcs":
        bucket = csi.get(handle)
    return (provider, bucket) if isinstance(bucket, str) and bucket else None


def _bound_volume(claim: str, namespace: str, index: ObjectIndex) -> Mapping[str, Any] | None:
    """The spec of the PersistentVolume bound to claim ``namespace/claim``: the one the
    claim names (``spec.volumeName``), else one whose ``claimRef`` names the claim."""
    pvc = index.get("PersistentVolumeClaim", namespace, claim)
    volume_name = as_mapping(pvc.body.get("spec")).get("volumeName") if pvc else None
    if isinstance(volume_name, str) and volume_name:
        pv = index.get("PersistentVolume", "", volume_name)
        return as_mapping(pv.body.get("spec")) if pv else None
    for pv in index.kind("PersistentVolume"):
        spec = as_mapping(pv.body.get("spec"))
        ref = as_mapping(spec.get("claimRef"))
        if ref.get("name") == claim and (ref.get("namespace") or "default") == (
            namespace or "default"
        ):
            return spec
    return None


# --- declarations ---------------------------------------------------------------------


def declarations(index: ObjectIndex) -> dict[tuple[str, str], Declaration]:
    """(provider, bucket name) -> its declaration, for the buckets declared in scope."""
    found: dict[tuple[str, str], Declaration] = {}
    grants = _gcs_grants(index)
    for obj in index.kind("StorageBucket"):
        if api_group(obj.api_version) == "storage.cnrm.cloud.google.com":
            name = _text(as_mapping(obj.body.get("spec")).get("resourceID")) or obj.name
            found.setdefault(("gcs", name), _config_connector(obj, grants.get(obj.name, [])))
    blocks = _by_bucket(index, "BucketPublicAccessBlock")
    encryption = _by_bucket(index, "BucketServerSideEncryptionConfiguration")
    for obj in index.kind("Bucket"):
        group = api_group(obj.api_version)
        if group == "s3.services.k8s.aws":
            name = _text(as_mapping(obj.body.get("spec")).get("name")) or obj.name
            found.setdefault(("s3", name), _ack(obj))
        elif group == "s3.aws.upbound.io":
            name = _external_name(obj)
            block = blocks.get(name) or blocks.get(obj.name)
            sse = encryption.get(name) or encryption.get(obj.name)
            found.setdefault(("s3", name), _crossplane_s3(obj, block, sse))
        elif group == "storage.gcp.upbound.io":
            found.setdefault(("gcs", _external_name(obj)), _crossplane_gcs(obj))
    return found


def _config_connector(obj: KubeObject, grants: list[dict[str, str]]) -> Declaration:
    spec = as_mapping(obj.body.get("spec"))
    public = list(grants)
    prevention = spec.get("publicAccessPrevention")
    if prevention != "enforced":
        public.insert(
            0,
            _reason(
                obj,
                "spec.publicAccessPrevention",
                "does not set publicAccessPrevention: enforced"
                + (
                    f" (it is '{prevention}')"
                    if isinstance(prevention, str)
                    else " (a new bucket inherits it from the organization policy)"
                ),
            ),
        )
    key = as_mapping(as_mapping(spec.get("encryption")).get("kmsKeyRef"))
    cmek = bool(key.get("name") or key.get("external"))
    reason = "" if cmek else "has no spec.encryption.kmsKeyRef (Google-managed encryption keys)"
    return Declaration(obj.ref.logical_name, obj.kind, public, cmek, reason, "spec.encryption")


def _gcs_grants(index: ObjectIndex) -> dict[str, list[dict[str, str]]]:
    """StorageBucket name -> the grants to everyone that name it: IAMPolicyMember,
    IAMPartialPolicy bindings, StorageBucketAccessControl entities."""
    found: dict[str, list[dict[str, str]]] = {}
    for obj in index.kind("IAMPolicyMember", "IAMPartialPolicy"):
        spec = as_mapping(obj.body.get("spec"))
        target = _bucket_ref(spec.get("resourceRef"))
        if not target:
            continue
        members = [("spec.member", spec.get("member"))]
        bindings = spec.get("bindings")
        for at, binding in enumerate(bindings if isinstance(bindings, list) else ()):
            listed = as_mapping(binding).get("members")
            for place, member in enumerate(listed if isinstance(listed, list) else ()):
                path = f"spec.bindings[{at}].members[{place}].member"
                members.append((path, as_mapping(member).get("member")))
        for path, member in members:
            if member in PUBLIC_MEMBERS:
                found.setdefault(target, []).append(_reason(obj, path, f"grants {member} access"))
    for obj in index.kind("StorageBucketAccessControl"):
        spec = as_mapping(obj.body.get("spec"))
        target = _text(as_mapping(spec.get("bucketRef")).get("name"))
        if target and spec.get("entity") in PUBLIC_MEMBERS:
            found.setdefault(target, []).append(
                _reason(obj, "spec.entity", f"grants {spec['entity']} an ACL")
            )
    return found


def _bucket_ref(ref: object) -> str:
    ref = as_mapping(ref)
    return _text(ref.get("name")) if ref.get("kind") == "StorageBucket" else ""


def _ack(obj: KubeObject) -> Declaration:
    spec = as_mapping(obj.body.get("spec"))
    block = spec.get("publicAccessBlock")
    public = _s3_block(obj, block, "spec.publicAccessBlock", "s3.services.k8s.aws")
    acl = spec.get("acl")
    if acl in ("public-read", "public-read-write", "authenticated-read"):
        public.append(_reason(obj, "spec.acl", f"sets the canned ACL {acl}"))
    rules = as_mapping(spec.get("encryption")).get("rules")
    defaults = [
        as_mapping(as_mapping(rule).get("applyServerSideEncryptionByDefault"))
        for rule in (rules if isinstance(rules, list) else ())
    ]
    cmek, reason = _s3_kms(defaults, "kmsMasterKeyID", "spec.encryption")
    return Declaration(obj.ref.logical_name, obj.kind, public, cmek, reason, "spec.encryption")


def _crossplane_s3(
    obj: KubeObject, block: KubeObject | None, encryption: KubeObject | None
) -> Declaration:
    public: list[dict[str, str]] = []
    if block is not None:
        provider = as_mapping(as_mapping(block.body.get("spec")).get("forProvider"))
        public = _s3_block(block, provider, "spec.forProvider", "s3.aws.upbound.io")
    defaults: list[Mapping[str, Any]] = []
    if encryption is not None:
        provider = as_mapping(as_mapping(encryption.body.get("spec")).get("forProvider"))
        for rule in _blocks(provider.get("rule")):
            defaults.extend(_blocks(rule.get("applyServerSideEncryptionByDefault")))
    cmek, reason = _s3_kms(defaults, "kmsMasterKeyId", "")
    if encryption is None:
        reason += " (no BucketServerSideEncryptionConfiguration names it)"
    return Declaration(obj.ref.logical_name, obj.kind, public, cmek, reason, "spec.forProvider")


def _crossplane_gcs(obj: KubeObject) -> Declaration:
    provider = as_mapping(as_mapping(obj.body.get("spec")).get("forProvider"))
    public: list[dict[str, str]] = []
    prevention = provider.get("publicAccessPrevention")
    if prevention != "enforced":
        public.append(
            _reason(
                obj,
                "spec.forProvider.publicAccessPrevention",
                "does not set publicAccessPrevention: enforced"
                + (
                    f" (it is '{prevention}')"
                    if isinstance(prevention, str)
                    else " (a new bucket inherits it from the organization policy)"
                ),
            )
        )
    keys = [block.get("defaultKmsKeyName") for block in _blocks(provider.get("encryption"))]
    cmek = any(isinstance(key, str) and key for key in keys)
    reason = "" if cmek else "has no encryption.defaultKmsKeyName (Google-managed encryption keys)"
    return Declaration(obj.ref.logical_name, obj.kind, public, cmek, reason, "spec.forProvider")


def _s3_block(obj: KubeObject, block: object, path: str, group: str) -> list[dict[str, str]]:
    """Why S3 Block Public Access may not hold. No block: a new bucket's default (all four
    on since April 2023, documented by AWS), which is safe. A block sets what it names;
    a setting it leaves out is off (``PutPublicAccessBlock``)."""
    if not is_mapping(block):
        return []
    off = [name for name in S3_BLOCKS[group] if block.get(name) is not True]
    if not off:
        return []
    return [_reason(obj, path, "leaves S3 Block Public Access off: " + ", ".join(off))]


def _s3_kms(defaults: Sequence[Mapping[str, Any]], key: str, path: str) -> tuple[bool, str]:
    """Whether a customer-managed KMS key encrypts an S3 bucket by default, and why not."""
    kms = [d for d in defaults if d.get("sseAlgorithm") in KMS_ALGORITHMS]
    if any(d.get(key) or d.get(f"{key}Ref") or d.get(f"{key}Selector") for d in kms):
        return True, ""
    if kms:
        return False, "uses aws:kms without a key of its own (the AWS managed key aws/s3)"
    return False, "is encrypted with Amazon S3 managed keys (SSE-S3), not a customer-managed key"


def _by_bucket(index: ObjectIndex, kind: str) -> dict[str, KubeObject]:
    """Crossplane objects of ``kind`` by the bucket they configure (``forProvider.bucket``
    or ``bucketRef.name``)."""
    found: dict[str, KubeObject] = {}
    for obj in index.kind(kind):
        if api_group(obj.api_version) != "s3.aws.upbound.io":
            continue
        provider = as_mapping(as_mapping(obj.body.get("spec")).get("forProvider"))
        for name in (provider.get("bucket"), as_mapping(provider.get("bucketRef")).get("name")):
            if isinstance(name, str) and name:
                found.setdefault(name, obj)
    return found


def _blocks(value: object) -> list[Mapping[str, Any]]:
    """A Crossplane block: a list of objects (v1beta1) or one object (v1beta2)."""
    if is_mapping(value):
        return [value]
    return [item for item in value if is_mapping(item)] if isinstance(value, list) else []


def _external_name(obj: KubeObject) -> str:
    annotations = as_mapping(obj.metadata.get("annotations"))
    return _text(annotations.get(EXTERNAL_NAME)) or obj.name


def _reason(obj: KubeObject, path: str, text: str) -> dict[str, str]:
    message = f"{obj.kind} {obj.ref.name} {text}"
    return {"ref": obj.ref.logical_name, "path": path, "message": message}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
