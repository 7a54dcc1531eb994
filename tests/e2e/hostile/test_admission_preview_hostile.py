"""Hostile admission policies in the scanned input (the admission preview, PG606).

A pull request can add ValidatingAdmissionPolicies next to its workloads. They run with
the rule cost limits, one that cannot run is a notification naming its file and line
(never a crash, never a silent pass), and their number is bounded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_run import poolgate

from scanner.evaluate.preview import MAX_RUNS


def _policy(name: str, expression: str, message_expression: str = "") -> str:
    extra = (
        f"      messageExpression: {json.dumps(message_expression)}\n" if message_expression else ""
    )
    return f"""\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["pods"]
  validations:
    - expression: {json.dumps(expression)}
      message: {name} says no
{extra}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [Deny]
"""


def _pod(containers: int = 1) -> str:
    items = "".join(f"    - {{name: c{i}, image: x}}\n" for i in range(containers))
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: wide\n  namespace: ml\n"
        f"spec:\n  runtimeClassName: nvidia\n  containers:\n{items}"
    )


def _scan(repo: Path) -> tuple[int, dict[str, Any]]:
    """Exit 3 (incomplete) when a policy could not run: findings do not decide it."""
    result = poolgate("scan", ".", "--format", "json", "--fail-on", "never", cwd=repo, timeout=120)
    assert result.returncode in (1, 3), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_a_policy_nested_past_the_cost_limit_is_refused_naming_file_and_line(
    tmp_path: Path,
) -> None:
    nested = "object.spec.containers.all(a, " * 4 + "a.name != ''" + ")" * 4
    (tmp_path / "policy.yaml").write_text(_policy("nested", nested))
    (tmp_path / "pod.yaml").write_text(_pod())
    code, report = _scan(tmp_path)
    assert code == 3
    notes = [n for n in report["notifications"] if "nested" in n["message"]]
    assert notes and notes[0]["uri"].endswith("policy.yaml") and notes[0]["line"] == 13
    assert notes[0]["level"] == "error"
    assert "rule cost limit" in notes[0]["message"]
    assert not [f for f in report["findings"] if f["ruleId"] == "PG606"]
    # The rest of the scan still ran.
    assert any(f["ruleId"] == "PG501" for f in report["findings"])


def test_a_policy_that_iterates_without_end_stops_at_the_iteration_limit(tmp_path: Path) -> None:
    cube = (
        "object.spec.containers.all(a, object.spec.containers.all(b, "
        "object.spec.containers.all(c, a.name + b.name + c.name != '')))"
    )
    (tmp_path / "policy.yaml").write_text(_policy("cube", cube))
    (tmp_path / "pod.yaml").write_text(_pod(containers=900))  # 729 million iterations
    _, report = _scan(tmp_path)
    [finding] = [f for f in report["findings"] if f["ruleId"] == "PG606"]
    assert finding["outcome"] == "error" and finding["level"] == "error"
    assert "would be denied: evaluation error" in finding["message"]
    assert "rule cost limit" in finding["message"]


def test_a_policy_that_does_not_compile_is_a_notification_not_a_pass(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(_policy("broken", "object.spec.(("))
    (tmp_path / "pod.yaml").write_text(_pod())
    code, report = _scan(tmp_path)
    assert code == 3
    [note] = [
        n for n in report["notifications"] if "spec.validations[0].expression" in n["message"]
    ]
    assert note["uri"].endswith("policy.yaml") and note["line"] == 13


def test_the_number_of_policies_run_is_bounded(tmp_path: Path) -> None:
    """Policies, bindings and param objects multiply the evaluations of a workload."""
    for index in range(MAX_RUNS + 2):
        (tmp_path / f"policy{index:03}.yaml").write_text(
            _policy(f"deny{index:03}", "object.metadata.name == 'nothing'")
        )
    (tmp_path / "pod.yaml").write_text(_pod())
    code, report = _scan(tmp_path)
    assert code == 3
    assert len([f for f in report["findings"] if f["ruleId"] == "PG606"]) == MAX_RUNS
    [note] = [n for n in report["notifications"] if "admission preview" in n["message"]]
    assert f"more than {MAX_RUNS} evaluations" in note["message"]
    assert "2 not run: deny064, deny065" in note["message"]


def test_a_message_from_the_policy_cannot_write_to_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(
        _policy("loud", "false", "'\\u001b]0;owned\\u0007\\u001b[2J' + object.metadata.name")
    )
    (tmp_path / "pod.yaml").write_text(_pod())
    result = poolgate("scan", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "PG606" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def test_bindings_count_toward_the_bound(tmp_path: Path) -> None:
    bindings = "".join(
        f"---\napiVersion: admissionregistration.k8s.io/v1\n"
        f"kind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: extra{index}\n"
        f"spec:\n  policyName: many\n  validationActions: [Deny]\n"
        for index in range(MAX_RUNS)
    )
    (tmp_path / "policy.yaml").write_text(_policy("many", "false") + bindings)
    (tmp_path / "pod.yaml").write_text(_pod())
    code, report = _scan(tmp_path)
    assert code == 3
    assert not [f for f in report["findings"] if f["ruleId"] == "PG606"]
    [note] = [n for n in report["notifications"] if "admission preview" in n["message"]]
    assert "1 not run: many" in note["message"]
