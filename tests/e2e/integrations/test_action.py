"""The composite GitHub Action and the example workflow.

* Both validate against check-jsonschema's built-in GitHub schemas and zizmor's
  auditor persona (every audit, every severity) finds nothing in them (both tools
  are dev extras; a test is skipped, saying so, only when its tool is not installed,
  and fails instead under CI=true).
* The install is hash-pinned: requirements/action.txt pins every runtime dependency
  of pyproject.toml and the build backend, each with hashes; poolgate itself is
  installed without dependencies or an isolated build.
* The action's shell steps run here under a simulated runner: GITHUB_OUTPUT,
  GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE (a temporary git repository),
  RUNNER_TEMP and GITHUB_ACTION_PATH (this checkout). ``env:`` expressions are
  evaluated from the inputs and earlier step outputs the way the runner does; the
  upload step (``uses:``) is not run, only its condition and inputs are checked.
  POOLGATE_ACTION_PYTHON makes the install step use this interpreter (with this
  checkout installed: every python of the action runs isolated, ``-I``, so neither
  PYTHONPATH nor the workspace reaches sys.path) instead of creating a virtual
  environment and installing from PyPI; the install itself runs against a fake
  ``python3`` that records what pip was asked to do.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pg_integration import CLEAN, PRIVILEGED, ROOT, clean_env, fake_tool, git
from tool_check import tool_missing

ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / "examples" / "github-workflow.yml"
EXAMPLES = sorted((ROOT / "examples").glob("*.yml"))
"""Every example workflow: pull requests and a nightly audit through a kubeconfig
secret (``github-workflow.yml``), and nightly audits signed in to EKS and GKE."""
CLOUD_EXAMPLES = [ROOT / "examples" / "nightly-eks.yml", ROOT / "examples" / "nightly-gke.yml"]
REQUIREMENTS = ROOT / "requirements" / "action.txt"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    return loaded


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        tool_missing(f"{name} is not installed (pip install -e '.[dev]' installs it)")
    return found


def test_action_and_workflow_match_githubs_schemas() -> None:
    tool = _tool("check-jsonschema")
    assert WORKFLOW in EXAMPLES and all(path in EXAMPLES for path in CLOUD_EXAMPLES)
    for schema, path in [
        ("vendor.github-actions", ACTION),
        *(("vendor.github-workflows", example) for example in EXAMPLES),
    ]:
        done = subprocess.run(
            [tool, "--builtin-schema", schema, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_auditor_finds_nothing() -> None:
    """The auditor persona runs every audit at every severity and confidence (found in
    review: ``secrets-outside-env`` on the example's kubeconfig secret)."""
    tool = _tool("zizmor")
    done = subprocess.run(
        [tool, "--offline", "--persona", "auditor", "--format", "json", str(ACTION)]
        + [str(example) for example in EXAMPLES],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 10, 11, 12, 13, 14), done.stderr  # 1x: findings present
    findings = json.loads(done.stdout)
    found = [
        (item["ident"], item["locations"][0]["symbolic"]["key"], item["desc"]) for item in findings
    ]
    assert found == []
    assert done.returncode == 0


def test_no_expression_is_interpolated_into_a_script() -> None:
    steps = list(_action()["runs"]["steps"])
    for example in EXAMPLES:
        for job in yaml.safe_load(example.read_text())["jobs"].values():
            steps += job["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    assert len(scripts) >= 15
    for script in scripts:
        assert "${{" not in script, script


def _example_steps(path: Path) -> list[dict[str, Any]]:
    workflow = yaml.safe_load(path.read_text())
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_every_action_reference_is_pinned_by_commit() -> None:
    """The action's and the examples' actions, each by full commit SHA with the
    release it is in a comment (for Dependabot and Renovate, and for a reader)."""
    for example in EXAMPLES:
        text = example.read_text()
        for step in _example_steps(example):
            if "uses" in step:
                assert PINNED.match(step["uses"]), (example.name, step["uses"])
                if not step["uses"].startswith("poolgate/poolgate@"):
                    assert f"{step['uses']} # v" in text, (example.name, step["uses"])
    steps = [step for step in _action()["runs"]["steps"] if "uses" in step]
    assert [step["uses"].split("@")[0] for step in steps] == [
        "actions/cache/restore",
        "actions/cache/save",
        "github/codeql-action/upload-sarif",
        "actions/upload-artifact",
    ]
    for step in steps:
        assert PINNED.match(step["uses"]), step["uses"]
    text = ACTION.read_text()
    for name in ("actions/cache/restore", "actions/cache/save", "upload-sarif", "upload-artifact"):
        assert re.search(rf"{name}@[0-9a-f]{{40}} # v\d+\.\d+\.\d+\n", text), name


def _poolgate_pins(workflow: dict[str, Any]) -> list[str]:
    """Every commit of poolgate the example names: the action it uses, and the source
    the audit job checks out to install."""
    pins = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("poolgate/poolgate@"):
                pins.append(uses.split("@", 1)[1])
            if step.get("with", {}).get("repository") == "poolgate/poolgate":
                pins.append(str(step["with"]["ref"]))
    return pins


def test_the_example_pins_a_commit_whose_action_is_this_one() -> None:
    """The example workflows pin poolgate by commit for the scan and the audits'
    installs alike, and the pinned action.yml is this one: found in review, the example
    pinned the commit that added action.yml, whose scan step imported Python files
    from the pull request's checkout. Changing action.yml fails this test until the
    pin moves to a commit that has the change."""
    pins = {path.name: _poolgate_pins(yaml.safe_load(path.read_text())) for path in EXAMPLES}
    assert len(pins[WORKFLOW.name]) == 2  # the scan and the install
    for path in CLOUD_EXAMPLES:
        assert len(pins[path.name]) == 1, pins  # the install
    [sha] = {pin for names in pins.values() for pin in names}
    assert re.fullmatch(r"[0-9a-f]{40}", sha), sha
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


def _step(name: str) -> dict[str, Any]:
    [step] = [step for step in _action()["runs"]["steps"] if step.get("id") == name]
    return step


def _pip_installs(script: str) -> list[list[str]]:
    """The arguments of each ``pip install`` in a bash script, continuation lines joined."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line.strip(), comments=True)
        if "pip" in line and "install" in words:
            commands.append(words[words.index("install") + 1 :])
    return commands


def _assert_hash_pinned_install(script: str, source: str) -> None:
    """Two installs: everything but poolgate from the hash-pinned file, wheels only;
    then poolgate's own source with nothing resolved, built or fetched. Neither
    byte-compiles every module (most of the install's time)."""
    assert _pip_installs(script) == [
        [
            "--no-compile",
            "--require-hashes",
            "--only-binary",
            ":all:",
            "--requirement",
            f"{source}/requirements/action.txt",
        ],
        ["--no-compile", "--no-deps", "--no-build-isolation", "--no-index", source],
    ]


def test_the_install_is_hash_pinned() -> None:
    """Found in review: the action ran ``pip install $GITHUB_ACTION_PATH``, taking
    whatever versions of the dependencies and of hatchling (the isolated build) the
    index served that day, unhashed."""
    _assert_hash_pinned_install(_step("install")["run"], "$GITHUB_ACTION_PATH")
    for example in [WORKFLOW, *CLOUD_EXAMPLES]:
        workflow = yaml.safe_load(example.read_text())
        [install] = [
            step for step in workflow["jobs"]["audit"]["steps"] if "pip" in step.get("run", "")
        ]
        _assert_hash_pinned_install(install["run"], "$src")
        assert 'src="$GITHUB_WORKSPACE/poolgate-src"' in install["run"]


@pytest.mark.parametrize("example", CLOUD_EXAMPLES, ids=lambda path: path.stem)
def test_the_cloud_examples_sign_in_with_oidc(example: Path) -> None:
    """The EKS and GKE audits sign in with GitHub's OIDC token (``id-token: write``, on
    the audit job only, in an environment the cloud's trust can name) and reach the
    cluster through the kubeconfig's exec plugin: no secret, no stored key or
    kubeconfig. The sign-in comes after the install, so pip never runs with cloud
    credentials. tests/audit/test_nightly_examples.py runs the steps that follow."""
    text = example.read_text()
    workflow = yaml.safe_load(text)
    assert workflow["permissions"] == {}
    [(name, job)] = workflow["jobs"].items()
    assert name == "audit" and job["environment"] == "cluster-audit"
    assert job["permissions"] == {
        "contents": "read",
        "security-events": "write",
        "id-token": "write",
    }
    assert "secrets." not in text and "credentials_json" not in text
    assert "aws-access-key-id" not in text
    steps = job["steps"]
    actions = [step["uses"].split("@")[0] for step in steps if "uses" in step]
    runs = {step["name"]: step["run"] for step in steps if "run" in step}
    if example.stem == "nightly-eks":
        assert actions[2:3] == ["aws-actions/configure-aws-credentials"]
        [signin] = [s for s in steps if "configure-aws-credentials" in s.get("uses", "")]
        assert signin["with"]["role-to-assume"].startswith("arn:aws:iam::")
        assert "aws eks update-kubeconfig" in runs["Connect to the cluster"]
    else:
        assert actions[2:4] == ["google-github-actions/auth", "google-github-actions/setup-gcloud"]
        [signin] = [s for s in steps if "google-github-actions/auth" in s.get("uses", "")]
        assert "/workloadIdentityPools/" in signin["with"]["workload_identity_provider"]
        [gcloud] = [s for s in steps if "setup-gcloud" in s.get("uses", "")]
        assert gcloud["with"]["install_components"] == "gke-gcloud-auth-plugin"
        assert "gcloud container clusters get-credentials" in runs["Connect to the cluster"]
    names = [step.get("name", "") for step in steps]
    assert names.index("Install poolgate") < names.index(signin["name"])


def _requirements_file() -> dict[str, tuple[Requirement, list[str]]]:
    """requirements/action.txt by canonical name: the requirement and its hashes."""
    lines = [
        line for line in REQUIREMENTS.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    pinned: dict[str, tuple[Requirement, list[str]]] = {}
    for entry in "\n".join(lines).replace("\\\n", " ").splitlines():
        if entry.strip():
            spec, *hashes = re.split(r"\s+--hash=", entry.strip())
            requirement = Requirement(spec)
            name = canonicalize_name(requirement.name)
            assert name not in pinned, f"{name} is pinned twice"
            pinned[name] = (requirement, hashes)
    return pinned


def _same_marker(left: Marker | None, right: Marker | None) -> bool:
    """Whether two markers select the same platforms: evaluated on every machine,
    operating system and Python the action may meet (their text differs in order)."""
    for machine in ("x86_64", "aarch64", "arm64", "AMD64", "ARM64", "i686", "ppc64le", "s390x"):
        for system, platform in (("Linux", "linux"), ("Darwin", "darwin"), ("Windows", "win32")):
            for python in ("3.11", "3.12", "3.13", "3.14"):
                environment = {
                    "platform_machine": machine,
                    "platform_system": system,
                    "sys_platform": platform,
                    "os_name": "nt" if system == "Windows" else "posix",
                    "python_version": python,
                    "python_full_version": f"{python}.0",
                    "implementation_name": "cpython",
                    "platform_python_implementation": "CPython",
                }
                selected = [m is None or m.evaluate(environment) for m in (left, right)]
                if selected[0] != selected[1]:
                    return False
    return True


def test_the_requirements_file_pins_every_dependency_with_hashes() -> None:
    """requirements/action.txt stays in step with pyproject.toml: every runtime
    dependency and the build backend pinned to a version the project accepts, on the
    same platforms (cel-expr-python only where it has wheels), each with the hashes
    of every file of that version; regenerate it with ``sh requirements/compile.sh``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = _requirements_file()
    for name, (requirement, hashes) in pinned.items():
        [specifier] = requirement.specifier
        assert specifier.operator == "==", (name, str(specifier))
        assert hashes and len(set(hashes)) == len(hashes), name
        for digest in hashes:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), (name, digest)
    wanted = project["project"]["dependencies"] + project["build-system"]["requires"]
    for line in wanted:
        dependency = Requirement(line)
        name = canonicalize_name(dependency.name)
        assert name in pinned, f"{name} is not in {REQUIREMENTS.name}: sh requirements/compile.sh"
        requirement, hashes = pinned[name]
        version = next(iter(requirement.specifier)).version
        assert dependency.specifier.contains(version, prereleases=True), (line, version)
        assert _same_marker(dependency.marker, requirement.marker), (line, str(requirement))
    # Compiled packages have a wheel per platform (Linux x86-64 and arm64, macOS,
    # Windows) and Python: hashes of one machine's wheels alone would fail elsewhere.
    for name in ("cel-expr-python", "pyyaml", "msgspec", "rpds-py"):
        assert len(pinned[name][1]) >= 16, (name, len(pinned[name][1]))
    assert pinned["cel-expr-python"][0].marker is not None
    # The build backend comes from action.in, which must say what pyproject.toml says.
    backend = (ROOT / "requirements" / "action.in").read_text().splitlines()
    assert [line for line in backend if line and not line.startswith("#")] == (
        project["build-system"]["requires"]
    )
    header = REQUIREMENTS.read_text().splitlines()[:2]
    assert header[1] == "#    sh requirements/compile.sh", header
    compile_script = (ROOT / "requirements" / "compile.sh").read_text()
    for option in ("--universal", "--generate-hashes", "--index-url https://pypi.org/simple"):
        assert option in compile_script, option


class Runner:
    """Just enough of the Actions runner to run the action's bash steps."""

    def __init__(
        self,
        workspace: Path,
        scratch: Path,
        inputs: dict[str, str],
        *,
        env: dict[str, str] | None = None,
        action_results: dict[str, dict[str, str]] | None = None,
        github: dict[str, Any] | None = None,
    ) -> None:
        """``env`` adds to (or overrides) the runner's environment; ``action_results``
        are the outputs of each ``uses:`` action, by name (a cache hit, say); ``github``
        is the ``github`` context (the event's name and payload)."""
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
        self.used: list[tuple[str, dict[str, str]]] = []
        self.env = env or {}
        self.action_results = action_results or {}
        self.steps = action["runs"]["steps"]
        self.action_outputs = action["outputs"]

    @property
    def uploads(self) -> list[dict[str, str]]:
        return [with_ for name, with_ in self.used if name == "github/codeql-action/upload-sarif"]

    @property
    def artifacts(self) -> list[dict[str, str]]:
        return [with_ for name, with_ in self.used if name == "actions/upload-artifact"]

    def evaluate(self, expression: str) -> str:
        if "||" in expression:  # the first operand that is not empty
            values = (self.evaluate(part.strip()) for part in expression.split("||"))
            return next((value for value in values if value), "")
        parts = expression.split(".")
        if parts[0] == "github":
            value: Any = self.github
            for part in parts[1:]:
                value = value.get(part, {}) if isinstance(value, dict) else {}
            if isinstance(value, bool):  # as the runner turns them into text
                return "true" if value else "false"
            return str(value) if isinstance(value, str | int) else ""
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
            action = step.get("uses", "").split("@")[0]
            name = step.get("id") or action or f"step{index}"
            if "if" in step and not self.condition(step["if"]):
                self.skipped.append(name)
                continue
            if action:
                with_ = {key: self.substitute(str(value)) for key, value in step["with"].items()}
                self.used.append((action, with_))
                self.outputs[name] = dict(self.action_results.get(action, {}))
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
                RUNNER_OS="Linux",
                RUNNER_ARCH="X64",
                POOLGATE_ACTION_PYTHON=sys.executable,
            )
            env.update(self.env)
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
        "reports-dir": "",
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
        "reports-dir": "",
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
    # Nothing installed, so no download cache; no SARIF, no upload, no reports.
    assert runner.skipped == [
        "restore",
        "actions/cache/save",
        "github/codeql-action/upload-sarif",
        "actions/upload-artifact",
    ]
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


def test_the_install_step_installs_as_pinned_and_caches_downloads(tmp_path: Path) -> None:
    """The install as a runner runs it, with a fake ``python3`` that records every
    command and hands everything but ``venv`` and ``pip`` to this interpreter (no
    network here): a virtual environment, the hash-pinned install through pip's
    download cache, poolgate without dependencies, ``pip check``; the cache restored
    and saved under a key of the requirements file's digest, and not saved again
    when it was restored."""
    workspace = _workspace(tmp_path, PRIVILEGED)
    log = tmp_path / "python.log"
    fake_tool(
        tmp_path / "bin",
        "python3",
        f"""
import shutil
with open({str(log)!r}, "a") as out:
    out.write(json.dumps([sys.argv[1:], os.environ.get("PIP_CACHE_DIR")]) + "\\n")
if sys.argv[1:4] == ["-I", "-m", "venv"]:
    os.makedirs(os.path.join(sys.argv[4], "bin"))
    shutil.copy(sys.argv[0], os.path.join(sys.argv[4], "bin", "python"))
elif sys.argv[1:4] != ["-I", "-m", "pip"]:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
""",
    )
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    for hit in ("", "true"):
        scratch = tmp_path / f"runner{hit}"
        scratch.mkdir()
        log.write_text("")
        runner = Runner(
            workspace,
            scratch,
            {"paths": "k8s/", "upload": "false"},
            env={"POOLGATE_ACTION_PYTHON": "", "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"},
            action_results={"actions/cache/restore": {"cache-hit": hit}},
        )
        assert runner.run() == 1, {name: done.stderr for name, done in runner.logs.items()}
        venv_python = str(scratch / "poolgate-venv" / "bin" / "python")
        assert runner.outputs["install"]["python"] == venv_python
        assert runner.outputs["scan"]["findings"] == "1"
        cache = {
            "path": str(scratch / "poolgate-pip-cache"),
            "key": f"poolgate-pip-Linux-X64-{digest}",
        }
        expected_used = [("actions/cache/restore", cache)]
        if not hit:
            expected_used.append(("actions/cache/save", cache))
        assert runner.used == expected_used

        calls = [json.loads(line) for line in log.read_text().splitlines()]
        pip = ["-I", "-m", "pip", "--quiet", "--disable-pip-version-check"]
        requirements = f"{ROOT}/requirements/action.txt"
        assert [argv for argv, _ in calls[:5]] == [
            ["-I", "-c", calls[0][0][2], requirements],  # the cache key's digest
            ["-I", "-m", "venv", str(scratch / "poolgate-venv")],
            [
                *pip,
                "install",
                "--no-compile",
                "--require-hashes",
                "--only-binary",
                ":all:",
                "--requirement",
                requirements,
            ],
            [
                *pip,
                "install",
                "--no-compile",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                str(ROOT),
            ],
            [*pip, "check"],
        ]
        assert [cache_dir for _, cache_dir in calls[2:5]] == [cache["path"]] * 3
        # Then the installed poolgate: its version, the repository root (where the
        # policy commit is read), the scan, the summary.
        assert [argv[:4] for argv, _ in calls[5:]] == [
            ["-I", "-m", "scanner", "--version"],
            ["-I", "-c", calls[6][0][2], "k8s/"],
            ["-I", "-m", "scanner", "scan"],
            ["-I", "-", "poolgate.sarif", "1"],
        ]


def test_the_rule_cache_is_a_fresh_directory_of_the_run(tmp_path: Path) -> None:
    """The compiled-rule cache decides which rules run; whoever can write it can drop
    findings. The scan keeps it in a new directory under RUNNER_TEMP (mode 0700), not
    in one set for the job or left by an earlier run on a self-hosted runner."""
    workspace = _workspace(tmp_path, PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    job_cache = tmp_path / "job-cache"  # POOLGATE_CACHE_DIR set for the whole job
    job_cache.mkdir()
    home_cache = tmp_path / "xdg"
    env = {"POOLGATE_CACHE_DIR": str(job_cache), "XDG_CACHE_HOME": str(home_cache)}
    used = []
    for _ in range(2):
        runner = Runner(workspace, scratch, {"paths": "k8s/", "upload": "false"}, env=env)
        assert runner.run() == 1
        assert runner.outputs["scan"]["findings"] == "1"
        cache = Path(runner.outputs["install"]["rule-cache"])
        assert cache.parent == scratch and cache.name.startswith("poolgate-rules.")
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert list(cache.iterdir()), "the scan kept nothing in its cache directory"
        used.append(cache)
    assert used[0] != used[1]
    assert list(job_cache.iterdir()) == []
    assert not home_cache.exists()


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


REPOSITORY = "acme/gpu-platform"


def _pull_request_event(base: str, head: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``github`` context of a ``pull_request`` event; ``head`` is the payload's
    ``pull_request.head`` (by default a branch of this repository)."""
    pull_request = {
        "number": 7,
        "base": {"sha": base, "repo": {"full_name": REPOSITORY, "fork": False}},
        "head": head or {"repo": {"full_name": REPOSITORY, "fork": False}},
    }
    return {
        "event_name": "pull_request",
        "repository": REPOSITORY,
        "event": {"pull_request": pull_request},
    }


def test_a_pull_request_is_judged_by_its_bases_policy(tmp_path: Path) -> None:
    """Found in review: a pull request adding a permissive ``.poolgate.yaml`` turned its
    own findings off and the job summary said "passed". The Action now reads the
    policy from the base commit (fetched into the shallow checkout), and the summary
    names it and the policy file the pull request changes."""
    workspace, base = _pull_request(tmp_path)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"paths": "k8s/"}, github=_pull_request_event(base))
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
    runner = Runner(workspace, scratch, inputs, github=_pull_request_event(base))
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
    runner = Runner(workspace, scratch, {"paths": "k8s/", "upload": "false"}, github=event)
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


FORK = {"repo": {"full_name": "mallory/gpu-platform", "fork": True}}
DELETED_FORK: dict[str, Any] = {"repo": None}
"""A pull request whose fork was deleted since: the payload's ``head.repo`` is null."""


@pytest.mark.parametrize("head", [FORK, DELETED_FORK], ids=["fork", "deleted-fork"])
def test_a_pull_request_from_a_fork_gets_its_findings_without_an_upload(
    tmp_path: Path, head: dict[str, Any]
) -> None:
    """A pull request from a fork runs with a read-only token, so the SARIF upload failed
    and the job went red there, before the findings step. The upload is now left out
    (``upload: auto``), and the findings still come as annotations and in the job
    summary, which says why; the job still fails on the findings, as the last step."""
    workspace, base = _pull_request(tmp_path)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"paths": "k8s/"}, github=_pull_request_event(base, head))
    assert runner.run() == 1
    assert runner.uploads == []
    assert "github/codeql-action/upload-sarif" in runner.skipped
    assert runner.outputs["plan"]["fork"] == "true"
    assert "the SARIF is not uploaded to code scanning" in runner.logs["plan"].stdout
    assert "::error file=k8s/app.yaml,line=13,col=13,title=PG301" in runner.logs["scan"].stdout
    assert runner.outputs["scan"]["findings"] == "1"
    summary = runner.summary.read_text()
    assert "**1 finding(s)** (1 error, 0 warning, 0 note); exit code 1" in summary
    assert (
        "Pull request from a fork: its token cannot write to code scanning, so the SARIF was "
        "not uploaded; the findings are in the annotations and this summary.\n"
    ) in summary
    failed = runner.logs["fail"]  # the last step, after the summary
    assert failed.returncode == 1
    assert "poolgate scan exited with 1" in failed.stderr


@pytest.mark.parametrize(
    ("head", "upload", "uploaded"),
    [
        (None, "auto", True),  # a branch of the repository: its token may write
        (FORK, "true", True),  # a private repository that sends write tokens to forks
        (None, "false", False),
        (FORK, "false", False),
    ],
)
def test_the_upload_input_decides_where_no_fork_is_involved(
    tmp_path: Path, head: dict[str, Any] | None, upload: str, uploaded: bool
) -> None:
    workspace, base = _pull_request(tmp_path)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    inputs = {"paths": "k8s/", "upload": upload}
    runner = Runner(workspace, scratch, inputs, github=_pull_request_event(base, head))
    assert runner.run() == 1
    assert runner.uploads == (
        [{"sarif_file": "poolgate.sarif", "category": "poolgate"}] if uploaded else []
    )
    assert "Pull request from a fork" not in runner.summary.read_text()
    assert runner.logs["fail"].returncode == 1


def test_a_fork_can_keep_its_sarif_as_an_artifact(tmp_path: Path) -> None:
    workspace, base = _pull_request(tmp_path)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    inputs = {"paths": "k8s/", "reports": "sarif"}
    runner = Runner(workspace, scratch, inputs, github=_pull_request_event(base, FORK))
    assert runner.run() == 1
    assert runner.uploads == []
    [artifact] = runner.artifacts
    assert artifact["name"] == "poolgate-reports"
    copied = Path(artifact["path"]) / "poolgate.sarif"
    assert copied.read_bytes() == (workspace / "poolgate.sarif").read_bytes()
    summary = runner.summary.read_text()
    assert (
        "the findings are in the annotations and this summary, and the SARIF in the artifact "
        "`poolgate-reports`.\n"
    ) in summary


def test_reports_are_kept_as_an_artifact_named_for_the_category(tmp_path: Path) -> None:
    """``reports: html, junit json,sarif`` writes each report into a fresh directory of
    the run (out of the checkout) and uploads it as one artifact per category; the
    category's slash, which artifact names refuse, becomes a dash."""
    workspace = _workspace(tmp_path, PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    inputs = {"paths": "k8s/", "reports": "html, junit json,sarif", "category": "poolgate/k8s"}
    runner = Runner(workspace, scratch, inputs)
    assert runner.run() == 1
    reports = Path(runner.outputs["scan"]["reports-dir"])
    assert reports.parent == scratch and reports.name.startswith("poolgate-reports.")
    assert stat.S_IMODE(reports.stat().st_mode) == 0o700
    assert runner.action_output("reports-dir") == str(reports)
    assert sorted(path.name for path in reports.iterdir()) == [
        "poolgate.html",
        "poolgate.json",
        "poolgate.junit.xml",
        "poolgate.sarif",
    ]
    assert runner.artifacts == [
        {"name": "poolgate-k8s-reports", "path": str(reports), "if-no-files-found": "error"}
    ]
    assert [
        f["ruleId"] for f in json.loads((reports / "poolgate.json").read_text())["findings"]
    ] == ["PG301"]
    junit = ElementTree.parse(reports / "poolgate.junit.xml").getroot()
    assert junit.tag == "testsuites" and junit.get("failures") == "1"
    assert "PG301" in (reports / "poolgate.html").read_text()
    assert runner.uploads == [{"sarif_file": "poolgate.sarif", "category": "poolgate/k8s"}]
    assert (
        "Reports in the artifact `poolgate-k8s-reports`: `poolgate.html`, `poolgate.json`, "
        "`poolgate.junit.xml`, `poolgate.sarif`.\n"
    ) in runner.summary.read_text()
    assert runner.logs["fail"].returncode == 1


def test_no_reports_artifact_when_poolgate_wrote_none(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, CLEAN)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    runner = Runner(workspace, scratch, {"paths": "missing/", "reports": "html"})
    assert runner.run() == 2
    assert runner.outputs["scan"]["reports-dir"] == ""
    assert "actions/upload-artifact" in runner.skipped
    assert "Reports in the artifact" not in runner.summary.read_text()


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"upload": "yes"}, "the upload input must be auto, true or false"),
        ({"reports": "html,pdf"}, "the reports input lists html, junit, json or sarif"),
        ({"reports": "html;touch {marker}"}, "the reports input lists html, junit, json or sarif"),
        ({"reports": "$(touch {marker})"}, "the reports input lists html, junit, json or sarif"),
    ],
)
def test_a_bad_input_stops_the_action_before_the_install(
    tmp_path: Path, inputs: dict[str, str], message: str
) -> None:
    workspace = _workspace(tmp_path, PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    marker = tmp_path / "pwned"
    inputs = {name: value.format(marker=marker) for name, value in inputs.items()}
    runner = Runner(workspace, scratch, inputs)
    assert runner.run() == 2
    assert list(runner.logs) == ["plan"]  # nothing installed, scanned or uploaded
    assert runner.used == []
    assert f"poolgate: {message}" in runner.logs["plan"].stderr
    assert not marker.exists()


RUNTIME_CLASS = (
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: other\nhandler: other\n"
)


def test_context_paths_are_joined_but_not_reported(tmp_path: Path) -> None:
    """``context-paths`` passes the platform's own objects (here its RuntimeClasses and a
    privileged agent) to the scan: the workload's runtimeClassName is judged against
    them (PG109), and nothing in them is reported."""
    workload = CLEAN.replace("    spec:\n", "    spec:\n      runtimeClassName: nvidia\n", 1)
    workspace = _workspace(tmp_path, workload)
    (workspace / "platform").mkdir()
    (workspace / "platform" / "runtime.yaml").write_text(RUNTIME_CLASS + "---\n" + PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    without = Runner(workspace, scratch, {"paths": "k8s/", "upload": "false"})
    assert without.run() == 0
    runner = Runner(
        workspace, scratch, {"paths": "k8s/", "context-paths": "platform/\n", "upload": "false"}
    )
    assert runner.run() == 1
    sarif = json.loads((workspace / "poolgate.sarif").read_text())
    found = [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for r in sarif["runs"][0]["results"]
    ]
    assert found == [("PG109", "k8s/app.yaml")]


def test_a_context_path_named_like_an_option_is_a_path(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, PRIVILEGED)
    scratch = tmp_path / "runner"
    scratch.mkdir()
    inputs = {"paths": "k8s/", "context-paths": "--fail-on=never", "upload": "false"}
    runner = Runner(workspace, scratch, inputs)
    assert runner.run() == 2
    assert "--fail-on=never: no such file or directory" in runner.logs["scan"].stderr
    (workspace / "--fail-on=never").mkdir()  # an existing directory is context
    runner = Runner(workspace, scratch, inputs)
    assert runner.run() == 1
    assert runner.outputs["scan"]["findings"] == "1"


def test_the_context_option_is_named_in_one_place() -> None:
    """The scan's option for context paths is being renamed (``--context`` to
    ``--context-path``): the action names it once, so the rename is one line."""
    assert len(re.findall(r"--context(?:-path)?\b", ACTION.read_text())) == 1
