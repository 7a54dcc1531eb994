"""A pull request must not choose the policy it is judged by (issue 21, item 3).

Each test builds a real git repository in ``tmp_path``: a base commit holding the
policy a platform team reviewed (a root ``.poolgate.yaml`` with a rule directory,
a baseline) and a pull-request commit on top that tries to get past it, as an author
would: a permissive root config (``team-a`` made an operator namespace, rules turned
off or down), a nested ``k8s/.poolgate.yaml`` that wins over the root one, a rule of
its own in a new ``ruleDirs`` entry, an edited rule file, and a baseline holding its
own findings. ``poolgate scan --policy-ref <base>`` must judge it by the base's
policy, name that policy and its digests in every report, and say which policy
files the pull request changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_run import poolgate

TRAIN = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: train
  namespace: team-a
spec:
  replicas: 2
  template:
    spec:
      hostPID: true
      containers:
        - name: trainer
          image: nvcr.io/nvidia/pytorch:24.05-py3
          securityContext:
            privileged: true
          resources:
            limits:
              nvidia.com/gpu: 1
"""

HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"
BASE_CONFIG = (
    HEADER
    + "spec:\n  ruleDirs: [policy/rules]\n  rules:\n    ACME001: {params: {minReplicas: 3}}\n"
)
PERMISSIVE = (
    HEADER
    + """\
spec:
  operatorNamespaces: [gpu-operator, nvidia-gpu-operator, team-a]
  ruleDirs: [../policy/rules, ../evil]
  rules:
    PG303: {level: note}
    PG103: {enabled: false}
    PG104: {enabled: false}
    PG401: {enabled: false}
    ACME001: {enabled: false}
"""
)
ANCESTOR = (
    HEADER
    + """\
spec:
  operatorNamespaces: [gpu-operator, nvidia-gpu-operator, team-a]
  rules:
    PG501: {enabled: false}
"""
)
RULE = """\
id: ACME001
name: min-replicas
level: warning
summary: Deployments run at least params.minReplicas replicas.
description: One replica means every rollout is an outage.
remediation: Raise spec.replicas.
subject: object
match:
  kinds: [Deployment]
params:
  minReplicas: 1
validations:
  - expression: "!has(object.spec.replicas) || object.spec.replicas >= params.minReplicas"
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' < ' + string(params.minReplicas)"
    path: spec.replicas
"""
EVIL = RULE.replace("ACME001", "EVIL001").replace("min-replicas", "leak").replace(": 1", ": 5")


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=poolgate-test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def show(repo: Path, spec: str) -> bytes:
    """The bytes of ``REV:path``, exactly."""
    return subprocess.run(
        ["git", "show", spec], cwd=repo, capture_output=True, check=True, timeout=60
    ).stdout


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def commit_all(repo: Path, message: str) -> str:
    git("add", "-A", ".", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def rule_ids(document: dict[str, Any]) -> list[str]:
    return sorted(f["ruleId"] for f in document["findings"] if f["suppression"] is None)


def base_repository(tmp_path: Path) -> tuple[Path, str]:
    """The base: manifests, the reviewed config and rule, a baseline of the PG303
    findings only (accepted debt)."""
    repo = tmp_path / "repo"
    write(repo / "k8s" / "train.yaml", TRAIN)
    write(repo / ".poolgate.yaml", BASE_CONFIG)
    write(repo / "policy" / "rules" / "ACME001-min-replicas.yaml", RULE)
    git("init", "-q", cwd=repo)
    written = poolgate("scan", "k8s", "--write-baseline", "full.json", "--format", "json", cwd=repo)
    assert written.returncode == 0, written.stderr
    full = json.loads((repo / "full.json").read_text())
    (repo / "full.json").unlink()
    full["fingerprints"] = [e for e in full["fingerprints"] if e["ruleId"] == "PG303"]
    assert len(full["fingerprints"]) == 1  # one PG303 finding per container
    write(repo / "poolgate-baseline.json", json.dumps(full, indent=2) + "\n")
    return repo, commit_all(repo, "base: manifests and the reviewed policy")


def hostile_pull_request(repo: Path) -> str:
    """The pull request: every way its author has to choose its own policy."""
    write(repo / ".poolgate.yaml", PERMISSIVE.replace("../", ""))
    write(repo / "k8s" / ".poolgate.yaml", PERMISSIVE)  # nested: wins in the work tree
    write(repo / "evil" / "EVIL001-leak.yaml", EVIL)
    write(
        repo / "policy" / "rules" / "ACME001-min-replicas.yaml",
        RULE.replace("object.spec.replicas >= params.minReplicas", "true"),
    )
    (repo / "poolgate-baseline.json").unlink()
    written = poolgate(
        "scan", "k8s", "--write-baseline", "poolgate-baseline.json", "--format", "json", cwd=repo
    )
    assert written.returncode == 0, written.stderr
    return commit_all(repo, "pull request: a policy of its own")


def test_the_pull_requests_policy_wins_in_the_work_tree_and_the_report_names_it(
    tmp_path: Path,
) -> None:
    """Today's behaviour, kept for ``policy-ref: head``: the work tree's policy is
    used, and now at least every report says which file it was, with its digest."""
    repo, _ = base_repository(tmp_path)
    hostile_pull_request(repo)
    result = poolgate(
        "scan", "k8s", "--baseline", "poolgate-baseline.json", "--format", "json", cwd=repo
    )
    assert result.returncode == 0, result.stderr  # the attack works without --policy-ref
    document = report(result)
    assert rule_ids(document) == []
    config = document["config"]
    assert config["path"] == "k8s/.poolgate.yaml"
    assert config["source"] == "work-tree"
    assert config["sha256"] == sha256(PERMISSIVE)
    assert config["ref"] is None and config["workTreeChanges"] is None
    assert [item["path"] for item in config["ruleFiles"]] == [
        "policy/rules/ACME001-min-replicas.yaml",
        "evil/EVIL001-leak.yaml",
    ]
    assert config["baseline"]["path"] == "poolgate-baseline.json"
    assert document["summary"]["baselined"] == 2  # PG501 and the pull request's own EVIL001


def test_policy_ref_judges_the_pull_request_by_the_base_policy(tmp_path: Path) -> None:
    repo, base = base_repository(tmp_path)
    expected = report(poolgate("scan", "k8s", "--format", "json", cwd=repo))
    expected_ids = [i for i in rule_ids(expected) if i != "PG303"]  # the base's baseline
    assert {"PG301", "PG302", "PG501", "ACME001"} <= set(expected_ids)
    hostile_pull_request(repo)

    result = poolgate(
        "scan",
        "k8s",
        "--policy-ref",
        base,
        "--baseline",
        "poolgate-baseline.json",
        "--format",
        "json",
        "--format",
        "sarif",
        "--output",
        "-",
        "--output",
        "report.sarif",
        cwd=repo,
    )
    assert result.returncode == 1, result.stderr
    document = report(result)
    assert rule_ids(document) == expected_ids
    assert document["summary"]["baselined"] == 1  # the base's one PG303, no more
    assert document["summary"]["suppressed"] == 0

    config = document["config"]
    assert config == {
        "path": ".poolgate.yaml",
        "source": "git-ref",
        "ref": base,
        "commit": base,
        "sha256": sha256(BASE_CONFIG),
        "ruleFiles": [
            {
                "path": "policy/rules/ACME001-min-replicas.yaml",
                "source": "git-ref",
                "sha256": sha256(RULE),
            }
        ],
        "baseline": {
            "path": "poolgate-baseline.json",
            "source": "git-ref",
            "sha256": sha256(show(repo, f"{base}:poolgate-baseline.json")),
        },
        "workTreeChanges": {
            "ref": base,
            "commit": base,
            "files": [
                {"path": ".poolgate.yaml", "change": "changed"},
                {"path": "k8s/.poolgate.yaml", "change": "added"},
                {"path": "policy/rules/ACME001-min-replicas.yaml", "change": "changed"},
                {"path": "poolgate-baseline.json", "change": "changed"},
            ],
        },
    }
    warnings = [n["message"] for n in document["notifications"] if n["level"] == "warning"]
    assert warnings == [
        f"policy files in the work tree differ from commit {base[:12]}; this scan "
        "used the commit's: .poolgate.yaml (changed), k8s/.poolgate.yaml (added), "
        "policy/rules/ACME001-min-replicas.yaml (changed), poolgate-baseline.json (changed)"
    ]

    sarif = json.loads((repo / "report.sarif").read_text())
    run = sarif["runs"][0]
    assert run["invocations"][0]["properties"] == {
        "poolgateConfig": config,
        "poolgateCounts": {"suppressed": 0, "baselined": 1},
    }
    rules = {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    assert "ACME001" in rules and "EVIL001" not in rules  # the pull request's rule never loads
    assert "PG301" in {result["ruleId"] for result in run["results"]}


def test_the_text_report_names_the_base_config_and_its_digest(tmp_path: Path) -> None:
    repo, base = base_repository(tmp_path)
    hostile_pull_request(repo)
    result = poolgate("scan", "k8s", "--policy-ref", "main~1", cwd=repo)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-2] == (
        f"config: .poolgate.yaml from main~1 (commit {base[:12]}), sha256 {sha256(BASE_CONFIG)}; "
        f"1 rule file; 3 policy files differ from main~1 (commit {base[:12]}) in the work tree"
    )
    assert (
        "poolgate: warning: policy files in the work tree differ from main~1 "
        f"(commit {base[:12]}); this scan used the commit's: .poolgate.yaml (changed), "
        "k8s/.poolgate.yaml (added), policy/rules/ACME001-min-replicas.yaml (changed)"
    ) in lines


def test_a_baseline_the_pull_request_adds_hides_nothing(tmp_path: Path) -> None:
    repo, base = base_repository(tmp_path)
    git("rm", "-q", "poolgate-baseline.json", cwd=repo)
    base = commit_all(repo, "base without a baseline")
    written = poolgate("scan", "k8s", "--write-baseline", "mine.json", cwd=repo)
    assert written.returncode == 0
    commit_all(repo, "pull request: a baseline of its own findings")
    result = poolgate(
        "scan", "k8s", "--policy-ref", base, "--baseline", "mine.json", "--format", "json", cwd=repo
    )
    assert result.returncode == 1, result.stderr
    document = report(result)
    assert document["summary"]["baselined"] == 0
    assert "PG301" in rule_ids(document)
    assert document["config"]["baseline"] is None
    assert (
        f"--baseline mine.json: not in commit {base[:12]}; no finding is left out as baselined"
    ) in [n["message"] for n in document["notifications"]]


def test_a_ref_that_does_not_resolve_fails_closed(tmp_path: Path) -> None:
    repo, _ = base_repository(tmp_path)
    hostile_pull_request(repo)
    for ref in ("no-such-branch", "0" * 40, "--output=pwned.json", "main:k8s", "main\nx"):
        result = poolgate(
            "scan", "k8s", f"--policy-ref={ref}", "--format", "json", "-o", "out.json", cwd=repo
        )
        assert result.returncode == 2, (ref, result.stderr)
        assert result.stdout == ""
        assert "poolgate: error: --policy-ref" in result.stderr
        assert not (repo / "out.json").exists()
        assert not (repo / "pwned.json").exists()
    outside = tmp_path / "plain"
    write(outside / "train.yaml", TRAIN)
    result = poolgate("scan", "train.yaml", "--policy-ref", "main", cwd=outside)
    assert result.returncode == 2
    assert "is not inside a git repository" in result.stderr


def test_config_option_names_a_file_of_the_ref(tmp_path: Path) -> None:
    repo, base = base_repository(tmp_path)
    strict = HEADER + "spec:\n  rules:\n    PG303: {level: error}\n"
    write(repo / "ci" / "strict.yaml", strict)
    base = commit_all(repo, "base: a CI config")
    write(repo / "ci" / "strict.yaml", HEADER + "spec:\n  rules:\n    PG301: {enabled: false}\n")
    commit_all(repo, "pull request: turn PG301 off in the CI config")
    args = ("scan", "k8s", "--config", "ci/strict.yaml", "--policy-ref", base, "--format", "json")
    document = report(poolgate(*args, cwd=repo))
    assert "PG301" in rule_ids(document)
    levels = {f["level"] for f in document["findings"] if f["ruleId"] == "PG303"}
    assert levels == {"error"}
    assert document["config"]["path"] == "ci/strict.yaml"
    assert document["config"]["source"] == "git-ref"
    assert document["config"]["sha256"] == sha256(strict)
    assert document["config"]["workTreeChanges"]["files"] == [
        {"path": "ci/strict.yaml", "change": "changed"}
    ]
    missing = poolgate("scan", "k8s", "--config", "ci/new.yaml", "--policy-ref", base, cwd=repo)
    assert missing.returncode == 2
    assert f"--config ci/new.yaml: not in {base}" in missing.stderr


def test_nested_configs_are_discovered_in_the_refs_tree(tmp_path: Path) -> None:
    """A nested config the base has applies, as in the work tree; one the pull
    request adds does not exist in the base and changes nothing."""
    repo, base = base_repository(tmp_path)
    team = HEADER + "spec:\n  rules:\n    PG302: {level: note}\n"
    write(repo / "k8s" / "gpu" / ".poolgate.yaml", team)
    write(repo / "k8s" / "gpu" / "train.yaml", TRAIN.replace("name: train", "name: gpu"))
    base = commit_all(repo, "base: a team's own config")
    write(repo / "k8s" / "gpu" / "x" / ".poolgate.yaml", PERMISSIVE)
    write(repo / "k8s" / "gpu" / "x" / "train.yaml", TRAIN.replace("name: train", "name: x"))
    commit_all(repo, "pull request: a nested config nearer the manifests")
    document = report(
        poolgate("scan", "k8s/gpu/x", "k8s", "--policy-ref", base, "--format", "json", cwd=repo)
    )
    config = document["config"]
    assert (config["path"], config["sha256"]) == ("k8s/gpu/.poolgate.yaml", sha256(team))
    assert {f["level"] for f in document["findings"] if f["ruleId"] == "PG302"} == {"note"}
    assert "PG301" in rule_ids(document)
    assert config["workTreeChanges"]["files"] == [
        {"path": "k8s/gpu/x/.poolgate.yaml", "change": "added"}
    ]
    result = poolgate("scan", "k8s/gpu/x", "k8s", "--policy-ref", base, cwd=repo)
    assert (
        f"the paths scanned fall under different configs ({base}:.poolgate.yaml besides "
        f"{base}:k8s/gpu/.poolgate.yaml)"
    ) in result.stderr


def test_compare_policy_keeps_the_work_trees_policy_and_says_what_changed(
    tmp_path: Path,
) -> None:
    repo, base = base_repository(tmp_path)
    hostile_pull_request(repo)
    result = poolgate("scan", "k8s", "--compare-policy", base, "--format", "json", cwd=repo)
    document = report(result)
    config = document["config"]
    assert (config["path"], config["source"], config["ref"]) == (
        "k8s/.poolgate.yaml",
        "work-tree",
        None,
    )
    assert config["workTreeChanges"]["commit"] == base
    assert config["workTreeChanges"]["files"] == [
        {"path": ".poolgate.yaml", "change": "changed"},
        {"path": "evil/EVIL001-leak.yaml", "change": "added"},
        {"path": "k8s/.poolgate.yaml", "change": "added"},
        {"path": "policy/rules/ACME001-min-replicas.yaml", "change": "changed"},
    ]
    assert any(
        n["message"].startswith(f"policy files in the work tree differ from commit {base[:12]}")
        and "this scan used the work tree's" in n["message"]
        for n in document["notifications"]
    )
    bad = poolgate("scan", "k8s", "--compare-policy", "nope", cwd=repo)
    assert bad.returncode == 2
    both = poolgate("scan", "k8s", "--compare-policy", base, "--policy-ref", "main", cwd=repo)
    assert both.returncode == 2


def test_the_refs_files_must_be_regular_bounded_and_inside_the_repository(
    tmp_path: Path,
) -> None:
    repo, _ = base_repository(tmp_path)
    write(repo / "ci" / "permissive.yaml", PERMISSIVE.replace("../", ""))
    (repo / ".poolgate.yaml").unlink()
    (repo / ".poolgate.yaml").symlink_to("ci/permissive.yaml")
    linked = commit_all(repo, "a config that is a link")
    (repo / ".poolgate.yaml").unlink()  # before writing: never through the link
    write(repo / ".poolgate.yaml", HEADER + "spec:\n  ruleDirs: [../../..]\n")
    outside = commit_all(repo, "rule directories outside the repository")
    write(repo / ".poolgate.yaml", HEADER + "metadata: {name: x}\n" + "# pad\n" * 200_000)
    large = commit_all(repo, "a config of more than 1 MiB")
    write(repo / ".poolgate.yaml", BASE_CONFIG)
    write(repo / "policy" / "rules" / "BIG.yaml", "# pad\n" * 50_000)
    big_rule = commit_all(repo, "a rule file of more than 256 KiB")
    cases = {
        linked: "a symbolic link; poolgate reads regular files from a git commit",
        outside: "spec.ruleDirs[0]: ../../..: outside the repository",
        large: "larger than 1024 KiB",
        big_rule: "policy/rules/BIG.yaml: larger than 256 KiB",
    }
    for ref, message in cases.items():
        result = poolgate("scan", "k8s", "--policy-ref", ref, cwd=repo)
        assert result.returncode == 2, (ref, result.stderr)
        assert message in result.stderr, result.stderr


def test_git_runs_only_with_a_ref_and_cannot_be_steered_by_the_environment(
    tmp_path: Path,
) -> None:
    """No git process on the pre-commit path; with ``--policy-ref``, only plumbing,
    with the hardening options, and none of the caller's ``GIT_*`` variables: a
    ``GIT_DIR`` naming another repository would make poolgate read its policy."""
    repo, base = base_repository(tmp_path)
    hostile_pull_request(repo)
    decoy = tmp_path / "decoy"
    write(decoy / ".poolgate.yaml", PERMISSIVE.replace("../", ""))
    git("init", "-q", cwd=decoy)
    commit_all(decoy, "a permissive policy elsewhere")
    log = tmp_path / "git-calls.jsonl"
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as out:\n"
        "    git_env = sorted(k for k in os.environ if k.startswith('GIT_'))\n"
        "    out.write(json.dumps({'argv': sys.argv[1:], 'env': git_env}) + '\\n')\n"
        f"os.execv({real.stdout.strip()!r}, [{real.stdout.strip()!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GIT_DIR": str(decoy / ".git"),
        "GIT_WORK_TREE": str(decoy),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": f"touch {tmp_path / 'pwned'}",
    }
    plain = poolgate("scan", "k8s/train.yaml", "--format", "json", cwd=repo, env=env)
    assert plain.returncode == 1, plain.stderr
    assert not log.exists()  # the one-file pre-commit path starts no git process

    result = poolgate(
        "scan", "k8s", "--policy-ref", "HEAD~1", "--format", "json", cwd=repo, env=env
    )
    assert result.returncode == 1, result.stderr
    assert report(result)["config"]["commit"] == base  # this repository, not the decoy
    assert not (tmp_path / "pwned").exists()
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert {call["argv"][7] for call in calls} == {"rev-parse", "ls-tree", "cat-file"}
    for call in calls:
        assert call["argv"][:7] == [
            "--no-pager",
            "-C",
            str(repo),
            "-c",
            "core.fsmonitor=false",
            "-c",
            "protocol.allow=never",
        ]
        assert "GIT_DIR" not in call["env"] and "GIT_CONFIG_COUNT" not in call["env"]
        assert "GIT_NO_REPLACE_OBJECTS" in call["env"]


def test_discovery_outside_a_repository_ignores_a_writable_ancestor(tmp_path: Path) -> None:
    """Item 8: outside a repository the walk went up to ``/``, so a ``.poolgate.yaml``
    anyone could write in ``/tmp`` turned rules off. It now stops at the working
    directory."""
    write(tmp_path / ".poolgate.yaml", ANCESTOR)
    project = tmp_path / "project"
    write(project / "k8s" / "train.yaml", TRAIN)
    result = poolgate("scan", "k8s", "--format", "json", cwd=project)
    assert result.returncode == 1, result.stderr
    document = report(result)
    assert {"PG301", "PG302", "PG501"} <= set(rule_ids(document))
    assert document["config"]["source"] == "defaults"
    write(project / ".poolgate.yaml", HEADER + "spec:\n  rules:\n    PG301: {level: note}\n")
    own = report(poolgate("scan", "k8s", "--format", "json", cwd=project))
    assert own["config"]["path"] == ".poolgate.yaml"
    assert {f["level"] for f in own["findings"] if f["ruleId"] == "PG301"} == {"note"}


def test_rules_directories_named_on_the_command_line_come_from_the_ref(tmp_path: Path) -> None:
    """A CI job's ``--rules team-rules`` names a directory of the checkout: the pull
    request could edit its rules too. With ``--policy-ref`` they are the base's; a
    directory outside the repository is the CI job's own and read from disk."""
    repo, base = base_repository(tmp_path)
    rule = RULE.replace("ACME001", "TEAM001").replace(": 1", ": 3")
    write(repo / "team-rules" / "TEAM001.yaml", rule)
    base = commit_all(repo, "base: a team rule passed with --rules")
    write(repo / "team-rules" / "TEAM001.yaml", rule.replace("object.spec.replicas >=", "0 <="))
    commit_all(repo, "pull request: the team rule never fires")
    own = tmp_path / "ci-rules"
    write(own / "CI001.yaml", RULE.replace("ACME001", "CI001").replace(": 1", ": 4"))
    args = ("scan", "k8s", "--rules", "team-rules", "--rules", str(own), "--format", "json")
    document = report(poolgate(*args, "--policy-ref", base, cwd=repo))
    assert {"TEAM001", "CI001", "ACME001"} <= set(rule_ids(document))
    assert [(item["path"], item["source"]) for item in document["config"]["ruleFiles"]] == [
        ("policy/rules/ACME001-min-replicas.yaml", "git-ref"),
        ("team-rules/TEAM001.yaml", "git-ref"),
        (f"{own}/CI001.yaml", "file"),
    ]
    assert "TEAM001" not in rule_ids(report(poolgate(*args, cwd=repo)))  # the work tree's
    write(repo / "evil" / "EVIL001-leak.yaml", EVIL)  # in the work tree only
    missing = poolgate("scan", "k8s", "--rules", "evil", "--policy-ref", base, cwd=repo)
    assert missing.returncode == 2
    assert f"--rules evil: no such directory in {base}" in missing.stderr
