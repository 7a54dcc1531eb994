"""Rule fixture tests (``poolgate rules test``), like ``kyverno test`` for poolgate rules.

Layout: ``<fixtures>/<RULE-ID>/fire*.yaml`` and ``<fixtures>/<RULE-ID>/pass*.yaml``.
In ``fire`` files every line a finding is expected on carries a trailing
``# expect: PG301`` marker (``# expect: PG301 x2`` for two findings on one line,
``# expect: PG301, PG501`` for two rules). The findings of the directory's rule
must land on exactly the marked lines; ``pass`` files (near-misses) must produce
none. Findings of other rules are ignored, so fixtures can stay realistic.

A finding about the cluster as a whole (a ``cluster`` rule such as PG605) has no
line in the file: it is expected with ``# expect-cluster: PG605`` anywhere in the
file, by convention in the header comment (``x2`` and lists work the same way).

Audit-only rules run here too (fixtures are live-shaped objects with ``status``),
judged as of ``FIXTURE_NOW``: a fixture pod created an hour before it has been
Pending for an hour, whatever the date the tests run on.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scanner.errors import printable
from scanner.findings.records import Finding
from scanner.model.cluster import ClusterScope
from scanner.pipeline import Ruleset, scan_paths

FIXTURE_NOW = datetime.datetime(2025, 6, 1, 12, 0, 0, tzinfo=datetime.UTC)
"""The time fixtures are judged at (CEL ``cluster.now`` = ``2025-06-01T12:00:00Z``)."""

_MARKER = re.compile(r"#\s*expect(?P<cluster>-cluster)?:\s*(?P<ids>[A-Z0-9 ,x]+?)\s*$")
CLUSTER_LINE = 0
"""Where ``expected``/``actual`` count findings about the cluster (no line of the file)."""
_ITEM = re.compile(r"^(?P<id>[A-Z][A-Z0-9]*\d{3})(?:\s+x(?P<count>\d+))?$")


@dataclass(frozen=True, slots=True)
class FixtureResult:
    rule_id: str
    path: Path
    expected: Counter[int]
    actual: Counter[int]
    findings: tuple[Finding, ...]
    """Every finding of every rule on the file, for cross-engine comparison."""
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem and self.expected == self.actual

    def explain(self) -> str:
        if self.problem:
            return self.problem
        missing = sorted((self.expected - self.actual).elements())
        extra = sorted((self.actual - self.expected).elements())
        parts = []
        if missing:
            parts.append(f"expected on {_where(missing)} but not found")
        if extra:
            parts.append(f"unexpected on {_where(extra)}")
        return "; ".join(parts)


def _where(lines: Sequence[int]) -> str:
    """``line(s) 3, 7``, ``the cluster``, or ``line(s) 3 and the cluster``."""
    numbers = [str(line) for line in lines if line != CLUSTER_LINE]
    places = [f"line(s) {', '.join(numbers)}"] if numbers else []
    cluster = len(lines) - len(numbers)
    if cluster:
        places.append("the cluster" + (f" ({cluster} findings)" if cluster > 1 else ""))
    return " and ".join(places)


def expected_lines(text: str, rule_id: str) -> Counter[int]:
    """Line -> number of findings of ``rule_id`` the markers expect there
    (``CLUSTER_LINE`` for ``expect-cluster`` markers)."""
    expected: Counter[int] = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        marker = _MARKER.search(line)
        if marker is None:
            continue
        where = CLUSTER_LINE if marker.group("cluster") else number
        for item in marker.group("ids").split(","):
            parsed = _ITEM.match(item.strip())
            if parsed is not None and parsed.group("id") == rule_id:
                expected[where] += int(parsed.group("count") or 1)
    return expected


def fixture_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """(fire files, pass files) of one rule's fixture directory, sorted."""
    files = sorted(
        path for path in directory.iterdir() if path.suffix in (".yaml", ".yml", ".json")
    )
    return (
        [path for path in files if path.name.startswith("fire")],
        [path for path in files if path.name.startswith("pass")],
    )


def run(root: Path, ruleset: Ruleset) -> list[FixtureResult]:
    """Run the fixtures of every rule of ``ruleset`` that has a directory under ``root``."""
    results: list[FixtureResult] = []
    known = {rule.id for rule in ruleset.rules}
    for directory in sorted(path for path in root.iterdir() if path.is_dir()):
        rule_id = directory.name
        fire, passing = fixture_files(directory)
        if rule_id not in known:
            results.append(
                FixtureResult(rule_id, directory, Counter(), Counter(), (), "no such rule")
            )
            continue
        for path in [*fire, *passing]:
            results.append(check_file(path, rule_id, ruleset, expect_findings=path in fire))
    return results


def check_file(
    path: Path, rule_id: str, ruleset: Ruleset, *, expect_findings: bool
) -> FixtureResult:
    report = scan_paths([str(path)], ruleset, repo_root=path.parent, now=FIXTURE_NOW)
    findings = tuple(report.findings)
    cluster = ClusterScope().uri  # what a scan calls the cluster
    actual = Counter(
        CLUSTER_LINE if f.location.uri == cluster else f.location.line
        for f in findings
        if f.rule_id == rule_id
    )
    text = path.read_text(encoding="utf-8", errors="replace")
    expected = expected_lines(text, rule_id)
    problem = ""
    if expect_findings and not expected:
        problem = f"fire fixture has no '# expect: {rule_id}' (or expect-cluster) marker"
    elif not expect_findings and expected:
        problem = "pass fixture carries expect markers"
    return FixtureResult(rule_id, path, expected, actual, findings, problem)


def render(results: Sequence[FixtureResult], verbose: bool) -> str:
    lines: list[str] = []
    failed = [result for result in results if not result.ok]
    for result in results:
        if result.ok and not verbose:
            continue
        status = "ok  " if result.ok else "FAIL"
        detail = "" if result.ok else f": {result.explain()}"
        # One line each: the fixture's name and problem come from files (``printable``).
        lines.append(printable(f"{status} {result.rule_id} {result.path}{detail}"))
    rules = len({result.rule_id for result in results})
    if not results:
        lines.append("no rule fixtures found")
    else:
        lines.append(
            f"rule fixtures: {len(results) - len(failed)} of {len(results)} files as expected "
            f"({rules} rules, {len(failed)} failing)"
        )
    return "\n".join(lines) + "\n"
