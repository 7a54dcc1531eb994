"""Loading on two processes (scanner/sources/parallel.py) gives exactly what one
process gives, in the same order, and falls back to one process when the child fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scanner.inventory import Inventory
from scanner.runtime import executors as forking
from scanner.sources import files, parallel
from scanner.sources.files import load_paths

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{n}, namespace: team-{t}}}
spec:
  template:
    spec:
      containers:
        - name: app
          image: ghcr.io/x/app:{n}
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


@pytest.fixture(autouse=True)
def small_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process's own size is not the subject (by this point of a suite run it
    may hold over ``FORK_BELOW``); tests of the memory guard set it themselves."""
    monkeypatch.setattr(forking, "resident_bytes", lambda: 0)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(parallel, "MIN_FILES", 4)
    monkeypatch.setattr(parallel, "MIN_BYTES", 1)
    monkeypatch.delenv("POOLGATE_JOBS", raising=False)
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    for index in range(40):
        team = tmp_path / f"team-{index % 4}"
        team.mkdir(exist_ok=True)
        text = "---\n".join(DEPLOYMENT.format(n=index * 3 + k, t=index % 4) for k in range(3))
        (team / f"app-{index:02d}.yaml").write_text(text)
    (tmp_path / "team-3" / "zz-broken.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "team-3" / "zz-binary.yaml").write_bytes(b"\xff\xfe not utf-8")
    return tmp_path


def snapshot(inventory: Inventory) -> tuple[object, ...]:
    return (
        [(o.origin, o.body, dict(o.lines.positions)) for o in inventory.objects],
        inventory.invalid,
        inventory.read_errors,
        inventory.warnings,
        inventory.files,
        inventory.skipped,
    )


def test_two_processes_load_exactly_what_one_does(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue: list[list[tuple[Path, str]]] = []
    original = parallel.load

    def recording(chunk: list[tuple[Path, str]], at: int, limit: int) -> Inventory:
        queue.append(chunk)
        return original(chunk, at, limit)

    monkeypatch.setattr(parallel, "load", recording)
    both = load_paths([str(tree)], tree)
    assert queue, "the tree was not loaded on two processes"
    monkeypatch.setenv("POOLGATE_JOBS", "1")
    monkeypatch.setattr(forking, "cpus", lambda: 1)
    one = load_paths([str(tree)], tree)
    assert len(one.objects) == 120 and one.invalid and one.read_errors
    assert snapshot(both) == snapshot(one)


def test_a_failing_child_costs_only_time(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    original = files.load_files

    def failing_in_the_child(chunk: list[tuple[Path, str]], limit: int) -> Inventory:
        if os.getpid() != parent:
            raise MemoryError("the child ran out of memory")
        return original(chunk, limit)

    monkeypatch.setattr(files, "load_files", failing_in_the_child)
    both = load_paths([str(tree)], tree)
    monkeypatch.setattr(forking, "cpus", lambda: 1)
    assert snapshot(both) == snapshot(load_paths([str(tree)], tree))


def test_small_trees_one_cpu_and_stdin_stay_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    few = [(tmp_path / f"{index}.yaml", f"{index}.yaml") for index in range(parallel.MIN_FILES - 1)]
    assert parallel.split(few) is None
    monkeypatch.setenv("POOLGATE_JOBS", "1")
    assert forking.cpus() == 1
