"""``scanner.sources.cluster`` against the test API server, with the backoff's sleep recorded.

The delays a retry would wait are asserted as numbers, never timed: the sleep
function is replaced by one that records what it was asked to wait.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.kinds.resources import RESOURCES, find
from scanner.sources.cluster import (
    Cluster,
    ClusterError,
    Failure,
    ListError,
    RetryPolicy,
    Served,
    Settings,
    Target,
    connect,
)

from .apiserver import ApiServer, Fault, Front, Pki, write_kubeconfig
from .conftest import CONTEXT, TOKEN


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def connected(server: ApiServer, pki: Pki, tmp_path: Path, **settings: object) -> Cluster:
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
    return connect(Target(str(config)), Settings(**settings))  # type: ignore[arg-type]


def served(cluster: Cluster, group: str, kind: str) -> Served:
    resource = find(group, kind)
    assert resource is not None
    found = cluster.discover([resource])[resource]
    assert isinstance(found, Served), found
    return found


def test_discovery_picks_served_versions_and_skips_absent_groups(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    cluster = connected(lab, pki, tmp_path)
    found = cluster.discover(RESOURCES)
    by_key = {resource.key: result for resource, result in found.items()}
    pods = by_key[("", "Pod")]
    assert isinstance(pods, Served) and (pods.api_version, pods.plural) == ("v1", "pods")
    claims = by_key[("resource.k8s.io", "ResourceClaim")]
    assert isinstance(claims, Served) and claims.api_version == "resource.k8s.io/v1beta1"
    for key in [
        ("karpenter.sh", "NodePool"),
        ("kyverno.io", "ClusterPolicy"),
        ("ray.io", "RayJob"),
    ]:
        result = by_key[key]
        assert isinstance(result, Failure) and result.status == "absent"
    # Only group-versions poolgate needs are fetched; metrics.k8s.io is served but never asked.
    assert "/apis/metrics.k8s.io/v1beta1" not in lab.paths()
    cluster.close()


def test_backoff_honours_retry_after_then_doubles(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    sleeps = Sleeps()
    cluster = connected(lab, pki, tmp_path, sleep=sleeps)
    pods = served(cluster, "", "Pod")
    lab.behaviour.faults["pods"] = [
        Fault(status=429, retry_after="3"),
        Fault(status=503),
        Fault(status=504),
    ]
    items = cluster.list_objects(pods)
    assert len(items) == 3
    # Retry-After for the 429; then the doubling backoff from the attempt number.
    assert sleeps == [3.0, 1.0, 2.0]


@pytest.mark.parametrize(
    ("header", "slept"),
    [
        ("120", 60.0),  # honoured up to RetryPolicy.retry_after_limit
        ("0.25", 0.25),
        ("nan", 0.5),  # not a delay: the backoff's own first step
        ("inf", 0.5),
        ("-3", 0.5),
        ("Wed, 21 Oct 2026 07:28:00 GMT", 0.5),  # an HTTP date: API servers send seconds
    ],
)
def test_retry_after_is_honoured_within_limits(
    lab: ApiServer, pki: Pki, tmp_path: Path, header: str, slept: float
) -> None:
    """A Retry-After that is not a finite number of seconds falls back to the backoff
    (``nan`` used to crash the audit: ``time.sleep(nan)`` raises)."""
    sleeps = Sleeps()
    cluster = connected(lab, pki, tmp_path, sleep=sleeps)
    lab.behaviour.faults["pods"] = [Fault(status=429, retry_after=header)]
    assert len(cluster.list_objects(served(cluster, "", "Pod"))) == 3
    assert sleeps == [slept]
    cluster.close()


def test_persistent_failure_gives_up_after_bounded_attempts(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    sleeps = Sleeps()
    cluster = connected(lab, pki, tmp_path, sleep=sleeps, retry=RetryPolicy(attempts=4))
    nodes = served(cluster, "", "Node")
    lab.behaviour.faults["nodes"] = [Fault(status=500)] * 10
    with pytest.raises(ListError) as raised:
        cluster.list_objects(nodes)
    assert raised.value.failure.status == "failed"
    assert "500 Internal Server Error: etcdserver: request timed out" in str(raised.value)
    assert "gave up after 4 attempts" in str(raised.value)
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(lab.queries("/api/v1/nodes")) == 4


def test_read_timeout_is_retried(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    sleeps = Sleeps()
    cluster = connected(lab, pki, tmp_path, sleep=sleeps, request_timeout=0.5)
    nodes = served(cluster, "", "Node")
    lab.behaviour.faults["nodes"] = [Fault(delay=2.0)]
    assert len(cluster.list_objects(nodes)) == 2
    assert sleeps == [0.5]


def test_expired_continue_relists_from_scratch_and_is_bounded(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    cluster = connected(lab, pki, tmp_path, page_size=1, retry=RetryPolicy(relists=0))
    pods = served(cluster, "", "Pod")
    lab.behaviour.expire_continue.add("pods")
    with pytest.raises(ListError) as raised:
        cluster.list_objects(pods)
    assert "expired 1 times" in str(raised.value)
    lab.behaviour.expire_continue.add("pods")
    again = connected(lab, pki, tmp_path, page_size=1)
    names = [item["metadata"]["name"] for item in again.list_objects(served(again, "", "Pod"))]
    assert len(names) == len(set(names)) == 3  # no page counted twice after the restart


def test_forbidden_is_not_retried(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    sleeps = Sleeps()
    cluster = connected(lab, pki, tmp_path, sleep=sleeps)
    deployments = served(cluster, "apps", "Deployment")
    lab.behaviour.forbidden.add("deployments.apps")
    with pytest.raises(ListError) as raised:
        cluster.list_objects(deployments)
    assert raised.value.failure.status == "forbidden"
    assert 'cannot list resource "deployments" in API group "apps"' in str(raised.value)
    assert sleeps == []


def test_items_are_plain_dicts_with_kind_and_without_managed_fields(
    pki: Pki, tmp_path: Path
) -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    objects = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "a", "managedFields": managed},
            # No containers: typed models would reject this object; plain dicts do not.
            "spec": {},
        },
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "managedFields": managed}},
    ]
    with ApiServer(objects, pki, TOKEN) as server:
        cluster = connected(server, pki, tmp_path)
        [pod] = cluster.list_objects(served(cluster, "", "Pod"))
        [node] = cluster.list_objects(served(cluster, "", "Node"))
    assert type(pod) is dict and (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert "managedFields" not in pod["metadata"]
    assert node["metadata"]["managedFields"] == managed  # PG604 dates labels with it


def test_secrets_cannot_be_listed(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    from scanner.kinds.resources import Resource

    cluster = connected(lab, pki, tmp_path)
    secret = Served(Resource("Secret", "", ("v1",), "secrets", True), "v1", "secrets", True)
    with pytest.raises(ValueError, match="never lists secrets"):
        cluster.list_objects(secret)
    assert not [path for path in lab.paths() if "secrets" in path]


def test_unreachable_cluster_is_a_cluster_error(pki: Pki, tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_kubeconfig(
        tmp_path / "kubeconfig", f"https://127.0.0.1:{port}", pki.ca, CONTEXT, token=TOKEN
    )
    sleeps = Sleeps()
    with pytest.raises(ClusterError) as raised:
        connect(Target(str(config)), Settings(sleep=sleeps)).discover([])
    assert "connection refused or host unreachable (gave up after 5 attempts)" in str(raised.value)
    assert sleeps == [0.5, 1.0, 2.0, 4.0]


def test_retry_policy_caps_delays() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    # Retry-After has its own, longer limit: the server said how long to stay away.
    assert policy.delay(0, retry_after=120) == policy.retry_after_limit == 60.0
    assert policy.delay(0, retry_after=7) == 7.0
    assert policy.delay(3, retry_after=0) == 0.0


def test_a_tls_handshake_cut_short_is_retried(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    """Found in review: a connection the load balancer accepts and closes (its backend,
    a managed control plane, restarting) failed the kind at once, where a TCP reset
    was retried; client-go retries both (IsProbableEOF)."""
    sleeps = Sleeps()
    with Front(lab) as front:
        config = write_kubeconfig(tmp_path / "kubeconfig", front.url, pki.ca, CONTEXT, token=TOKEN)
        cluster = connect(Target(str(config)), Settings(sleep=sleeps))
        front.drop = 2  # discovery's first request: `poolgate audit` exited 2
        nodes = served(cluster, "", "Node")
        assert len(cluster.list_objects(nodes)) == 2
        cluster.close()
    assert front.dropped == 2 and sleeps == [0.5, 1.0]
    assert lab.paths()[0] == "/api"


def test_a_certificate_that_does_not_verify_is_not_retried(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", lab.url, pki.other_ca, CONTEXT, token=TOKEN)
    sleeps = Sleeps()
    with pytest.raises(ClusterError, match="CERTIFICATE_VERIFY_FAILED"):
        connect(Target(str(config)), Settings(sleep=sleeps)).discover([])
    assert sleeps == []


@pytest.mark.parametrize(("status", "outcome"), [(404, "absent"), (503, "failed")])
def test_a_group_version_document_gone_since_apis_is_absent(
    lab: ApiServer, pki: Pki, tmp_path: Path, status: int, outcome: str
) -> None:
    """Found in review: a CRD deleted between /apis and its group-version document
    (404) made the kind failed, and the audit exit 3; a list's 404 already meant none.
    Any other answer there still cannot tell whether the kind exists."""
    sleeps = Sleeps()
    cluster = connected(lab, pki, tmp_path, sleep=sleeps)
    body = b'{"kind": "Status", "apiVersion": "v1", "status": "Failure"}'
    lab.behaviour.replies["/apis/nvidia.com/v1"] = lambda _: (status, body)
    resource = find("nvidia.com", "ClusterPolicy")
    assert resource is not None
    found = cluster.discover([resource])[resource]
    assert isinstance(found, Failure) and found.status == outcome, found
    assert len(sleeps) == (0 if status == 404 else 4)
    cluster.close()


def test_a_deadline_passing_during_discovery_is_not_read(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    """Found in review: the kind was reported failed, naming the deadline."""
    clock = Clock()
    cluster = connected(lab, pki, tmp_path, deadline=3.0, clock=clock, sleep=clock.sleep)
    lab.behaviour.replies["/apis/nvidia.com/v1"] = lambda _: (503, b"{}")
    resource = find("nvidia.com", "ClusterPolicy")
    assert resource is not None
    found = cluster.discover([resource])[resource]
    cluster.close()
    assert isinstance(found, Failure) and found.status == "not read", found
    assert "deadline for reading the cluster (3 s) passed" in found.message


class Clock:
    """Time that passes only when the backoff sleeps: a deadline test waits for nothing."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_past_the_deadline_the_remaining_kinds_are_not_read(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    """Found in review: an API server that stops answering cost each kind five request
    timeouts and the backoff (307 s at the defaults), so the nightly Job was killed at
    its activeDeadlineSeconds with no report at all. Past the deadline no request is
    made and no backoff waited for; every kind left is not read, never none."""
    from scanner.audit.run import capture_live

    clock = Clock()
    cluster = connected(lab, pki, tmp_path, deadline=10.0, clock=clock, sleep=clock.sleep)
    kinds = [find("", "Node"), find("apps", "Deployment"), find("batch", "Job")]
    resources = [resource for resource in kinds if resource is not None]
    for label in ("nodes", "deployments.apps", "jobs.batch"):
        lab.behaviour.faults[label] = [Fault(status=503)] * 10
    capture = capture_live(cluster, resources, [])
    cluster.close()
    assert capture.listed == frozenset()
    outcomes = [(item.kind, item.status) for item in capture.unavailable]
    assert outcomes == [("Node", "failed"), ("Deployment", "not read"), ("Job", "not read")]
    # The backoff's last wait is cut to the deadline, and nothing is tried after it.
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 0.5, 1.0, 1.0] and clock.now == 10.0
    assert len(lab.queries("/apis/apps/v1/deployments")) == 3
    assert lab.queries("/apis/batch/v1/jobs") == []
    assert "deadline for reading the cluster (10 s) passed" in capture.unavailable[2].message
