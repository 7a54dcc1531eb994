"""The pre-commit hook, run by the real pre-commit framework (``pre-commit try-repo``).

try-repo clones the hook repository at a commit, so the module first copies this
working tree (tracked and untracked files, uncommitted changes included) into a
temporary git repository and commits it there. pre-commit then builds a virtual
environment and pip-installs poolgate into it. The dependencies are downloaded
once per module into a wheelhouse (``pip wheel``); each try-repo run installs from
it with ``PIP_NO_INDEX``, so the module touches the package index once. (try-repo
builds its environment in a fresh temporary store every time, so the two cases are
two local installs from that one download.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_integration import CLEAN, PRIVILEGED, ROOT, clean_env, git

PRE_COMMIT = shutil.which("pre-commit")
pytestmark = pytest.mark.skipif(
    PRE_COMMIT is None, reason="pre-commit is not installed (pip install -e '.[dev]' installs it)"
)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This working tree, committed in a temporary repository (try-repo clones HEAD)."""
    repo = tmp_path_factory.mktemp("hook-repo")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "poolgate under test", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory, hook_repo: Path) -> Path:
    """poolgate's wheel and every dependency (and the build backend), downloaded once."""
    house = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(house),
            str(hook_repo),
            "hatchling",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return house


@pytest.fixture()
def user_repo(tmp_path: Path) -> Iterator[Path]:
    repo = tmp_path / "user-repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    yield repo


def _try_repo(
    hook_repo: Path, wheelhouse: Path, user_repo: Path, home: Path, *files: str
) -> subprocess.CompletedProcess[str]:
    git("add", "--", *files, cwd=user_repo)
    env = clean_env(
        PRE_COMMIT_HOME=str(home),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_COMPILE="1",  # no .pyc for the large kubernetes client: a quicker install
    )
    env.pop("PYTHONPATH", None)  # the hook must run the poolgate it installed
    assert PRE_COMMIT is not None
    return subprocess.run(
        # --all-files (every tracked file, as CI runs it): --files refuses names like options.
        [PRE_COMMIT, "try-repo", str(hook_repo), "poolgate", "--verbose", "--all-files"],
        cwd=user_repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_privileged_deployment_is_blocked_with_the_finding_printed(
    hook_repo: Path, wheelhouse: Path, user_repo: Path, tmp_path: Path
) -> None:
    (user_repo / "deploy.yaml").write_text(PRIVILEGED)
    result = _try_repo(hook_repo, wheelhouse, user_repo, tmp_path / "home", "deploy.yaml")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "poolgate" in result.stdout and "Failed" in result.stdout
    assert "- exit code: 1" in result.stdout
    assert "deploy.yaml:13:13 error PG301 container 'agent' is privileged" in result.stdout


def test_a_clean_deployment_and_other_yaml_pass(
    hook_repo: Path, wheelhouse: Path, user_repo: Path, tmp_path: Path
) -> None:
    (user_repo / "deploy.yaml").write_text(CLEAN)
    (user_repo / "ci.yml").write_text("on: [push]\njobs: {}\n")  # YAML, not Kubernetes
    (user_repo / "notes.md").write_text("not for the hook\n")
    # Another tool's JSON (comments: not JSON poolgate could read) is not passed by default.
    (user_repo / "tsconfig.json").write_text('{\n  // strict mode\n  "strict": true\n}\n')
    files = ("deploy.yaml", "ci.yml", "notes.md", "tsconfig.json")
    result = _try_repo(hook_repo, wheelhouse, user_repo, tmp_path / "home", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout
    assert "no findings in 2 files, 1 object" in result.stdout


def test_a_staged_file_named_like_an_option_fails_the_hook(
    hook_repo: Path, wheelhouse: Path, user_repo: Path, tmp_path: Path
) -> None:
    """pre-commit appends staged file names to the command, and a pull request picks
    them: ``--write-baseline=bl.yaml`` was read as an option (found in review: the hook
    passed over a privileged Pod, writing a baseline that hid it). It now fails closed."""
    (user_repo / "deploy.yaml").write_text(PRIVILEGED)
    (user_repo / "--write-baseline=bl.yaml").write_text(PRIVILEGED)
    files = ("deploy.yaml", "--write-baseline=bl.yaml")
    result = _try_repo(hook_repo, wheelhouse, user_repo, tmp_path / "home", *files)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "- exit code: 2" in result.stdout
    assert "argument '--write-baseline=bl.yaml' names a file but would be read as an option" in (
        result.stdout
    )
    assert not (user_repo / "bl.yaml").exists()
