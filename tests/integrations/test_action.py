"""The composite GitHub Action and the example workflow.

* Both validate against check-jsonschema's built-in GitHub schemas and zizmor
  reports no high-severity finding on them (both tools are dev extras; a test is
  skipped, saying so, only when its tool is not installed).
* The action's shell steps run here under a simulated runner: GITHUB_OUTPUT,
  GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE (a temporary git repository),
  RUNNER_TEMP and GITHUB_ACTION_PATH (this checkout). ``env:`` expressions are
  evaluated from the inputs and earlier step outputs the way the runner does; the
  upload step (``uses:``) is not run, only its condition and inputs are checked.
  POOLGATE_ACTION_PYTHON makes the install step use this interpreter (with this
  checkout installed: every python of the action runs isolated, ``-I``, so neither
  PYTHONPATH nor the workspace reaches sys.path) instead of creating a virtual
  environment and installing from PyPI.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pg_integration import CLEAN, PRIVILEGED, ROOT, clean_env, git

ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / "examples" / "github-workflow.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    return loaded


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]' installs it)")
    return found


def test_action_and_workflow_match_githubs_schemas() -> None:
    tool = _tool("check-jsonschema")
    for schema, path in (
        ("vendor.github-actions", ACTION),
        ("vendor.github-workflows", WORKFLOW),
    ):
        done = subprocess.run(
            [tool, "--builtin-schema", schema, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_finds_nothing_of_high_severity() -> None:
    tool = _tool("zizmor")
    done = subprocess.run(
        [tool, "--offline", "--format", "json", str(ACTION), str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 10, 11, 12, 13, 14), done.stderr  # 1x: findings present
    findings = json.loads(done.stdout)
    high = [
        (item["ident"], item["locations"][0]["symbolic"]["key"])
        for item in findings
        if item["determinations"]["severity"] == "High"
    ]
    assert high == []


def test_no_expression_is_interpolated_into_a_script() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = list(_action()["runs"]["steps"])
    for job in workflow["jobs"].values():
        steps += job["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    assert len(scripts) >= 5
    for script in scripts:
        assert "${{" not in script, script


def test_every_action_reference_is_pinned_by_commit() -> None:
    steps = [step for step in _action()["runs"]["steps"] if "uses" in step]
    assert [step["uses"].split("@")[0] for step in steps] == ["github/codeql-action/upload-sarif"]
    for step in steps:
        assert PINNED.match(step["uses"]), step["uses"]
    text = ACTION.read_text()
    assert re.search(r"upload-sarif@[0-9a-f]{40} # v\d+\.\d+\.\d+\n", text)


def test_the_example_pins_a_commit_whose_action_is_this_one() -> None:
    """The example workflow pins poolgate by commit for the scan and the audit's
    install alike, and the pinned action.yml is this one: found in review, the example
    pinned the commit that added action.yml, whose scan step imported Python files
    from the pull request's checkout. Changing action.yml fails this test until the
    pin moves to a commit that has the change."""
    workflow = WORKFLOW.read_text()
    pins = re.findall(r"poolgate/poolgate@([0-9a-f]{40})", workflow)
    assert len(pins) == 2 and len(set(pins)) == 1, pins  # the scan and the install
    sha = pins[0]
    program = shutil.which("git")
    if program is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the pinned commit cannot be read")
    pinned = subprocess.run(
        [program, "-C", str(ROOT), "show", f"{sha}:action.yml"],
        capture_output=True,
        text=True,
        check=False,
    )
    if pinned.returncode != 0 and "bad object" in pinned.stderr.lower():
        pytest.skip(f"commit {sha[:7]} is not in this clone (shallow?)")
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout == ACTION.read_text()


class Runner:
    """Just enough of the Actions runner to run the action's bash steps."""

    def __init__(
        self,
        workspace: Path,
        scratch: Path,
        inputs: dict[str, str],
        github: dict[str, Any] | None = None,
    ) -> None:
        action = _action()
        self.github = github or {"event_name": "push", "event": {}}
        """The ``github`` context: the event's name and payload."""
        self.inputs = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
        self.inputs.update(inputs)
        self.workspace = workspace
        self.scratch = scratch
        self.summary = scratch / "summary.md"
        self.summary.write_text("")
        self.outputs: dict[str, dict[str, str]] = {}
        self.logs: dict[str, subprocess.CompletedProcess[str]] = {}
        self.skipped: list[str] = []
        self.uploads: list[dict[str, str]] = []
        self.steps = action["runs"]["steps"]
        self.action_outputs = action["outputs"]

    def evaluate(self, expression: str) -> str:
        if "||" in expression:  # the first operand that is not empty
            values = (self.evaluate(part.strip()) for part in expression.split("||"))
            return next((value for value in values if value), "")
        parts = expression.split(".")
        if parts[0] == "github":
            value: Any = self.github
            for part in parts[1:]:
                value = value.get(part, {}) if isinstance(value, dict) else {}
            return value if isinstance(value, str) else ""
        if parts[0] == "inputs" and len(parts) == 2:
            return self.inputs[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return self.outputs.get(parts[1], {}).get(parts[3], "")
        raise AssertionError(f"the simulated runner does not know ${{{{ {expression} }}}}")

    def substitute(self, text: str) -> str:
        return EXPRESSION.sub(lambda match: self.evaluate(match.group(1)), text)

    def condition(self, text: str) -> bool:
        """The two comparisons the action's ``if:`` uses, joined by ``&&``."""
        result = True
        for clause in text.split("&&"):
            left, operator, right = re.split(r"\s*(==|!=)\s*", clause.strip())
            value = self.evaluate(left)
            expected = right.strip("'")
            result = result and ((value == expected) if operator == "==" else (value != expected))
        return result

    def run(self) -> int:
        """Run every step in order; the exit status of the last step that ran."""
        status = 0
        for index, step in enumerate(self.steps):
            name = step.get("id", f"step{index}")
            if "if" in step and not self.condition(step["if"]):
                self.skipped.append(name)
                continue
            if "uses" in step:
                with_ = {key: self.substitute(str(value)) for key, value in step["with"].items()}
                self.uploads.append(with_)
                continue
            output = self.scratch / f"output-{index}"
            output.write_text("")
            env = clean_env(
                GITHUB_ACTIONS="true",
                GITHUB_OUTPUT=str(output),
                GITHUB_STEP_SUMMARY=str(self.summary),
                GITHUB_WORKSPACE=str(self.workspace),
                GITHUB_ACTION_PATH=str(ROOT),
                RUNNER_TEMP=str(self.scratch),
                POOLGATE_ACTION_PYTHON=sys.executable,
            )
            env.update(
                {key: self.substitute(str(value)) for key, value in step.get("env", {}).items()}
            )
            assert step["shell"] == "bash"
            script = self.scratch / f"step-{index}.sh"
            script.write_text(step["run"])
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self.workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            self.logs[name] = done
            pairs = [line.split("=", 1) for line in output.read_text().splitlines() if line]
            self.outputs[name] = {key: value for key, value in pairs}
            status = done.returncode
            if status != 0:
                break
        return status

    def action_output(self, name: str) -> str:
        return self.substitute(self.action_outputs[name]["value"])


def _workspace(tmp_path: Path, manifest: str) -> Path:
    workspace = tmp_path / "workspace"
    (workspace / "k8s").mkdir(parents=True)
    (workspace / "k8s" / "app.yaml").write_text(manifest)
    git("init", "-q", cwd=workspace)
    git("add", ".", cwd=workspace)
    git("commit", "-q", "-m", "manifests", cwd=workspace)
    return workspace


def test_steps_scan_annotate_summarize_and_fail_on_a_bad_manifest(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"paths": "k8s/", "category": "poolgate-k8s"})
    status = runner.run()

    assert status == 1  # the last step fails the job, after the upload
    scan = runner.logs["scan"]
    assert "::error file=k8s/app.yaml,line=13,col=13,title=PG301" in scan.stdout, scan.stdout
    assert runner.outputs["scan"] == {
        "exit-code": "1",
        "sarif-file": "poolgate.sarif",
        "findings": "1",
    }
    assert runner.action_output("findings") == "1"
    assert runner.action_output("exit-code") == "1"
    assert runner.action_output("sarif-file") == "poolgate.sarif"

    sarif = json.loads((workspace / "poolgate.sarif").read_text())
    results = sarif["runs"][0]["results"]
    assert [result["ruleId"] for result in results] == ["PG301"]
    location = results[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "k8s/app.yaml"

    assert runner.uploads == [{"sarif_file": "poolgate.sarif", "category": "poolgate-k8s"}]
    summary = runner.summary.read_text()
    assert summary.startswith("## poolgate\n")
    assert "**1 finding(s)** (1 error, 0 warning, 0 note); exit code 1" in summary
    assert "| PG301 | privileged-outside-operator | 1 |" in summary


def test_steps_pass_on_a_clean_manifest_and_upload_can_be_turned_off(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, CLEAN)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"upload": "false", "sarif-file": "out/p.sarif"})
    (workspace / "out").mkdir()
    assert runner.run() == 0
    assert runner.outputs["scan"] == {
        "exit-code": "0",
        "sarif-file": "out/p.sarif",
        "findings": "0",
    }
    assert runner.uploads == []
    assert "**0 finding(s)**" in runner.summary.read_text()


def test_inputs_are_data_never_shell(tmp_path: Path) -> None:
    """Paths and extra args are split on spaces, never evaluated or globbed."""
    workspace = _workspace(tmp_path, CLEAN)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    marker = tmp_path / "pwned"
    runner = Runner(
        workspace,
        scratch,
        {
            "paths": f"k8s/ $(touch {marker}) *",
            "extra-args": f"--disable PG401 ;touch {marker}",
            "upload": "false",
        },
    )
    assert runner.run() == 2  # "$(touch" is a path that does not exist: a usage error
    assert not marker.exists()
    assert runner.outputs["scan"]["exit-code"] == "2"
    assert runner.outputs["scan"]["sarif-file"] == ""
    assert runner.skipped == ["step2"]  # no SARIF, no upload
    assert "no such file or directory" in runner.logs["scan"].stderr


def test_python_files_in_the_pull_request_are_never_imported(tmp_path: Path) -> None:
    """The workspace is the pull request's checkout. ``python -m scanner`` and
    ``python -`` put the working directory first on sys.path, so a ``scanner/`` or a
    ``json.py`` there ran in place of poolgate's own (found in review: the scan
    exited 0 over a privileged Deployment). Every python of the action runs ``-I``."""
    workspace = _workspace(tmp_path, PRIVILEGED)
    hostile = 'import sys; print("PWNED"); sys.exit(0)\n'
    (workspace / "scanner").mkdir()
    (workspace / "scanner" / "__init__.py").write_text(hostile)
    (workspace / "scanner" / "__main__.py").write_text(hostile)
    for module in ("json.py", "collections.py", "venv.py", "os.py"):
        (workspace / module).write_text(hostile)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"paths": "k8s/"})
    status = runner.run()
    logs = "".join(done.stdout + done.stderr for done in runner.logs.values())
    assert "PWNED" not in logs
    assert status == 1, logs
    assert runner.outputs["scan"]["exit-code"] == "1"
    assert runner.outputs["scan"]["findings"] != "0"


def test_paths_named_like_options_are_paths(tmp_path: Path) -> None:
    """``paths`` may list files a pull request named (found in review: a path
    ``--write-baseline=bl.json`` was read as an option and the scan passed over a
    privileged Deployment). Paths now follow ``--``: that one is a path, which does
    not exist, so the run fails as a usage error and writes no baseline."""
    workspace = _workspace(tmp_path, PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(
        workspace, scratch, {"paths": "k8s/ --write-baseline=bl.json", "upload": "false"}
    )
    assert runner.run() == 2
    assert runner.outputs["scan"]["exit-code"] == "2"
    assert "--write-baseline=bl.json: no such file or directory" in runner.logs["scan"].stderr
    assert not (workspace / "bl.json").exists()
    (workspace / "--fail-on=never").write_text(PRIVILEGED)  # an existing file is scanned
    runner = Runner(workspace, scratch, {"paths": "k8s/ --fail-on=never", "upload": "false"})
    assert runner.run() == 1
    assert runner.outputs["scan"]["exit-code"] == "1"


CONFIG_HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"
REVIEWED = CONFIG_HEADER + "spec:\n  skuLabel: sku\n"
PERMISSIVE = CONFIG_HEADER + "spec:\n  operatorNamespaces: [gpu-operator, ml]\n"
"""The pull request's own config: its namespace becomes an operator namespace, where
privileged pods are allowed."""


def _pull_request(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose base commit has a privileged Deployment and a reviewed
    ``.poolgate.yaml``, and a pull request commit that makes the config permissive,
    checked out as actions/checkout does: one commit deep, without the base."""
    origin = tmp_path / "origin"
    (origin / "k8s").mkdir(parents=True)
    (origin / "k8s" / "app.yaml").write_text(PRIVILEGED)
    (origin / ".poolgate.yaml").write_text(REVIEWED)
    git("init", "-q", cwd=origin)
    git("add", ".", cwd=origin)
    git("commit", "-q", "-m", "base", cwd=origin)
    base = git("rev-parse", "HEAD", cwd=origin).strip()
    (origin / ".poolgate.yaml").write_text(PERMISSIVE)
    git("commit", "-q", "-am", "pull request: a permissive config", cwd=origin)
    workspace = tmp_path / "workspace"
    git("clone", "-q", "--depth=1", f"file://{origin}", str(workspace), cwd=tmp_path)
    lacks = subprocess.run(
        ["git", "-C", str(workspace), "cat-file", "-e", f"{base}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    assert lacks.returncode != 0  # shallow: the base is not there yet
    return workspace, base


def _pull_request_event(base: str) -> dict[str, Any]:
    return {"event_name": "pull_request", "event": {"pull_request": {"base": {"sha": base}}}}


def test_a_pull_request_is_judged_by_its_bases_policy(tmp_path: Path) -> None:
    """Found in review: a pull request adding a permissive ``.poolgate.yaml`` turned its
    own findings off and the job summary said "passed". The Action now reads the
    policy from the base commit (fetched into the shallow checkout), and the summary
    names it and the policy file the pull request changes."""
    workspace, base = _pull_request(tmp_path)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"paths": "k8s/"}, _pull_request_event(base))
    assert runner.run() == 1
    scan = runner.logs["scan"]
    assert f"poolgate: fetching the pull request's base commit {base}" in scan.stdout
    assert "::error file=k8s/app.yaml,line=13,col=13,title=PG301" in scan.stdout
    assert runner.outputs["scan"]["findings"] == "1"
    sarif = json.loads((workspace / "poolgate.sarif").read_text())
    config = sarif["runs"][0]["invocations"][0]["properties"]["poolgateConfig"]
    assert (config["source"], config["commit"], config["path"]) == (
        "git-ref",
        base,
        ".poolgate.yaml",
    )
    summary = runner.summary.read_text()
    assert (
        f"**Policy:** `.poolgate.yaml` from commit `{base[:12]}`, sha256 "
        f"`{hashlib.sha256(REVIEWED.encode()).hexdigest()}`."
    ) in summary
    assert (
        "**Warning:** the pull request changes 1 policy file(s); this scan used the base's:\n\n"
        "- `.poolgate.yaml` (changed)\n"
    ) in summary


def test_policy_ref_head_keeps_the_work_tree_policy_and_says_so(tmp_path: Path) -> None:
    workspace, base = _pull_request(tmp_path)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    inputs = {"paths": "k8s/", "policy-ref": "head", "upload": "false"}
    runner = Runner(workspace, scratch, inputs, _pull_request_event(base))
    assert runner.run() == 0  # the repository chose to let pull requests set the policy
    summary = runner.summary.read_text()
    assert "**Policy:** `.poolgate.yaml` from the work tree, sha256" in summary
    assert "this scan used them:\n\n- `.poolgate.yaml` (changed)\n" in summary
    assert "policy-ref: head: the policy was read from the work tree" in summary
    assert "policy-ref: head: the policy is read from the work tree" in runner.logs["scan"].stdout


def test_without_a_pull_request_the_checked_out_commit_holds_the_policy(tmp_path: Path) -> None:
    workspace, _ = _pull_request(tmp_path)
    (workspace / ".poolgate.yaml").write_text(CONFIG_HEADER + "spec:\n  operatorNamespaces: [x]\n")
    scratch = tmp_path / "runner"
    scratch.mkdir()
    event = {"event_name": "schedule", "event": {}}
    runner = Runner(workspace, scratch, {"paths": "k8s/", "upload": "false"}, event)
    assert runner.run() == 0  # HEAD's policy, not the file an earlier step rewrote
    head = git("rev-parse", "HEAD", cwd=workspace).strip()
    assert (
        "poolgate: no pull request base on a schedule event: the policy is read from the "
        "checked-out commit (HEAD)"
    ) in runner.logs["scan"].stdout
    summary = runner.summary.read_text()
    assert f"**Policy:** `.poolgate.yaml` from `HEAD` (commit `{head[:12]}`)" in summary
    assert (
        "No pull request base on a schedule event: the policy was read from the checked-out "
        "commit (HEAD)."
    ) in summary


def test_the_summary_counts_suppressed_and_baselined_findings(tmp_path: Path) -> None:
    ignored = PRIVILEGED.replace("name: sidecar", "name: agent").replace(
        "  namespace: ml\n",
        '  namespace: ml\n  annotations:\n    poolgate.io/ignore: "PG301=reviewed"\n',
    )
    workspace = _workspace(tmp_path, PRIVILEGED + "---\n" + ignored)
    written = subprocess.run(
        [sys.executable, "-I", "-m", "scanner", "scan", "k8s", "--write-baseline", "bl.json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert written.returncode == 0, written.stderr
    git("add", "bl.json", cwd=workspace)
    git("commit", "-q", "-m", "baseline", cwd=workspace)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    inputs = {"paths": "k8s/", "upload": "false", "extra-args": "--baseline bl.json"}
    runner = Runner(workspace, scratch, inputs)
    assert runner.run() == 0
    summary = runner.summary.read_text()
    assert "**0 finding(s)**" in summary
    assert "Not counted above: 1 suppressed, 1 in the baseline." in summary
    assert "; baseline `bl.json`." in summary
