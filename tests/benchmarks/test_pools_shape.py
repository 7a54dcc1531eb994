"""The pools x workloads input (benchmarks/pools.py): deterministic, the requested size,
and every Deployment reaches exactly the one NodePool it is pinned to."""

from __future__ import annotations

import sys
from pathlib import Path

from scanner.config.values import Config
from scanner.model import build_model
from scanner.sources.files import load_paths
from scanner.sources.yaml.document import parse_plain

# Plain ``pytest`` puts only this directory on sys.path, not the repository root.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.pools import NAMESPACES, write_pools  # noqa: E402


def test_same_seed_same_files(tmp_path: Path) -> None:
    first = write_pools(tmp_path / "a", 40, seed=3)
    second = write_pools(tmp_path / "b", 40, seed=3)
    assert first == second and first.pools == first.workloads == 40
    for name in ("namespaces.yaml", "nodepools.yaml", "workloads.yaml"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert first.bytes == sum(p.stat().st_size for p in (tmp_path / "a").iterdir())


def test_each_deployment_targets_its_own_pool(tmp_path: Path) -> None:
    write_pools(tmp_path, 24)
    inventory = load_paths([str(tmp_path)], tmp_path)
    model = build_model(inventory, Config(), defer=False, read_yaml=parse_plain)
    assert len(model.pools) == 24
    targets = {
        w.obj.name: [(t["pool"], t["tolerated"], t["decided"]) for t in w.facts["targets"]]
        for w in model.workloads
    }
    assert targets == {f"app-{i}": [(f"gpu-{i}", True, True)] for i in range(24)}
    tenants = {p.facts["name"]: p.facts["tenants"] for p in model.pools}
    assert tenants["gpu-5"] == [
        {
            "namespace": f"team-{5 % NAMESPACES}",
            "trustDomain": f"team-{5 % NAMESPACES}",
            "workloads": 1,
        }
    ]
