"""A small Kubernetes API server for tests: HTTPS, bearer tokens and client certificates,
discovery, and the list protocol with its failure modes.

No Kubernetes cluster is available where these tests run. This server speaks the
part of the API that ``poolgate audit`` and ``poolgate snapshot`` use, the way
kube-apiserver speaks it, so the official ``kubernetes`` client talks to it
unchanged through a real kubeconfig file:

* TLS with a certificate signed by a CA generated per test session
  (``cryptography``); requests authenticate with a bearer token or a client
  certificate signed by that CA, anything else gets a ``401`` ``Status``;
* discovery: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>/<version>``;
* lists: ``/api/v1/<plural>``, ``/apis/<group>/<version>/<plural>`` and their
  ``namespaces/<ns>/`` forms, with ``limit``/``continue`` pagination; items of
  built-in kinds come without ``apiVersion``/``kind`` (as kube-apiserver sends
  them), custom resources with them;
* server-side apply (``PATCH`` with ``application/apply-patch+yaml`` and a
  ``fieldManager``) and ``DELETE`` (with a uid precondition) of single objects, and
  ``labelSelector`` (``key=value``) on lists: what ``poolgate audit
  --publish-reports`` uses on the PolicyReport kinds (``REPORT_KINDS``), each
  request recorded with its content type and body (``writes``);
* failure modes a test can ask for: ``403`` ``Status`` objects per resource (and
  per namespace), ``410 Gone`` on a continue token (once), ``429`` with
  ``Retry-After`` and ``5xx`` answers before success, and slow answers that run
  past the client's read timeout; and, with ``Front`` (a TCP proxy in front of the
  server, as an L4 load balancer is), connections accepted and closed before the
  TLS handshake ends.

Every request is logged (method, path, query) so tests can check what the
client asked for, and what it never asked for (Secrets).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    custom: bool = False
    """Custom resources keep apiVersion/kind on list items."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def label(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _k(api_version: str, kind: str, plural: str, namespaced: bool, custom: bool = False) -> Kind:
    group, _, version = api_version.rpartition("/")
    return Kind(group, version, kind, plural, namespaced, custom)


# What this test cluster serves. No Karpenter, Kyverno, Ray, ...: the audit must skip
# those groups quietly. resource.k8s.io only at v1beta1, preferred: the audit must
# pick it from its own list of versions.
DEFAULT_KINDS: tuple[Kind, ...] = (
    _k("v1", "Namespace", "namespaces", False),
    _k("v1", "Node", "nodes", False),
    _k("v1", "Pod", "pods", True),
    _k("v1", "PodTemplate", "podtemplates", True),
    _k("v1", "ReplicationController", "replicationcontrollers", True),
    _k("v1", "ServiceAccount", "serviceaccounts", True),
    _k("v1", "ConfigMap", "configmaps", True),
    _k("v1", "Secret", "secrets", True),
    _k("v1", "Service", "services", True),
    _k("apps/v1", "Deployment", "deployments", True),
    _k("apps/v1", "ReplicaSet", "replicasets", True),
    _k("apps/v1", "StatefulSet", "statefulsets", True),
    _k("apps/v1", "DaemonSet", "daemonsets", True),
    _k("batch/v1", "Job", "jobs", True),
    _k("batch/v1", "CronJob", "cronjobs", True),
    _k("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True),
    _k("rbac.authorization.k8s.io/v1", "Role", "roles", True),
    _k("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
    _k("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
    _k("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _k("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False),
    _k(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        False,
    ),
    _k(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        False,
    ),
    _k("resource.k8s.io/v1beta1", "ResourceClaim", "resourceclaims", True),
    _k("resource.k8s.io/v1beta1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    _k("resource.k8s.io/v1beta1", "DeviceClass", "deviceclasses", False),
    _k("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False, custom=True),
    _k("metrics.k8s.io/v1beta1", "PodMetrics", "pods", True),
)

REPORT_KINDS: tuple[Kind, ...] = (
    _k("wgpolicyk8s.io/v1alpha2", "PolicyReport", "policyreports", True, custom=True),
    _k("wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport", "clusterpolicyreports", False, True),
)
"""The PolicyReport CRDs, served when a test adds them (``kinds=DEFAULT_KINDS +
REPORT_KINDS``): a cluster with Kyverno or Policy Reporter installed."""


@dataclass(frozen=True)
class Write:
    """One PATCH or DELETE as the server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    body: bytes


# -- certificates ------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing here: a kubeconfig trusting it must fail TLS verification."""


def make_pki(directory: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def write_key(path: Path, private: ec.EllipticCurvePrivateKey) -> None:
        path.write_bytes(
            private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def ca_cert(common: str, private: ec.EllipticCurvePrivateKey) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(name(common))
            .issuer_name(name(common))
            .public_key(private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(private.public_key()), critical=False
            )
            .sign(private, hashes.SHA256())
        )

    def leaf(
        common: str,
        private: ec.EllipticCurvePrivateKey,
        ca: x509.Certificate,
        ca_key: ec.EllipticCurvePrivateKey,
        server: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common))
            .issuer_name(ca.subject)
            .public_key(private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        return builder.sign(ca_key, hashes.SHA256())

    def write_cert(path: Path, cert: x509.Certificate) -> None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    ca_key = key()
    ca = ca_cert("poolgate-test-ca", ca_key)
    server_key, client_key, other_key = key(), key(), key()
    pki = Pki(
        ca=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.crt",
    )
    write_cert(pki.ca, ca)
    write_cert(pki.server_cert, leaf("kube-apiserver", server_key, ca, ca_key, server=True))
    write_key(pki.server_key, server_key)
    write_cert(pki.client_cert, leaf("poolgate-audit", client_key, ca, ca_key, server=False))
    write_key(pki.client_key, client_key)
    write_cert(pki.other_ca, ca_cert("someone-else", other_key))
    return pki


# -- faults ------------------------------------------------------------------------


@dataclass
class Fault:
    """One planned misbehaviour for the next matching request.

    ``status``: answer with this HTTP status and a ``Status`` body (429 gets
    ``Retry-After``). ``delay``: sleep this long first (past the client's timeout),
    then answer normally.
    """

    status: int = 0
    delay: float = 0.0
    retry_after: str = "0"


@dataclass
class Behaviour:
    forbidden: set[str] = field(default_factory=set)
    """Resource labels (``pods``, ``deployments.apps``) whose list answers 403."""
    forbidden_in: set[tuple[str, str]] = field(default_factory=set)
    """(namespace, label) pairs whose namespaced list answers 403."""
    faults: dict[str, list[Fault]] = field(default_factory=dict)
    """Label (or ``discovery``) -> faults to serve, first to last, before normal answers."""
    expire_continue: set[str] = field(default_factory=set)
    """Labels whose first continue request answers 410 Gone (then normally)."""
    replies: dict[str, Callable[[dict[str, list[str]]], tuple[int, bytes] | None]] = field(
        default_factory=dict
    )
    """Path -> function of the query giving (status, raw body) to answer instead of the
    server's own (None: answer normally), for answers kube-apiserver never gives (a
    ``Status`` with 200, ``"items": null``, a continue token that repeats)."""


class ApiServer:
    """Serves ``objects`` for the kinds in ``kinds`` over HTTPS on 127.0.0.1."""

    def __init__(
        self,
        objects: Iterable[Mapping[str, Any]],
        pki: Pki,
        token: str,
        kinds: Iterable[Kind] = DEFAULT_KINDS,
    ) -> None:
        self.kinds = tuple(kinds)
        self.token = token
        self.behaviour = Behaviour()
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.writes: list[Write] = []
        self._versions = 1000
        self._lock = threading.Lock()
        self._store: dict[Kind, list[dict[str, Any]]] = {kind: [] for kind in self.kinds}
        by_type = {(kind.api_version, kind.kind): kind for kind in self.kinds}
        for obj in objects:
            kind = by_type.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
            if kind is None:
                raise ValueError(
                    f"this server does not serve {obj.get('apiVersion')} {obj.get('kind')}"
                )
            self._store[kind].append(json.loads(json.dumps(obj)))
        for items in self._store.values():
            items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        context.load_verify_locations(pki.ca)
        context.verify_mode = ssl.CERT_OPTIONAL  # client certificates are one way in
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"https://{host!s}:{port}"

    def __enter__(self) -> ApiServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def paths(self) -> list[str]:
        with self._lock:
            return [path for _, path, _ in self.requests]

    def queries(self, path: str) -> list[dict[str, list[str]]]:
        with self._lock:
            return [query for _, p, query in self.requests if p == path]

    # -- request handling --------------------------------------------------------

    def answer(
        self, path: str, query: dict[str, list[str]], authenticated: bool
    ) -> tuple[int, dict[str, str], Any, float]:
        """(status, headers, JSON body, delay) for one GET."""
        with self._lock:
            self.requests.append(("GET", path, query))
        if not authenticated:
            return 401, {}, _status(401, "Unauthorized", "Unauthorized"), 0.0
        parts = [part for part in path.split("/") if part]
        if parts in (["api"], ["apis"]) or _is_group_version(parts):
            fault = self._next_fault("discovery")
            if fault is not None:
                return self._fault(fault, "discovery")
            return 200, {}, self._discovery(parts), 0.0
        target = self._resolve(parts)
        if target is None:
            return 404, {}, _status(404, "NotFound", f"the server could not find {path}"), 0.0
        kind, namespace = target
        if kind.label in self.behaviour.forbidden or (namespace, kind.label) in (
            self.behaviour.forbidden_in
        ):
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            message = (
                f'{kind.label} is forbidden: User "system:serviceaccount:poolgate:poolgate-audit" '
                f'cannot list resource "{kind.plural}" in API group "{kind.group}" {scope}'
            )
            return 403, {}, _status(403, "Forbidden", message, kind.plural), 0.0
        fault = self._next_fault(kind.label)
        if fault is not None:
            status, headers, body, delay = self._fault(fault, kind.label)
            if status:
                return status, headers, body, delay
            return 200, {}, self._list(kind, namespace, query), delay
        token = query.get("continue", [""])[0]
        if token and kind.label in self.behaviour.expire_continue:
            self.behaviour.expire_continue.discard(kind.label)
            message = (
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter."
            )
            return 410, {}, _status(410, "Expired", message), 0.0
        return 200, {}, self._list(kind, namespace, query), 0.0

    def write(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        content_type: str,
        body: bytes,
        authenticated: bool,
    ) -> tuple[int, Any]:
        """(status, JSON body) for one PATCH (server-side apply only) or DELETE of one
        object, checked as kube-apiserver checks them."""
        with self._lock:
            self.writes.append(Write(method, path, query, content_type, body))
            self.requests.append((method, path, query))
        if not authenticated:
            return 401, _status(401, "Unauthorized", "Unauthorized")
        target = self._resolve_object([part for part in path.split("/") if part])
        if target is None:
            return 404, _status(404, "NotFound", f"the server could not find {path}")
        kind, namespace, name = target
        verb = "patch" if method == "PATCH" else "delete"
        if kind.label in self.behaviour.forbidden:
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            message = (
                f'{kind.plural}.{kind.group} "{name}" is forbidden: User '
                f'"system:serviceaccount:poolgate:poolgate-audit" cannot {verb} resource '
                f'"{kind.plural}" in API group "{kind.group}" {scope}'
            )
            return 403, _status(403, "Forbidden", message, kind.plural)
        fault = self._next_fault(f"{verb} {kind.label}")
        if fault is not None and fault.status:
            status, _, answer, _ = self._fault(fault, kind.label)
            return status, answer
        if method == "DELETE":
            return self._delete(kind, namespace, name, body)
        return self._apply(kind, namespace, name, query, content_type, body)

    def _apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        query: dict[str, list[str]],
        content_type: str,
        body: bytes,
    ) -> tuple[int, Any]:
        if content_type != "application/apply-patch+yaml":
            message = (
                "the body of the request was in an unknown format - accepted media types "
                f"include: application/apply-patch+yaml (got {content_type})"
            )
            return 415, _status(415, "UnsupportedMediaType", message)
        if not query.get("fieldManager", [""])[0]:
            message = (
                "PatchOptions.meta.k8s.io is invalid: fieldManager: Required value: "
                "is required for apply patch"
            )
            return 422, _status(422, "Invalid", message)
        try:
            obj = yaml.safe_load(body)
        except yaml.YAMLError as error:
            return 400, _status(400, "BadRequest", f"error decoding YAML: {error}")
        if not isinstance(obj, dict) or (obj.get("apiVersion"), obj.get("kind")) != (
            kind.api_version,
            kind.kind,
        ):
            return 400, _status(400, "BadRequest", "apiVersion and kind do not match the URL")
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict) or metadata.get("name") != name:
            message = f"the name of the object does not match the name on the URL ({name})"
            return 400, _status(400, "BadRequest", message)
        if metadata.get("namespace", namespace) != namespace:
            message = (
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
            return 400, _status(400, "BadRequest", message)
        namespaces = {
            item["metadata"]["name"]
            for known, items in self._store.items()
            if known.kind == "Namespace"
            for item in items
        }
        if namespace and namespace not in namespaces:
            body_ = _status(404, "NotFound", f'namespaces "{namespace}" not found', "namespaces")
            body_["details"]["name"] = namespace
            return 404, body_
        with self._lock:
            self._versions += 1
            items = self._store[kind]
            old = self._find(kind, namespace, name)
            stored = json.loads(json.dumps(obj))
            stored["metadata"]["uid"] = (
                old["metadata"]["uid"] if old is not None else f"uid-{self._versions}"
            )
            stored["metadata"]["resourceVersion"] = str(self._versions)
            if namespace:
                stored["metadata"]["namespace"] = namespace
            if old is not None:
                items.remove(old)
            items.append(stored)
            items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return (200 if old is not None else 201), stored

    def _delete(self, kind: Kind, namespace: str, name: str, body: bytes) -> tuple[int, Any]:
        options = json.loads(body) if body else {}
        wanted = (options.get("preconditions") or {}).get("uid")
        with self._lock:
            old = self._find(kind, namespace, name)
            if old is None:
                message = f'{kind.plural}.{kind.group} "{name}" not found'
                return 404, _status(404, "NotFound", message, kind.plural)
            if wanted is not None and old["metadata"]["uid"] != wanted:
                message = (
                    "Precondition failed: UID in precondition: "
                    f"{wanted}, UID in object meta: {old['metadata']['uid']}"
                )
                return 409, _status(409, "Conflict", message, kind.plural)
            self._store[kind].remove(old)
        success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        return 200, success

    def _find(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        for item in self._store[kind]:
            metadata = item["metadata"]
            if metadata["name"] == name and metadata.get("namespace", "") == namespace:
                return item
        return None

    def stored(self, kind: Kind) -> list[dict[str, Any]]:
        """The objects of ``kind`` the server holds now (reports applied and not deleted)."""
        with self._lock:
            return json.loads(json.dumps(self._store[kind]))

    def _resolve_object(self, parts: list[str]) -> tuple[Kind, str, str] | None:
        """(kind, namespace, name) of an object's path, or None."""
        if len(parts) < 2:
            return None
        found = self._resolve(parts[:-1])
        if found is None:
            return None
        kind, namespace = found
        if kind.namespaced != bool(namespace):
            return None
        return kind, namespace, parts[-1]

    def _next_fault(self, key: str) -> Fault | None:
        with self._lock:
            queue = self.behaviour.faults.get(key)
            return queue.pop(0) if queue else None

    def _fault(self, fault: Fault, label: str) -> tuple[int, dict[str, str], Any, float]:
        if fault.status == 429:
            body = _status(429, "TooManyRequests", "Too many requests, please try again later.")
            return 429, {"Retry-After": fault.retry_after}, body, fault.delay
        if fault.status:
            body = _status(
                fault.status, "InternalError", f"etcdserver: request timed out ({label})"
            )
            return fault.status, {}, body, fault.delay
        return 0, {}, None, fault.delay

    def _discovery(self, parts: list[str]) -> dict[str, Any]:
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["apis"]:
            groups: dict[str, list[str]] = {}
            for kind in self.kinds:
                if kind.group and kind.version not in groups.setdefault(kind.group, []):
                    groups[kind.group].append(kind.version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": group,
                        "versions": [
                            {"groupVersion": f"{group}/{v}", "version": v} for v in versions
                        ],
                        "preferredVersion": {
                            "groupVersion": f"{group}/{versions[0]}",
                            "version": versions[0],
                        },
                    }
                    for group, versions in groups.items()
                ],
            }
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        resources: list[dict[str, Any]] = []
        for kind in self.kinds:
            if kind.group == group and kind.version == version:
                entry = {
                    "name": kind.plural,
                    "singularName": kind.kind.lower(),
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
                resources.append(entry)
                resources.append({**entry, "name": f"{kind.plural}/status", "verbs": ["get"]})
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def _resolve(self, parts: list[str]) -> tuple[Kind, str] | None:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) == 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if len(rest) != 1:
            return None
        for kind in self.kinds:
            if (kind.group, kind.version, kind.plural) == (group, version, rest[0]):
                if namespace and not kind.namespaced:
                    return None
                return kind, namespace
        return None

    def _list(self, kind: Kind, namespace: str, query: dict[str, list[str]]) -> dict[str, Any]:
        items = [
            item
            for item in self._store[kind]
            if not namespace or item["metadata"].get("namespace") == namespace
        ]
        for term in filter(None, query.get("labelSelector", [""])[0].split(",")):
            key, _, value = term.partition("=")
            items = [i for i in items if (i["metadata"].get("labels") or {}).get(key) == value]
        token = query.get("continue", [""])[0]
        start = json.loads(base64.b64decode(token))["start"] if token else 0
        limit = int(query.get("limit", ["0"])[0] or 0)
        end = len(items) if limit <= 0 else min(len(items), start + limit)
        page = []
        for item in items[start:end]:
            if not kind.custom:  # kube-apiserver leaves these out of built-in list items
                item = {k: v for k, v in item.items() if k not in ("apiVersion", "kind")}
            page.append(item)
        metadata: dict[str, Any] = {"resourceVersion": "12345"}
        if end < len(items):
            metadata["continue"] = base64.b64encode(json.dumps({"start": end}).encode()).decode()
            metadata["remainingItemCount"] = len(items) - end
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": metadata,
            "items": page,
        }


def _is_group_version(parts: list[str]) -> bool:
    return (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis")


def _status(code: int, reason: str, message: str, kind: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if kind:
        body["details"] = {"kind": kind}
    return body


def _handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes; without this, Nagle's algorithm
            # and delayed ACKs add 40 ms to every answer.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:
            parsed = urlsplit(self.path)
            query = parse_qs(parsed.query)
            # RFC 6750 (and RFC 7235): the scheme is case-insensitive; the in-cluster
            # loader of the kubernetes client sends "bearer".
            scheme, _, credential = self.headers.get("Authorization", "").partition(" ")
            bearer = scheme.lower() == "bearer" and credential == server.token
            certificate = bool(self.connection.getpeercert())  # type: ignore[attr-defined]
            reply = server.behaviour.replies.get(parsed.path)
            replaced = reply(query) if reply is not None else None
            if replaced is not None and (bearer or certificate):
                with server._lock:
                    server.requests.append(("GET", parsed.path, query))
                status, data = replaced
                headers: Mapping[str, str] = {}
            else:
                status, headers, body, delay = server.answer(
                    parsed.path, query, bearer or certificate
                )
                if delay:
                    time.sleep(delay)
                data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass  # the client gave up waiting (a timeout test)

        def do_PATCH(self) -> None:
            self._write("PATCH")

        def do_DELETE(self) -> None:
            self._write("DELETE")

        def _write(self, method: str) -> None:
            parsed = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            scheme, _, credential = self.headers.get("Authorization", "").partition(" ")
            bearer = scheme.lower() == "bearer" and credential == server.token
            certificate = bool(self.connection.getpeercert())  # type: ignore[attr-defined]
            status, answer = server.write(
                method,
                parsed.path,
                parse_qs(parsed.query),
                self.headers.get("Content-Type", ""),
                body,
                bearer or certificate,
            )
            data = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class Front:
    """A TCP proxy in front of ``server``, as an L4 load balancer in front of a managed
    control plane: it passes connections through, except that the next ``drop``
    connections are accepted and closed at once (the backend is restarting), which
    the client sees as a TLS handshake cut short (``UNEXPECTED_EOF_WHILE_READING``)."""

    def __init__(self, server: ApiServer) -> None:
        self.drop = 0
        self.dropped = 0
        host, port = server._http.server_address[:2]
        self._backend = (str(host), int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"https://{host}:{port}"

    def __enter__(self) -> Front:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self.drop:
                self.drop -= 1
                self.dropped += 1
                client.close()
                continue
            backend = socket.create_connection(self._backend)
            for source, sink in ((client, backend), (backend, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        source.close()  # the sink is the other direction's source


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    context: str,
    *,
    token: str | None = None,
    client_cert: Path | None = None,
    client_key: Path | None = None,
    insecure: bool = False,
) -> Path:
    """A kubeconfig with one cluster, one user and one context (the current one)."""
    user: dict[str, Any] = {}
    if token is not None:
        user["token"] = token
    if client_cert is not None and client_key is not None:
        user["client-certificate"] = str(client_cert)
        user["client-key"] = str(client_key)
    cluster: dict[str, Any] = {"server": server}
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    else:
        cluster["certificate-authority"] = str(ca)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "gpu-lab", "cluster": cluster}],
        "users": [{"name": "poolgate-audit", "user": user}],
        "contexts": [
            {"name": context, "context": {"cluster": "gpu-lab", "user": "poolgate-audit"}}
        ],
        "current-context": context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path
