"""No file poolgate writes leaves the checkout through a pull request's symbolic link
(issue 21, item 9).

A pull request commits ``reports -> /somewhere/else``; a workflow that writes
``--output reports/poolgate.sarif`` wrote into the link's target. The file itself
was already safe (a link named as the output is replaced, never written through);
its directory was followed. Paths outside the checkout stay the user's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import cli_run
import pytest

PRIVILEGED = """\
apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: ml}
spec:
  containers:
    - name: shell
      image: busybox
      securityContext: {privileged: true}
"""

WRITERS = {
    "--output": ("scan", ".", "--format", "sarif", "--output", "{}"),
    "--write-baseline": ("scan", ".", "--write-baseline", "{}"),
    "snapshot -o": ("snapshot", "-o", "{}", "--kubeconfig", "no-such-kubeconfig"),
    "config init": ("config", "init", "{}"),
    "admission export -o": ("admission", "export", "-o", "{}"),
}
"""Every command that writes a file, with ``{}`` where the file goes."""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pod.yaml").write_text(PRIVILEGED)
    return repo


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory out of the checkout the link leads to; nothing may appear in it."""
    directory = tmp_path / "home" / ".ssh"
    directory.mkdir(parents=True)
    return directory


def run(writer: str, target: str, cwd: Path) -> tuple[int, str]:
    args = [arg.replace("{}", target) for arg in WRITERS[writer]]
    result = cli_run.poolgate(*args, cwd=cwd, drop=("KUBECONFIG",))
    return result.returncode, result.stderr


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_linked_directory_out_of_the_checkout_is_a_usage_error(
    checkout: Path, outside: Path, writer: str
) -> None:
    (checkout / "reports").symlink_to(outside)
    code, stderr = run(writer, "reports/out.json", checkout)
    assert code == 2
    option = {"snapshot -o": "--output", "admission export -o": "--output"}.get(writer, writer)
    assert stderr == (
        f"poolgate: error: {option} reports/out.json: reports is a symbolic link out of the "
        f"checkout {checkout.resolve()} (write to a directory of the checkout itself, or "
        "outside it ($RUNNER_TEMP))\n"
    )
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("layout", "target"),
    [
        ("nested link", "deep/reports/out.json"),  # deep/reports -> outside
        ("link then ..", "reports/../out.json"),  # .. leaves the link's target
        ("link to a parent", "up/home/.ssh/out.json"),  # up -> the checkout's parent
        ("link to another checkout", "other/out.json"),  # other -> a repository root
        ("absolute path", "{checkout}/reports/out.json"),
    ],
)
def test_every_spelling_of_the_way_out_is_refused(
    checkout: Path, outside: Path, layout: str, target: str
) -> None:
    (outside / "sub").mkdir()
    if layout == "nested link":
        (checkout / "deep").mkdir()
        (checkout / "deep" / "reports").symlink_to(outside)
    elif layout == "link then ..":
        (checkout / "reports").symlink_to(outside / "sub")
    elif layout == "link to a parent":
        (checkout / "up").symlink_to(checkout.parent)
    elif layout == "link to another checkout":
        (outside / ".git").mkdir()
        (checkout / "other").symlink_to(outside)
    else:
        (checkout / "reports").symlink_to(outside)
    code, stderr = run("--output", target.format(checkout=checkout), checkout)
    assert code == 2, stderr
    assert "is a symbolic link out of the checkout" in stderr
    assert not list(outside.rglob("out.json"))


def test_links_that_stay_inside_the_checkout_are_followed(checkout: Path) -> None:
    (checkout / "build" / "reports").mkdir(parents=True)
    (checkout / "reports").symlink_to(checkout / "build" / "reports")
    code, stderr = run("--output", "reports/out.json", checkout)
    assert code == 1, stderr
    assert json.loads((checkout / "build" / "reports" / "out.json").read_text())["runs"]


def test_paths_outside_the_checkout_stay_legal(checkout: Path, tmp_path: Path) -> None:
    """$RUNNER_TEMP/x, /tmp/x: the user's own, even through a link of their own."""
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    (tmp_path / "temp-link").symlink_to(runner_temp)
    for target in (runner_temp / "a.sarif", tmp_path / "temp-link" / "b.sarif"):
        code, stderr = run("--output", str(target), checkout)
        assert code == 1, stderr
    assert sorted(path.name for path in runner_temp.iterdir()) == ["a.sarif", "b.sarif"]


def test_a_working_directory_reached_through_a_link_is_the_users_own(
    checkout: Path, tmp_path: Path
) -> None:
    (tmp_path / "src").symlink_to(checkout)
    code, stderr = run("--output", "out.sarif", tmp_path / "src")
    assert code == 1, stderr
    assert (checkout / "out.sarif").is_file()
