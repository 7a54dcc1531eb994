"""Admission policies from a pull request, loaded with ``--rules``: their CEL runs in
the same sandbox as any rule. Nothing they name is fetched, their cost is bounded by
the rule cost limits, and what they cannot do is refused at load with exit code 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from cli_run import poolgate
from e2e.security.support import listening

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: ml
  annotations:
    poolgate.io/ignore: "{ignore}"
spec:
  containers:
    - name: c
      image: x
"""


def policy(name: str, expression: str) -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: admissionregistration.k8s.io/v1
        kind: ValidatingAdmissionPolicy
        metadata: {{name: {name}}}
        spec:
          matchConstraints:
            resourceRules:
              - {{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}}
          validations:
            - expression: {json.dumps(expression)}
              message: denied by {name}
        """
    )


def run(tmp_path: Path, policy_text: str, *extra: str, ignore: str = "PG401=x") -> object:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.yaml").write_text(policy_text)
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "pod.yaml").write_text(POD.format(ignore=ignore))
    return poolgate(
        "scan",
        str(tmp_path / "k8s"),
        "--rules",
        str(tmp_path / "policies"),
        "--format",
        "json",
        *extra,
        cwd=tmp_path,
    )


def test_a_policy_calling_out_is_refused_and_nothing_is_fetched(tmp_path: Path) -> None:
    with listening() as listener:
        result = run(tmp_path, policy("fetch", f"http.Get('{listener.url}/x') != null"))
    assert result.returncode == 2, result.stderr  # type: ignore[attr-defined]
    assert "uses http.Get/Post" in result.stderr  # type: ignore[attr-defined]
    assert listener.requests == []


def test_an_iteration_bomb_is_stopped_by_the_cost_limits(tmp_path: Path) -> None:
    """Three nested comprehensions over 40 items each: 64,000 iterations, over the
    limit of one evaluation. The finding is an evaluation error, and the scan ends."""
    items = "[" + ", ".join(str(i) for i in range(40)) + "]"
    bomb = f"{items}.all(a, {items}.all(b, {items}.all(c, a + b + c >= 0)))"
    result = run(tmp_path, policy("bomb", bomb), "--cel-engine", "cpp")
    assert result.returncode in (1, 3), result.stderr  # type: ignore[attr-defined]
    found = json.loads(result.stdout)["findings"]  # type: ignore[attr-defined]
    bombs = [f for f in found if f["ruleId"] == "bomb"]
    assert len(bombs) == 1
    assert bombs[0]["message"].startswith("would be denied: evaluation error: ")


def test_imported_findings_are_suppressed_by_their_policy_name(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        policy("gpu-floor", "false"),
        ignore="gpu-floor=CPU-only training image",
    )
    found = json.loads(result.stdout)["findings"]  # type: ignore[attr-defined]
    floor = [f for f in found if f["ruleId"] == "gpu-floor"]
    assert len(floor) == 1 and floor[0]["suppression"], floor


def test_imported_ids_are_accepted_by_disable(tmp_path: Path) -> None:
    result = run(tmp_path, policy("gpu-floor", "false"), "--disable", "gpu-floor")
    found = json.loads(result.stdout)["findings"]  # type: ignore[attr-defined]
    assert result.returncode in (0, 1), result.stderr  # type: ignore[attr-defined]
    assert not [f for f in found if f["ruleId"] == "gpu-floor"]


def test_imported_findings_are_baselined(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    first = run(tmp_path, policy("gpu-floor", "false"), "--write-baseline", str(baseline))
    assert first.returncode in (0, 1), first.stderr  # type: ignore[attr-defined]
    assert "gpu-floor" in baseline.read_text()
    again = poolgate(
        "scan",
        str(tmp_path / "k8s"),
        "--rules",
        str(tmp_path / "policies"),
        "--baseline",
        str(baseline),
        "--format",
        "json",
        cwd=tmp_path,
    )
    found = json.loads(again.stdout)["findings"]
    assert not [f for f in found if f["ruleId"] == "gpu-floor"]
