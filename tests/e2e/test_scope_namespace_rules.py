"""Absence of evidence (docs/usage.md, "Scope"): namespace, identity, RuntimeClass and signature rules
conclude from something missing only where the scan, or ``--context``, can see."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from scanner.pipeline import Ruleset, ScanOptions, load_ruleset, scan_paths

RULES = {"PG109", "PG304", "PG305", "PG402", "PG502"}

WORKLOAD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: inference
spec:
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      serviceAccountName: llm
      runtimeClassName: nvida
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.5.0
          resources: {limits: {nvidia.com/gpu: 1}}
"""

PLATFORM = """\
apiVersion: v1
kind: Namespace
metadata:
  name: inference
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: llm
  namespace: inference
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
"""


@cache
def ruleset() -> Ruleset:
    return load_ruleset(ScanOptions(enable=sorted(RULES)))


def found(
    tmp_path: Path, scanned: str, context: tuple[str, ...] = ()
) -> list[tuple[str, str, int]]:
    report = scan_paths(
        [str(tmp_path / scanned)],
        ruleset(),
        repo_root=tmp_path,
        context=[str(tmp_path / name) for name in context],
    )
    return sorted(
        (f.rule_id, f.location.uri, f.location.line) for f in report.findings if f.rule_id in RULES
    )


def write(tmp_path: Path) -> None:
    (tmp_path / "workload.yaml").write_text(WORKLOAD)
    (tmp_path / "platform.yaml").write_text(PLATFORM)


def test_a_lone_gpu_deployment_gets_no_finding_that_rests_on_unseen_objects(tmp_path: Path) -> None:
    write(tmp_path)
    assert found(tmp_path, "workload.yaml") == []


def test_context_objects_make_workload_findings_possible(tmp_path: Path) -> None:
    write(tmp_path)
    assert found(tmp_path, "workload.yaml", ("platform.yaml",)) == [
        ("PG109", "workload.yaml", 14),
        ("PG402", "workload.yaml", 13),
        ("PG502", "workload.yaml", 17),
    ]


def test_context_namespaces_are_joined_but_never_reported(tmp_path: Path) -> None:
    write(tmp_path)
    # The Namespace comes from context: PG304/PG305 cannot report on it.
    assert not {rule for rule, _, _ in found(tmp_path, "workload.yaml", ("platform.yaml",))} & {
        "PG304",
        "PG305",
    }
    # Scanned, with the workload as context, the Namespace is reported on.
    assert found(tmp_path, "platform.yaml", ("workload.yaml",)) == [
        ("PG304", "platform.yaml", 3),
        ("PG305", "platform.yaml", 4),
    ]
