"""PG303 against Kyverno's Pod Security verdicts (kyverno/policies test suites).

The published test resources and their expected pass/fail verdicts are read at
test time from ``../shared/realworld/kyverno-podsec`` (skipped when absent; they
are not copied here). Each resource is scanned as a GPU workload in a tenant
namespace (a GPU limit is added to its first container, which no check reads),
and PG303's findings for the control a policy checks are compared with the
policy's verdict:

* restricted policies checking the same control: verdicts must be equal;
* baseline policies (a weaker form of a restricted control): every Kyverno
  ``fail`` must be a PG303 finding too (restricted forbids more).

The kyverno-test set and the chainsaw set are kept apart, as the data asks.
Every set runs on the C++ engine; the small chainsaw Pod sets of the restricted
policies also run on the (slow) pure-Python engine, as a second opinion.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from scanner.findings import Finding
from scanner.inventory import Inventory, KubeObject, LineMap, Origin
from scanner.kinds import POD_SPEC_PATHS
from scanner.pipeline import Ruleset, ScanOptions, evaluate_inventory, load_ruleset

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "realworld" / "kyverno-podsec"

EQUAL, IMPLIES = "equal", "implies"
CHECKS: dict[str, tuple[Callable[[str], bool], str]] = {
    "disallow-privilege-escalation": (lambda p: p.endswith(".allowPrivilegeEscalation"), EQUAL),
    "require-run-as-nonroot": (lambda p: p.endswith(".runAsNonRoot"), EQUAL),
    "restrict-seccomp-strict": (lambda p: p.endswith(".seccompProfile.type"), EQUAL),
    "disallow-host-path": (lambda p: p.endswith(".hostPath"), EQUAL),
    "restrict-seccomp": (lambda p: p.endswith(".seccompProfile.type"), IMPLIES),
    "disallow-capabilities": (lambda p: p.endswith(".capabilities.add"), IMPLIES),
}

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} not present")


@cache
def pg303(engine: str) -> Ruleset:
    ruleset = load_ruleset(ScanOptions(engine=engine, enable=["PG303"]))
    return Ruleset(ruleset.engine, [r for r in ruleset.rules if r.id == "PG303"], ruleset.config)


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
    if not DATA.is_dir():
        return
    for policy, (_, mode) in CHECKS.items():
        data = yaml.load((DATA / f"{policy}.yaml").read_text(), Loader=yaml.CSafeLoader)
        test = data["kyverno_test"]
        yield pytest.param(
            policy, test["resources"], test["verdicts"], "cpp", id=f"{policy}-kyverno-test-cpp"
        )
        for entry in data["chainsaw"]["files"]:
            name = Path(entry["file"]).name
            verdicts = [v for v in data["chainsaw"]["verdicts"] if v["file"] == name]
            engines = ["cpp", "python"] if mode == EQUAL and name.startswith("pod-") else ["cpp"]
            for engine in engines:
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
    matches, mode = CHECKS[policy]
    failing = {
        (f.ref.kind, f.ref.name)
        for f in scan(resources, engine)
        if f.ref is not None and matches(f.location.path)
    }
    disagreements = []
    for verdict in verdicts:
        ours = (verdict["kind"], verdict["name"]) in failing
        theirs = verdict["expect"] == "fail"
        if (ours != theirs) if mode == EQUAL else (theirs and not ours):
            disagreements.append(
                f"{verdict['kind']}/{verdict['name']}: kyverno {verdict['expect']}"
            )
    assert not disagreements, disagreements
