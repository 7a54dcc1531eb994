"""Patterns from the input are matched without backtracking (issue 21, class 5).

A namespaced Kyverno ``Policy`` with ``imageReferences: ["*a*a*a*a*a*a*a*a*a*a*a*a*a*a*!"]``
and a Pod whose image is sixty ``a`` made ``poolgate scan`` run for minutes: the pattern
became a regular expression, and Python's ``re`` backtracks. ``scanner.model.wildcards``
replaces every such translation. These tests check that it means exactly what the
regular expressions (or ``fnmatch``) meant, on random patterns and texts, that its
work is bounded by one pass, and that the attacks finish through the command line.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable
from pathlib import Path

import cli_run
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scanner.findings.suppress import parse_ignore
from scanner.model.imagerefs import kyverno_wildcard_matches, sigstore_glob_matches
from scanner.model.wildcards import AUTOMATON_LIMIT, Dialect, compile_pattern, matches

TIMEOUT = 120  # seconds; each scan below takes about one. Only backtracking gets near it.
SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ATTACK = "*a" * 14 + "*!"


# --- the regular expressions the matcher replaces (small inputs only: they backtrack) ---


def kyverno_regex(pattern: str) -> re.Pattern[str]:
    translated = "".join(
        ".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern
    )
    return re.compile(translated, re.DOTALL)


def glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.S)


def sigstore_regex(glob: str) -> re.Pattern[str]:
    """policy-controller's ``glob.Compile`` (``**`` -> ``.*``, ``*`` -> ``[^/]*``)."""
    parts = []
    for index, piece in enumerate(glob.split("**")):
        if index:
            parts.append(".*")
        parts.append("[^/]*".join(re.escape(text) for text in piece.split("*")))
    return re.compile("".join(parts))


REFERENCES: dict[Dialect, Callable[[str, str], bool]] = {
    Dialect.KYVERNO: lambda p, t: kyverno_regex(p).fullmatch(t) is not None,
    Dialect.GLOB: lambda p, t: glob_regex(p).fullmatch(t) is not None,
    Dialect.SIGSTORE: lambda p, t: sigstore_regex(p).fullmatch(t) is not None,
    Dialect.FNMATCH: lambda p, t: fnmatch.fnmatchcase(t, p),
}
PATTERN_CHARS = {
    Dialect.KYVERNO: "ab/*?.",
    Dialect.GLOB: "ab/*?.\\",
    Dialect.SIGSTORE: "ab/*.:\n",
    Dialect.FNMATCH: "ab/*?[]!-^\\",
}
TEXT_CHARS = {
    Dialect.KYVERNO: "ab/.?\n",
    Dialect.GLOB: "ab/.?\\\n",
    Dialect.SIGSTORE: "ab/.:\n",
    Dialect.FNMATCH: "ab/-!^[]\\\n",
}


def _agree(dialect: Dialect, pattern: str, text: str) -> None:
    expected = REFERENCES[dialect](pattern, text)
    assert matches(pattern, text, dialect) is expected, (dialect, pattern, text)


@pytest.mark.parametrize("dialect", list(Dialect), ids=lambda d: d.value)
def test_matches_as_the_expression_it_replaces(dialect: Dialect) -> None:
    @SETTINGS
    @given(
        st.text(PATTERN_CHARS[dialect], max_size=10),
        st.text(TEXT_CHARS[dialect], max_size=10),
    )
    def check(pattern: str, text: str) -> None:
        _agree(dialect, pattern, text)

    check()


@pytest.mark.parametrize("dialect", list(Dialect), ids=lambda d: d.value)
def test_matches_texts_made_from_the_pattern(dialect: Dialect) -> None:
    """Random texts rarely match; these are the pattern with its wildcards filled in."""

    @SETTINGS
    @given(st.text(PATTERN_CHARS[dialect], max_size=10), st.data())
    def check(pattern: str, data: st.DataObject) -> None:
        fill = st.text(TEXT_CHARS[dialect], max_size=3)
        text = "".join(data.draw(fill) if char in "*?[]" else char for char in pattern)
        _agree(dialect, pattern, text)

    check()


@pytest.mark.parametrize(
    ("dialect", "pattern", "text", "matched"),
    [
        # Sigstore: "*" stops at "/", "**" does not; stars pair from the left.
        (Dialect.SIGSTORE, "ghcr.io/*/*", "ghcr.io/a/b:1", True),
        (Dialect.SIGSTORE, "ghcr.io/*/*", "ghcr.io/a:1", False),
        (Dialect.SIGSTORE, "ghcr.io/*", "ghcr.io/a/b:1", False),
        (Dialect.SIGSTORE, "ghcr.io/**", "ghcr.io/a/b:1", True),
        (Dialect.SIGSTORE, "ghcr.io/***", "ghcr.io/a/b:1", True),
        (Dialect.SIGSTORE, "ghcr.io/*/**:1", "ghcr.io/a/b/c:1", True),
        (Dialect.SIGSTORE, "ghcr.io/**", "ghcr.io/a\n", False),
        # Kyverno: "?" is exactly one character, "*" crosses "/".
        (Dialect.KYVERNO, "ghcr.io/*", "ghcr.io/a/b:1", True),
        (Dialect.KYVERNO, "a?c", "abc", True),
        (Dialect.KYVERNO, "a?c", "ac", False),
        (Dialect.KYVERNO, "", "", True),
        # Config globs: only "*" is special.
        (Dialect.GLOB, "dcgm-?", "dcgm-x", False),
        (Dialect.GLOB, "dcgm-?", "dcgm-?", True),
        (Dialect.GLOB, "*-exporter", "dcgm-exporter", True),
        # fnmatch: sets, negated sets, and a "[" left open is a literal.
        (Dialect.FNMATCH, "team-[ab]/*", "team-b/trainer", True),
        (Dialect.FNMATCH, "team-[!ab]/*", "team-b/trainer", False),
        (Dialect.FNMATCH, "team-[a/*", "team-[a/x", True),
    ],
)
def test_each_dialect_keeps_its_meaning(
    dialect: Dialect, pattern: str, text: str, matched: bool
) -> None:
    assert matches(pattern, text, dialect) is matched
    assert REFERENCES[dialect](pattern, text) is matched


# --- bounded work ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "pattern"),
    [
        (Dialect.KYVERNO, ATTACK),
        (Dialect.KYVERNO, "*a?" * 14 + "*!"),  # "?" takes the automaton
        (Dialect.SIGSTORE, "*a**" * 14 + "*!"),  # two kinds of star: the automaton
        (Dialect.SIGSTORE, "**a" * 14 + "**!"),
        (Dialect.GLOB, ATTACK),
        (Dialect.FNMATCH, "*[a]" * 14 + "*!"),
    ],
)
@pytest.mark.parametrize("length", [60, AUTOMATON_LIMIT - 1])
def test_work_is_one_pass_at_most(dialect: Dialect, pattern: str, length: int) -> None:
    """Each character is read once at most, or each literal piece looked for once: a
    backtracking matcher tries the stars' splits of the text, exponentially many."""
    for text in ("a" * length, "a" * length + "!", "a" * (length - 1) + "!b"):
        compiled = compile_pattern(pattern, dialect)
        matched, steps = compiled.match_steps(text)
        assert matched is text.endswith("!")
        assert steps <= len(text) + 1
        pieces = pattern.count("a") + 2
        if compiled.pieces or compiled.components:
            assert steps <= pieces


def test_the_automaton_reads_each_character_once() -> None:
    """The count is exact: one pass, no retries, stopping where no position is left."""
    compiled = compile_pattern("*a?" * 3 + "*", Dialect.KYVERNO)
    assert compiled.automaton is not None
    assert compiled.match_steps("a" * 500) == (True, 500)
    assert compiled.match_steps("b" * 500) == (False, 500)  # the stars keep it alive
    dead_end = compile_pattern("?a*", Dialect.KYVERNO)
    assert dead_end.match_steps("bb" + "a" * 500) == (False, 2)
    # The literal ends are compared first; the automaton reads only what lies between.
    ends = compile_pattern("x*a?*!", Dialect.KYVERNO)
    assert ends.match_steps("x" + "a" * 500 + "!") == (True, 500)
    assert ends.match_steps("y" + "a" * 500 + "!") == (False, 1)


def test_the_automaton_refuses_texts_and_patterns_past_its_limit() -> None:
    """Its work is text x pattern: past ``AUTOMATON_LIMIT`` characters of either, the
    text does not match (an image no policy covers), and nothing is read."""
    compiled = compile_pattern("*a?*", Dialect.KYVERNO)
    assert compiled.match_steps("a" * AUTOMATON_LIMIT) == (True, AUTOMATON_LIMIT)
    assert compiled.match_steps("a" * (AUTOMATON_LIMIT + 1)) == (False, 1)
    long_pattern = compile_pattern("*a?" * (AUTOMATON_LIMIT // 2) + "*", Dialect.KYVERNO)
    assert long_pattern.automaton is not None
    assert long_pattern.match_steps("ab" * 3000) == (False, 1)


# --- the attacks, as a pull request author writes them ---------------------------------

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team-a
spec:
  containers:
    - name: c
      image: {image}
"""

KYVERNO_POLICY = f"""\
apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: verify
  namespace: team-a
spec:
  validationFailureAction: Enforce
  rules:
    - name: check
      match:
        any:
          - resources:
              kinds: [Pod]
      verifyImages:
        - imageReferences: ["{ATTACK}"]
          attestors: []
"""

SIGSTORE_POLICY = """\
apiVersion: policy.sigstore.dev/v1beta1
kind: ClusterImagePolicy
metadata:
  name: verify
spec:
  images:
{images}
  authorities:
    - keyless: {{url: "https://fulcio.sigstore.dev"}}
"""


def repo(tmp_path: Path, **files: str) -> Path:
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def scan(root: Path, *args: str) -> dict[str, object]:
    result = cli_run.poolgate("scan", ".", "--format", "json", *args, cwd=root, timeout=TIMEOUT)
    assert result.returncode in (0, 1), result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def rule_ids(report: dict[str, object]) -> set[str]:
    findings = report["findings"]
    assert isinstance(findings, list)
    return {finding["ruleId"] for finding in findings}


def test_kyverno_image_references_do_not_backtrack(tmp_path: Path) -> None:
    pod = POD.format(name="p", image="a" * 60)
    root = repo(tmp_path, **{"policy.yaml": KYVERNO_POLICY, "pod.yaml": pod})
    report = scan(root)
    assert "PG502" in rule_ids(report)  # the pattern matches nothing: not verified


def test_sigstore_globs_do_not_backtrack(tmp_path: Path) -> None:
    # One kind of star (pieces per component), and both kinds (the automaton). A glob
    # may hold only [a-zA-Z0-9-_:/*.], so it ends in "b" where the name ends in "t".
    globs = ["ghcr.io/" + "*a" * 14 + "*b", "ghcr.io/" + "**a*" * 10 + "*b"]
    image = "ghcr.io/" + "a" * 60
    images = "\n".join(f'    - glob: "{glob}"' for glob in globs)
    files = {
        "policy.yaml": SIGSTORE_POLICY.format(images=images),
        "pod.yaml": POD.format(name="p", image=image),
    }
    assert "PG502" in rule_ids(scan(repo(tmp_path, **files)))
    assert not any(sigstore_glob_matches(glob, image) for glob in globs)


def test_config_exemption_globs_do_not_backtrack(tmp_path: Path) -> None:
    config = f"""\
apiVersion: poolgate.io/v1alpha1
kind: GpuPoolGate
spec:
  exemptions:
    - rule: PG501
      match: {{name: "{ATTACK}"}}
      reason: never matches
"""
    pod = POD.format(name="a" * 60, image="nvcr.io/nvidia/cuda:12.4.0")
    root = repo(tmp_path, **{".poolgate.yaml": config, "pod.yaml": pod})
    report = scan(root)
    findings = report["findings"]
    assert isinstance(findings, list)
    [unpinned] = [f for f in findings if f["ruleId"] == "PG501"]
    assert unpinned["suppression"] is None


def test_an_ignore_annotation_is_read_in_linear_time(tmp_path: Path) -> None:
    """Not a pattern, but the same attack on the suppression parser: splitting at
    ``\\s*,\\s*(?=...)`` retried every blank of a run of blanks (20,000 blanks took a
    second, so each of these twenty took minutes)."""
    value = "PG501=" + " " * 250_000 + "x"  # under the rules' string limit (256 KiB)
    pods = [
        POD.format(name=f"p{index}", image="nvcr.io/nvidia/cuda:12.4.0").replace(
            "  namespace: team-a\n",
            f'  namespace: team-a\n  annotations:\n    poolgate.io/ignore: "{value}"\n',
        )
        for index in range(20)
    ]
    root = repo(tmp_path, **{"pods.yaml": "---\n".join(pods)})
    findings = scan(root)["findings"]
    assert isinstance(findings, list)
    unpinned = [f for f in findings if f["ruleId"] == "PG501"]
    assert len(unpinned) == 20
    assert all(f["suppression"] is not None for f in unpinned)  # reason "x", after blanks


def test_kyverno_and_sigstore_helpers_use_the_matcher() -> None:
    """The model's matchers are this module's (the attack pattern returns at once)."""
    assert not kyverno_wildcard_matches(ATTACK, "a" * 10_000)
    assert kyverno_wildcard_matches("*a*!", "a" * 10_000 + "!")
    assert sigstore_glob_matches("ghcr.io/**", "ghcr.io/a/b")


# --- the suppression parser keeps its meaning -----------------------------------------

_OLD_ID = r"[A-Za-z][A-Za-z0-9]*[0-9]{3}"
_OLD_SEPARATOR = re.compile(rf"\s*,\s*(?={_OLD_ID}\s*(?:=|,|$))")


def _old_entries(value: str) -> list[str]:
    """How ``parse_ignore`` cut a value before (quadratic in a run of blanks)."""
    lines = value.strip().splitlines()
    raw = [part for line in lines for part in _OLD_SEPARATOR.split(line.strip())]
    return [e for e in (part.strip().strip(",").strip() for part in raw) if e]


@settings(max_examples=800, deadline=None)
@given(
    st.lists(st.sampled_from([*"PG3015=, \t\nxa", "PG301", "PG004", " , "]), max_size=20).map(
        "".join
    )
)
@example("PG301=a, b, PG004=c,,PG301 , x")
def test_annotation_entries_are_cut_where_they_were(value: str) -> None:
    known = {"PG301", "PG004", "PG501"}
    parsed = parse_ignore(value, known)
    old = _old_entries(value)
    # Every old entry is judged the same way: same reasons, same number of problems.
    expected_reasons: dict[str, str] = {}
    problems = 0
    for entry in old:
        found = re.fullmatch(rf"(?P<id>{_OLD_ID})\s*(?:=(?P<reason>.*))?", entry)
        if found is None:
            problems += 1
            continue
        rule, reason = found["id"].upper(), " ".join((found["reason"] or "").split())
        if rule not in known or rule == "PG004" or not reason:
            problems += 1
        else:
            expected_reasons.setdefault(rule, reason)
    if value.strip():
        assert dict(parsed.reasons) == expected_reasons
        assert len(parsed.problems) == problems
