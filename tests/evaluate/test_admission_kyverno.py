"""Real Kyverno CEL policies, loaded as they are, give the verdicts of their own
``kyverno test`` files (``tests/data/admission/kyverno/``): ``fail`` is a finding of
the policy (or ``<policy>/<rule>``) on the resource, ``pass`` and ``skip`` none.
Autogen rules (``autogen-<rule>``) are the rule's findings on a controller."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from scanner.cel import cpp_available
from scanner.pipeline import ScanOptions, load_ruleset, scan_paths

CASES = Path(__file__).resolve().parents[1] / "data" / "admission" / "kyverno"
ENGINES = ["cpp"] if cpp_available() else []


def _rule_id(result: dict[str, str], policy_ids: set[str]) -> str:
    policy, rule = result["policy"], result.get("rule", "")
    if not rule or policy in policy_ids:
        return policy
    return f"{policy}/{rule.removeprefix('autogen-cronjob-').removeprefix('autogen-')}"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir()), ids=str)
def test_kyverno_verdicts(tmp_path: Path, case: str, engine: str) -> None:
    folder = CASES / case / "kyverno-test"
    test = yaml.safe_load((folder / "kyverno-test.yaml").read_text())
    policies = [(folder / path).resolve() for path in test["policies"]]
    ruleset = load_ruleset(ScanOptions(rule_dirs=policies, engine=engine, include_bundled=False))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for path in test["resources"]:
        shutil.copy(folder / path, manifests / Path(path).name)
    report = scan_paths([str(manifests)], ruleset, repo_root=tmp_path)
    found: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for finding in report.findings:
        if finding.ref is not None:
            key = (finding.rule_id, finding.ref.kind, finding.ref.name)
            found[key].add(finding.outcome.value)
    ids = {rule.id for rule in ruleset.rules}
    checked = 0
    for result in test["results"]:
        rule_id = _rule_id(result, ids)
        assert rule_id in ids, rule_id
        for name in result["resources"]:
            outcomes = found.get((rule_id, result["kind"], name), set())
            verdict = "fail" if outcomes == {"fail"} else ("pass" if not outcomes else "error")
            expected = "pass" if result["result"] == "skip" else result["result"]
            assert verdict == expected, (rule_id, result["kind"], name, outcomes)
            checked += 1
    assert checked > 0
