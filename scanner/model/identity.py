"""ServiceAccounts and the workload identity a pod's cloud calls use (docs/platform-model.md).

Every workload gets ``workload.serviceAccount``:

* ``name``: ``serviceAccountName`` (or the deprecated ``serviceAccount``), else
  ``default``, the account Kubernetes gives a pod that names none;
* ``known``: that ServiceAccount object is in scope (scanned or ``--context-path``).
  A missing binding is only concluded for accounts poolgate can see
  (docs/usage.md, "Scope: what a scan can see"): the ``default`` account too must be in scope;
* ``identity``: the workload-identity binding, or ``""``: the value of
  ``iam.gke.io/gcp-service-account`` (GKE Workload Identity),
  ``eks.amazonaws.com/role-arn`` (EKS IRSA), ``azure.workload.identity/client-id``
  (Azure Workload Identity, which also needs the pod label
  ``azure.workload.identity/use: "true"``), or of an annotation key listed in
  config ``workloadIdentityKeys``;
  or, for EKS Pod Identity (no annotation by design), the ``roleARN`` of an ACK
  ``PodIdentityAssociation`` (``eks.services.k8s.aws``) naming the account, or
  ``workloadIdentityAccounts`` when config lists the account (``namespace/name``,
  globs allowed: associations made with Terraform, eksctl or the AWS API);
* ``provider``: ``gcp``, ``aws``, ``azure``, ``custom`` (a config key), ``external``
  (a config account), or ``""``;
* ``hint``: why an annotation that is present does not count, or ``""``
  (an Azure client id on the account but no ``use`` label on the pod).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scanner.config.values import Config
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import namespace_of
from scanner.model.wildcards import Dialect, matches
from scanner.model.workloads import Join, Workload, join_complete

AZURE_CLIENT_ID = "azure.workload.identity/client-id"
AZURE_USE_LABEL = "azure.workload.identity/use"
IDENTITY_ANNOTATIONS: tuple[tuple[str, str], ...] = (
    ("iam.gke.io/gcp-service-account", "gcp"),
    ("eks.amazonaws.com/role-arn", "aws"),
    (AZURE_CLIENT_ID, "azure"),
)
"""Built-in ServiceAccount annotations that bind a workload identity, and their provider."""


def attach_service_accounts(
    workloads: Sequence[Workload], index: ObjectIndex, config: Config
) -> Join:
    """Set ``workload.serviceAccount`` on every workload (``join_complete``)."""
    accounts: dict[tuple[str, str], Mapping[str, Any]] = {}
    for obj in index.kind("ServiceAccount"):
        if obj.name:
            accounts.setdefault((namespace_of(obj), obj.name), obj.metadata)
    associated = pod_identity_associations(index)

    def join(workload: Workload) -> None:
        facts = workload.facts
        name = facts["serviceAccountName"] or "default"
        key = (facts["namespace"], name)
        metadata = accounts.get(key)
        account = service_account_facts(
            name, metadata, facts["podLabels"], config.workload_identity_keys
        )
        if metadata is not None and not account["identity"]:
            if key in associated:
                account.update(identity=associated[key], provider="aws", hint="")
            elif _listed(key, config.workload_identity_accounts):
                account.update(identity="config workloadIdentityAccounts", provider="external")
                account["hint"] = ""
        facts["serviceAccount"] = account

    return join_complete(workloads, join)


POD_IDENTITY_GROUP = "eks.services.k8s.aws"


def pod_identity_associations(index: ObjectIndex) -> dict[tuple[str, str], str]:
    """(namespace, ServiceAccount) -> role of each EKS Pod Identity association in
    scope (the ACK controller's ``PodIdentityAssociation``: ``spec.namespace``,
    ``spec.serviceAccount``, and ``spec.roleARN`` or an ACK IAM Role in
    ``spec.roleRef.from.name``)."""
    found: dict[tuple[str, str], str] = {}
    for obj in index.kind("PodIdentityAssociation"):
        if not obj.api_version.startswith(POD_IDENTITY_GROUP + "/"):
            continue
        spec = obj.body.get("spec")
        if not isinstance(spec, Mapping):
            continue
        namespace, account = spec.get("namespace"), spec.get("serviceAccount")
        if not (isinstance(namespace, str) and namespace and isinstance(account, str) and account):
            continue
        role = spec.get("roleARN")
        if not isinstance(role, str) or not role:
            reference = spec.get("roleRef")
            source = reference.get("from") if isinstance(reference, Mapping) else None
            name = source.get("name") if isinstance(source, Mapping) else None
            role = f"Role {name}" if isinstance(name, str) and name else ""
        if role:
            found.setdefault((namespace, account), role)
    return found


def _listed(key: tuple[str, str], patterns: Sequence[str]) -> bool:
    """Whether config ``workloadIdentityAccounts`` names ``namespace/name``: globs as
    ``fnmatch`` reads them, matched without backtracking (``scanner.model.wildcards``)."""
    name = f"{key[0]}/{key[1]}"
    return any(matches(pattern, name, Dialect.FNMATCH) for pattern in patterns)


def service_account_facts(
    name: str,
    metadata: Mapping[str, Any] | None,
    pod_labels: Mapping[str, str],
    extra_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """``workload.serviceAccount`` of a pod running as ``name``; ``metadata`` is the
    ServiceAccount's, or None when it is not in scope."""
    identity, provider, hint = "", "", ""
    annotations = metadata.get("annotations") if metadata is not None else None
    if isinstance(annotations, Mapping):
        keys = [*IDENTITY_ANNOTATIONS, *((key, "custom") for key in extra_keys)]
        for key, key_provider in keys:
            value = annotations.get(key)
            if not isinstance(value, str) or not value.strip():
                continue
            if key == AZURE_CLIENT_ID and pod_labels.get(AZURE_USE_LABEL) != "true":
                hint = hint or (
                    f"the ServiceAccount sets {AZURE_CLIENT_ID} but the pod template lacks "
                    f'label {AZURE_USE_LABEL}: "true", so no token is injected'
                )
                continue
            identity, provider = value, key_provider
            break
    return {
        "name": name,
        "known": metadata is not None,
        "identity": identity,
        "provider": provider,
        "hint": "" if identity else hint,
    }
