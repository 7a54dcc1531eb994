"""PG303 against Kyverno's Pod Security verdicts (kyverno/policies test suites).

The published test resources and their expected pass/fail verdicts are vendored
in ``tests/data/kyverno-podsec`` (its README names the source commit and license). Each resource is scanned as a GPU workload in a tenant
namespace (a GPU limit is added to its first container, which no check reads),
and the findings of the rule that claims the control a policy checks, at the
control's field, are compared with the policy's verdict:

* restricted policies, and baseline policies whose control restricted keeps as it
  is (host ports): verdicts must be equal;
* baseline policies (a weaker form of a restricted control): every Kyverno
  ``fail`` must be a PG303 finding too (restricted forbids more);
* controls PG303 leaves to another rule (privileged containers: PG301, host
  namespaces: PG302, hostPath volumes: PG404): that rule's verdicts must be
  equal, and PG303 must report nothing at those fields (one finding per field).

PG303 gathers a container's controls in one finding; the control's field is one of
its related locations.

The kyverno-test set and the chainsaw set are kept apart, as the data asks.
Every set runs on the C++ engine; the small chainsaw Pod sets of the restricted
policies also run on the (slow) pure-Python engine, as a second opinion.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from scanner.findings.records import Finding
from scanner.inventory import Inventory, KubeObject, LineMap, Origin
from scanner.kinds import POD_SPEC_PATHS
from scanner.pipeline import Ruleset, ScanOptions, evaluate_inventory, load_ruleset

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "kyverno-podsec"

EQUAL, IMPLIES = "equal", "implies"


def _field(*names: str) -> Callable[[str], bool]:
    return lambda path: path.endswith(tuple(f".{name}" for name in names))


class Check(NamedTuple):
    rule: str
    """The rule that claims the policy's control."""
    matches: Callable[[str], bool]
    """Is a finding's path the control's field?"""
    mode: str


CHECKS: dict[str, Check] = {
    "disallow-privilege-escalation": Check("PG303", _field("allowPrivilegeEscalation"), EQUAL),
    "require-run-as-nonroot": Check("PG303", _field("runAsNonRoot"), EQUAL),
    "restrict-seccomp-strict": Check("PG303", _field("seccompProfile.type"), EQUAL),
    "disallow-host-ports": Check("PG303", _field("hostPort"), EQUAL),
    "restrict-seccomp": Check("PG303", _field("seccompProfile.type"), IMPLIES),
    "disallow-capabilities": Check("PG303", _field("capabilities.add"), IMPLIES),
    "disallow-privileged-containers": Check("PG301", _field("privileged"), EQUAL),
    "disallow-host-namespaces": Check("PG302", _field("hostPID", "hostIPC", "hostNetwork"), EQUAL),
    "disallow-host-path": Check("PG404", _field("hostPath"), EQUAL),
}
RULES = sorted({check.rule for check in CHECKS.values()})


@cache
def pg303(engine: str) -> Ruleset:
    """PG303 and the rules it leaves baseline controls to."""
    ruleset = load_ruleset(ScanOptions(engine=engine, enable=RULES))
    return Ruleset(ruleset.engine, [r for r in ruleset.rules if r.id in RULES], ruleset.config)


def as_gpu_tenant(resource: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(resource)
    body.setdefault("metadata", {})["namespace"] = "tenant"
    spec: Any = body
    for key in POD_SPEC_PATHS[body["kind"]]:
        spec = spec[key]
    first = (spec.get("containers") or spec.get("initContainers"))[0]
    first.setdefault("resources", {}).setdefault("limits", {})["nvidia.com/gpu"] = 1
    return body


def scan(resources: list[dict[str, Any]], engine: str) -> list[Finding]:
    objects = [
        KubeObject(as_gpu_tenant(r), Origin(f"doc{i}.yaml"), LineMap({}))
        for i, r in enumerate(resources)
    ]
    report = evaluate_inventory(Inventory(objects=objects), pg303(engine), ROOT)
    return list(report.findings)


def cases() -> Iterator[Any]:
    for policy, check in CHECKS.items():
        data = yaml.load((DATA / f"{policy}.yaml").read_text(), Loader=yaml.CSafeLoader)
        test = data["kyverno_test"]
        yield pytest.param(
            policy, test["resources"], test["verdicts"], "cpp", id=f"{policy}-kyverno-test-cpp"
        )
        for entry in data["chainsaw"]["files"]:
            name = Path(entry["file"]).name
            verdicts = [v for v in data["chainsaw"]["verdicts"] if v["file"] == name]
            python = check.rule == "PG303" and check.mode == EQUAL and name.startswith("pod-")
            for engine in ["cpp", "python"] if python else ["cpp"]:
                yield pytest.param(
                    policy,
                    entry["resources"],
                    verdicts,
                    engine,
                    id=f"{policy}-chainsaw-{name}-{engine}",
                )


@pytest.mark.parametrize(("policy", "resources", "verdicts", "engine"), list(cases()))
def test_pg303_agrees_with_kyverno(
    policy: str, resources: list[dict[str, Any]], verdicts: list[dict[str, Any]], engine: str
) -> None:
    assert verdicts, "no verdicts to compare"
    check = CHECKS[policy]
    findings = scan(resources, engine)
    failing = {
        (f.ref.kind, f.ref.name)
        for f in findings
        if f.ref is not None and f.rule_id == check.rule and any(map(check.matches, _paths(f)))
    }
    disagreements = []
    for verdict in verdicts:
        ours = (verdict["kind"], verdict["name"]) in failing
        theirs = verdict["expect"] == "fail"
        if (ours != theirs) if check.mode == EQUAL else (theirs and not ours):
            disagreements.append(
                f"{verdict['kind']}/{verdict['name']}: kyverno {verdict['expect']}"
            )
    assert not disagreements, disagreements
    if check.rule != "PG303":
        doubled = [
            path
            for f in findings
            if f.rule_id == "PG303"
            for path in _paths(f)
            if check.matches(path)
        ]
        assert not doubled, doubled


def _paths(finding: Finding) -> list[str]:
    """The fields a finding names: its own, and its related locations' (PG303 gathers a
    container's controls in one finding, each control's field a related location)."""
    return [finding.location.path, *(related.location.path for related in finding.related)]
