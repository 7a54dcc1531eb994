"""The benchmark inputs: deterministic, the requested size, valid YAML, realistic.

No timing here: performance is measured by ``python -m benchmarks``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

# Plain ``pytest`` puts only this directory on sys.path, not the repository root.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.corpus import CorpusFile, generate_corpus, write_corpus  # noqa: E402
from benchmarks.emit import count_lines, document_lines, dump_document  # noqa: E402
from benchmarks.snapshot import write_snapshot  # noqa: E402
from benchmarks.workloads import (  # noqa: E402
    GPU_RESOURCES,
    WORKLOAD_KINDS,
)

# libyaml's safe loader where it is built in: same safety, ten times the speed.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def corpus() -> list[CorpusFile]:
    return list(generate_corpus(2000, seed=7))


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    template = (
        spec["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob" else spec["template"]
    )
    pod: dict[str, Any] = template["spec"]
    return pod


def _gpu_resources(obj: dict[str, Any]) -> set[str]:
    pod = _pod_spec(obj)
    names: set[str] = set()
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        names |= set(c.get("resources", {}).get("limits", {})) & set(GPU_RESOURCES)
    return names


def test_same_seed_same_corpus(tmp_path: Path) -> None:
    a = write_corpus(tmp_path / "a", 300, seed=11)
    b = write_corpus(tmp_path / "b", 300, seed=11)
    assert a == b
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.yaml"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.yaml"))
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_other_seed_other_corpus() -> None:
    render = [cf.render() for cf in generate_corpus(100, seed=1)]
    assert render != [cf.render() for cf in generate_corpus(100, seed=2)]


@pytest.mark.parametrize("objects", [0, 1, 6, 97, 1000])
def test_requested_object_count(tmp_path: Path, objects: int) -> None:
    info = write_corpus(tmp_path, objects)
    files = list(tmp_path.rglob("*.yaml"))
    assert info.objects == objects
    assert info.files == len(files)
    assert info.bytes == sum(p.stat().st_size for p in files)
    parsed = sum(len(list(yaml.load_all(p.read_text(), Loader=_Loader))) for p in files)
    assert parsed == objects


def test_files_parse_back_to_the_generated_objects(corpus: list[CorpusFile]) -> None:
    for cf in corpus[::15]:
        assert list(yaml.safe_load_all(cf.render())) == cf.objects, cf.path


def test_layout_and_file_sizes(corpus: list[CorpusFile]) -> None:
    assert all(cf.path.startswith("team-") and cf.path.endswith(".yaml") for cf in corpus)
    assert all(cf.path.count("/") in (1, 2) for cf in corpus)  # team-x/ and team-x/app-y/
    assert all(5 <= len(cf.objects) <= 10 for cf in corpus[:-1])
    assert len({cf.path for cf in corpus}) == len(corpus)


def test_kinds_and_identities(corpus: list[CorpusFile]) -> None:
    objs = [obj for cf in corpus for obj in cf.objects]
    kinds = {obj["kind"] for obj in objs}
    assert set(WORKLOAD_KINDS) <= kinds
    assert {"Namespace", "ConfigMap", "NetworkPolicy", "ServiceAccount", "Service"} <= kinds
    ids = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(set(ids)) == len(ids)
    namespaces = [o for o in objs if o["kind"] == "Namespace"]
    assert all("poolgate.io/trust-domain" in ns["metadata"]["labels"] for ns in namespaces)
    assert all(
        "pod-security.kubernetes.io/enforce" in ns["metadata"]["labels"] for ns in namespaces
    )
    annotations = [
        o["metadata"].get("annotations", {}) for o in objs if o["kind"] == "ServiceAccount"
    ]
    assert any("iam.gke.io/gcp-service-account" in a for a in annotations)


def test_about_a_third_of_workloads_request_gpus(corpus: list[CorpusFile]) -> None:
    workloads = [o for cf in corpus for o in cf.objects if o["kind"] in WORKLOAD_KINDS]
    gpu = [o for o in workloads if _gpu_resources(o)]
    assert 0.25 <= len(gpu) / len(workloads) <= 0.42
    resources = set().union(*(_gpu_resources(o) for o in gpu))
    assert resources == set(GPU_RESOURCES)
    with_runtime = [o for o in gpu if _pod_spec(o).get("runtimeClassName") == "nvidia"]
    with_sku = [o for o in gpu if "sku" in _pod_spec(o).get("nodeSelector", {})]
    assert len(with_runtime) > len(gpu) / 2
    assert len(with_sku) > len(gpu) / 2
    skus = {_pod_spec(o)["nodeSelector"]["sku"] for o in with_sku}
    assert skus == {"h100", "a100", "l4"}


def test_images_pinned_tagged_and_a_few_privileged(corpus: list[CorpusFile]) -> None:
    workloads = [o for cf in corpus for o in cf.objects if o["kind"] in WORKLOAD_KINDS]
    containers = [c for o in workloads for c in _pod_spec(o)["containers"]]
    pinned = sum("@sha256:" in c["image"] for c in containers)
    assert 0.2 < pinned / len(containers) < 0.8
    privileged = sum(c.get("securityContext", {}).get("privileged") is True for c in containers)
    assert 0 < privileged < len(containers) / 10


def test_workloads_are_60_to_120_lines(corpus: list[CorpusFile]) -> None:
    lengths: dict[str, list[int]] = {}
    for cf in corpus:
        for obj in cf.objects:
            if obj["kind"] in WORKLOAD_KINDS:
                lengths.setdefault(obj["kind"], []).append(len(document_lines(obj)))
    assert set(lengths) == set(WORKLOAD_KINDS)
    for kind, values in lengths.items():
        assert min(values) >= 60, kind
        assert max(values) <= 120, kind
    deployments = lengths["Deployment"]
    assert max(deployments) - min(deployments) > 30  # a spread, not one template


def test_bytes_per_object_near_the_reference_corpus(tmp_path: Path) -> None:
    # The budget's reference corpus (docs/performance.md): 10,000 objects = 17.7 MB in 1,343 files.
    info = write_corpus(tmp_path, 1000)
    assert 1500 < info.bytes / info.objects < 2000
    assert 6 < info.objects / info.files < 9


_scalars = st.one_of(st.text(), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=40), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, database=None)
@given(st.dictionaries(st.text(max_size=40), _values, min_size=1, max_size=5))
def test_emitter_round_trips_any_document(doc: dict[str, Any]) -> None:
    text = dump_document(doc)
    assert yaml.load(text, Loader=_Loader) == doc
    assert len(text.splitlines()) == count_lines(doc)


def _load(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_Loader)
    assert data["kind"] == "List"
    items: list[dict[str, Any]] = data["items"]
    return items


def _gpu_limits(pod_spec: dict[str, Any]) -> set[str]:
    return {
        k for k in pod_spec["containers"][0]["resources"]["limits"] if k.startswith("nvidia.com/")
    }


def _without_node(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "nodeName"}


@pytest.mark.parametrize("controllers", [True, False], ids=["controllers", "unique"])
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_snapshot(tmp_path: Path, suffix: str, controllers: bool) -> None:
    path = tmp_path / f"snap{suffix}"
    info = write_snapshot(path, nodes=40, pods=300, seed=3, controllers=controllers)
    items = _load(path)
    nodes = [i for i in items if i["kind"] == "Node"]
    pods = [i for i in items if i["kind"] == "Pod"]
    assert (len(nodes), len(pods)) == (info.nodes, info.pods) == (40, 300)
    assert sum(i["kind"] == "Namespace" for i in items) == info.namespaces
    assert len(items) == info.nodes + info.pods + info.namespaces + info.controllers
    assert info.bytes == path.stat().st_size
    gpu_nodes = [n for n in nodes if "nvidia.com/gpu.product" in n["metadata"]["labels"]]
    assert gpu_nodes
    assert all("pool" in n["metadata"]["labels"] for n in nodes)
    assert any(_gpu_limits(p["spec"]) for p in pods)
    assert {p["status"]["phase"] for p in pods} == {"Running", "Pending"}
    assert all("nodeName" in p["spec"] for p in pods if p["status"]["phase"] == "Running")
    node_names = {n["metadata"]["name"] for n in nodes}
    assert all(p["spec"]["nodeName"] in node_names for p in pods if "nodeName" in p["spec"])
    again = tmp_path / f"again{suffix}"
    write_snapshot(again, nodes=40, pods=300, seed=3, controllers=controllers)
    assert again.read_bytes() == path.read_bytes()
    other = tmp_path / f"other{suffix}"
    write_snapshot(other, nodes=40, pods=300, seed=4, controllers=controllers)
    assert other.read_bytes() != path.read_bytes()


def test_both_shapes_share_namespaces_and_nodes(tmp_path: Path) -> None:
    write_snapshot(tmp_path / "c.json", nodes=30, pods=200, seed=5)
    write_snapshot(tmp_path / "u.json", nodes=30, pods=200, seed=5, controllers=False)
    infra = [
        [i for i in _load(tmp_path / name) if i["kind"] in ("Namespace", "Node")]
        for name in ("c.json", "u.json")
    ]
    assert infra[0] == infra[1]
    assert len(infra[0]) > 30


# The worst case is the generator's output from before controllers were modelled;
# the audit figures measured then were on exactly these bytes. Change the digest only
# when the shape is meant to change (and say so next to the figures it invalidates).
_UNIQUE_40x300_SEED_3 = "9ca37a474d07a96f8a212b5948cf987ecd10b4713db20cc8ee297540a7872622"


def test_worst_case_shape_every_pod_its_own_template_owners_absent(tmp_path: Path) -> None:
    path = tmp_path / "unique.json"
    info = write_snapshot(path, nodes=40, pods=300, seed=3, controllers=False)
    # The items are byte for byte what the generator wrote before controllers were
    # modelled; only the List's first line has since gained the listing annotation.
    _, items_text = path.read_bytes().split(b"\n", 1)
    before = b'{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[\n'
    assert hashlib.sha256(before + items_text).hexdigest() == _UNIQUE_40x300_SEED_3
    items = _load(path)
    assert info.controllers == 0
    assert {i["kind"] for i in items} == {"Namespace", "Node", "Pod"}
    pods = [i for i in items if i["kind"] == "Pod"]
    assert 0.2 < sum(bool(_gpu_limits(p["spec"])) for p in pods) / len(pods) < 0.45
    owners = [p["metadata"]["ownerReferences"] for p in pods]
    assert all(len(o) == 1 and o[0]["kind"] == "ReplicaSet" for o in owners)
    assert len({o[0]["uid"] for o in owners}) == len(pods)  # one absent owner per pod
    specs = {json.dumps(_without_node(p["spec"]), sort_keys=True) for p in pods}
    assert len(specs) == len(pods)  # no two pods share a template


# ---- the controllers shape ---------------------------------------------------------


@pytest.fixture(scope="module")
def controlled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("snapshot") / "controllers.json"
    info = write_snapshot(path, nodes=60, pods=3000, seed=5)
    return info, _load(path)


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def _template(obj: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = obj["spec"]["template"]
    return template


def test_controllers_counts(controlled: tuple[Any, list[dict[str, Any]]]) -> None:
    info, items = controlled
    kinds = Counter(i["kind"] for i in items)
    assert kinds["Pod"] == info.pods == 3000
    assert kinds["Node"] == info.nodes == 60
    assert kinds["Namespace"] == info.namespaces
    assert set(kinds) == {
        "Namespace",
        "Node",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "Job",
        "Pod",
    }
    assert (
        info.controllers == sum(kinds.values()) - kinds["Pod"] - kinds["Node"] - kinds["Namespace"]
    )
    assert kinds["ReplicaSet"] == kinds["Deployment"]  # the current one of each
    bare = sum("ownerReferences" not in i["metadata"] for i in items if i["kind"] == "Pod")
    apps = kinds["Deployment"] + kinds["StatefulSet"] + kinds["Job"] + bare
    assert 0.6 < kinds["Deployment"] / apps < 0.8
    assert 0.07 < kinds["StatefulSet"] / apps < 0.17
    assert 0.1 < kinds["Job"] / apps < 0.2
    assert 0 < bare / apps < 0.06
    assert len({_key(i) for i in items}) == len(items)
    assert len({i["metadata"]["uid"] for i in items}) == len(items)


def test_every_owner_is_in_the_snapshot(controlled: tuple[Any, list[dict[str, Any]]]) -> None:
    _, items = controlled
    by_key = {_key(i): i for i in items}
    owned = 0
    for obj in items:
        for ref in obj["metadata"].get("ownerReferences", []):
            owner = by_key[(ref["kind"], obj["metadata"]["namespace"], ref["name"])]
            assert ref["uid"] == owner["metadata"]["uid"]
            assert ref["apiVersion"] == owner["apiVersion"]
            assert ref["controller"] is True and ref["blockOwnerDeletion"] is True
            owned += 1
    pods = [i for i in items if i["kind"] == "Pod"]
    assert all(len(i["metadata"].get("ownerReferences", [])) <= 1 for i in items)
    assert sum("ownerReferences" in p["metadata"] for p in pods) > 0.95 * len(pods)
    assert all(
        i["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
        for i in items
        if i["kind"] == "ReplicaSet"
    )
    assert owned == sum("ownerReferences" in i["metadata"] for i in items)


def test_replicas_share_their_controllers_template(
    controlled: tuple[Any, list[dict[str, Any]]],
) -> None:
    _, items = controlled
    by_key = {_key(i): i for i in items}
    nodes = {i["metadata"]["name"]: i for i in items if i["kind"] == "Node"}
    replicas: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for pod in (i for i in items if i["kind"] == "Pod"):
        for ref in pod["metadata"].get("ownerReferences", []):
            replicas.setdefault(
                (ref["kind"], pod["metadata"]["namespace"], ref["name"]), []
            ).append(pod)
    sizes: Counter[int] = Counter()
    for key, pods in replicas.items():
        owner = by_key[key]
        template, spec = _template(owner), owner["spec"]
        assert all(_without_node(p["spec"]) == template["spec"] for p in pods), key
        assert all(
            template["metadata"]["labels"].items() <= p["metadata"]["labels"].items() for p in pods
        )
        selector = spec["selector"]["matchLabels"]
        assert all(selector.items() <= p["metadata"]["labels"].items() for p in pods)
        wanted = spec["parallelism"] if key[0] == "Job" else spec["replicas"]
        assert wanted == len(pods), key
        running = sum(p["status"]["phase"] == "Running" for p in pods)
        assert owner["status"]["ready" if key[0] == "Job" else "readyReplicas"] == running
        sizes[len(pods)] += 1
        gpu = _gpu_limits(template["spec"])
        if gpu:  # one pool for all replicas, and it offers the resource
            (resource,) = gpu
            scheduled = [nodes[p["spec"]["nodeName"]] for p in pods if "nodeName" in p["spec"]]
            assert len({n["metadata"]["labels"]["pool"] for n in scheduled}) <= 1, key
            assert all(resource in n["status"]["capacity"] for n in scheduled), key
        if key[0] == "ReplicaSet":
            deployment = by_key[
                ("Deployment", key[1], owner["metadata"]["ownerReferences"][0]["name"])
            ]
            assert _template(deployment)["spec"] == template["spec"]
            pod_hash = owner["metadata"]["labels"]["pod-template-hash"]
            assert all(p["metadata"]["labels"]["pod-template-hash"] == pod_hash for p in pods)
        if key[0] == "StatefulSet":
            names = sorted(p["metadata"]["name"] for p in pods)
            assert names == sorted(f"{key[2]}-{i}" for i in range(len(pods)))
            assert all("controller-revision-hash" in p["metadata"]["labels"] for p in pods)
        if key[0] == "Job":
            assert template["spec"]["restartPolicy"] == "Never"
            uid = owner["metadata"]["uid"]
            assert all(p["metadata"]["labels"]["controller-uid"] == uid for p in pods)
            assert all(
                p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == key[2] for p in pods
            )
    # At most the last app is cut short to make the pod count exact.
    assert sum(n for size, n in sizes.items() if size not in (1, 2, 3, 5, 10, 20)) <= 1
    assert {1, 2, 3, 5, 10, 20} <= set(sizes)


def test_controllers_shape_per_app_decisions(controlled: tuple[Any, list[dict[str, Any]]]) -> None:
    _, items = controlled
    pods = [i for i in items if i["kind"] == "Pod"]
    assert 0.2 < sum(bool(_gpu_limits(p["spec"])) for p in pods) / len(pods) < 0.45
    templates = [
        _template(i)["spec"] for i in items if i["kind"] in ("Deployment", "StatefulSet", "Job")
    ]
    gpu = [t for t in templates if _gpu_limits(t)]
    assert 0.25 < len(gpu) / len(templates) < 0.42
    assert 0.8 < sum(t.get("runtimeClassName") == "nvidia" for t in gpu) / len(gpu) < 0.97
    assert 0.75 < sum("nodeSelector" in t for t in gpu) / len(gpu) < 0.93
    assert all(t["tolerations"][0]["key"] == "nvidia.com/gpu" for t in gpu)
    images = [t["containers"][0]["image"] for t in templates]
    assert 0.5 < sum("@sha256:" in i for i in images) / len(images) < 0.7
    operator = [p for p in pods if p["metadata"]["namespace"] == "gpu-operator"]
    assert operator
    assert all(
        p["spec"]["containers"][0]["securityContext"] == {"privileged": True} for p in operator
    )
    phases = Counter(p["status"]["phase"] for p in pods)
    assert 0.85 < phases["Running"] / len(pods) < 0.95
    unscheduled = [p for p in pods if "nodeName" not in p["spec"]]
    assert all(p["status"]["conditions"][0]["reason"] == "Unschedulable" for p in unscheduled)
    assert 0.3 < len(unscheduled) / phases["Pending"] < 0.7


def test_pod_count_is_exact_for_any_size(tmp_path: Path) -> None:
    for pods in (0, 1, 2, 7, 19, 21, 101):
        path = tmp_path / f"p{pods}.json"
        info = write_snapshot(path, nodes=5, pods=pods, seed=pods)
        assert sum(i["kind"] == "Pod" for i in _load(path)) == info.pods == pods
    info = write_snapshot(tmp_path / "empty.json", nodes=0, pods=20, seed=1)
    assert all(
        p["status"]["phase"] == "Pending" and "nodeName" not in p["spec"]
        for p in _load(tmp_path / "empty.json")
        if p["kind"] == "Pod"
    )
