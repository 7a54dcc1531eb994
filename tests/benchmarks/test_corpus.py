"""The benchmark inputs: deterministic, the requested size, valid YAML, realistic.

No timing here: performance is measured by ``python -m benchmarks``.
"""

from __future__ import annotations

import json
import sys
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
    # DESIGN.md's reference: 10,000 objects = 17.7 MB in 1,343 files.
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


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_snapshot(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"snap{suffix}"
    info = write_snapshot(path, nodes=40, pods=300, seed=3)
    text = path.read_text()
    data = json.loads(text) if suffix == ".json" else yaml.load(text, Loader=_Loader)
    assert data["kind"] == "List"
    items = data["items"]
    nodes = [i for i in items if i["kind"] == "Node"]
    pods = [i for i in items if i["kind"] == "Pod"]
    assert (len(nodes), len(pods)) == (info.nodes, info.pods) == (40, 300)
    assert sum(i["kind"] == "Namespace" for i in items) == info.namespaces
    gpu_nodes = [n for n in nodes if "nvidia.com/gpu.product" in n["metadata"]["labels"]]
    assert gpu_nodes
    assert all("pool" in n["metadata"]["labels"] for n in nodes)
    gpu_pods = [
        p
        for p in pods
        if any(
            k.startswith("nvidia.com/") for k in p["spec"]["containers"][0]["resources"]["limits"]
        )
    ]
    assert 0.2 < len(gpu_pods) / len(pods) < 0.45
    assert {p["status"]["phase"] for p in pods} == {"Running", "Pending"}
    assert all("nodeName" in p["spec"] for p in pods if p["status"]["phase"] == "Running")
    node_names = {n["metadata"]["name"] for n in nodes}
    assert all(p["spec"]["nodeName"] in node_names for p in pods if "nodeName" in p["spec"])
    again = tmp_path / f"again{suffix}"
    write_snapshot(again, nodes=40, pods=300, seed=3)
    assert again.read_bytes() == path.read_bytes()
