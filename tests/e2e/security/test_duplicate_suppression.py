"""A suppression on one document silenced another with the same identity (issue 21,
class 4), and two objects with one identity where they are applied together (PG005).

Two Deployments ``team-a/web`` in one file: the first, benign, carries
``poolgate.io/ignore: "PG301=reviewed, ..."``; the second, privileged, is the one
``kubectl apply`` leaves running. Suppressions were matched by file and identity, so
the scan reported nothing. Now an annotation holds for its own document only, and the
pair is a PG005 finding on the second. Each case is a repository a pull request
author could write, scanned by ``python -m scanner`` in a subprocess.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import cli_run
from tool_check import require_kustomize

from scanner.kinds import CLUSTER_SCOPED
from scanner.kinds.resources import RESOURCES
from scanner.model.duplicates import duplicate_objects
from scanner.sources.yaml.document import parse_stream

DIGEST = "0d9a2a9e5f0c4e3b8f7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"

BENIGN = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team-a
  annotations:
    poolgate.io/ignore: "PG301=reviewed, no privileged containers here"
spec:
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
        - name: web
          image: nginx@sha256:{DIGEST}
"""

PRIVILEGED = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team-a
spec:
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
        - name: web
          image: nginx@sha256:{DIGEST}
          securityContext:
            privileged: true
"""


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def scan(root: Path, *args: str) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Exit code, findings (suppressed ones included) and notifications."""
    result = cli_run.poolgate("scan", *args, "--format", "json", cwd=root)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    report = json.loads(result.stdout)
    return result.returncode, report["findings"], report["notifications"]


def where(findings: list[dict[str, Any]], rule: str) -> list[tuple[str, int, bool]]:
    """(uri, line, suppressed) of each finding of ``rule``."""
    return sorted(
        (f["location"]["uri"], f["location"]["line"], f["suppression"] is not None)
        for f in findings
        if f["ruleId"] == rule
    )


def test_a_benign_twin_no_longer_hides_the_privileged_object(tmp_path: Path) -> None:
    root = repo(tmp_path, {"k8s/web.yaml": BENIGN + "---\n" + PRIVILEGED})
    second = BENIGN.count("\n") + 2  # the privileged document's first line
    code, findings, _ = scan(root, "k8s")
    assert code == 1
    assert where(findings, "PG301") == [("k8s/web.yaml", second + 16, False)]
    [duplicate] = [f for f in findings if f["ruleId"] == "PG005"]
    assert (duplicate["location"]["line"], duplicate["level"]) == (second, "error")
    assert duplicate["message"] == (
        "Deployment team-a/web is defined again (first at line 1); "
        "the cluster keeps only the one applied last"
    )
    assert duplicate["object"]["name"] == "web" and duplicate["suppression"] is None


def test_an_annotation_still_suppresses_on_its_own_document(tmp_path: Path) -> None:
    """The privileged copy may accept its own findings, PG005 included, in review."""
    annotated = PRIVILEGED.replace(
        "  namespace: team-a\n",
        "  namespace: team-a\n  annotations:\n"
        '    poolgate.io/ignore: "PG301=needs /dev, PLAT-9, PG005=replaces the one above"\n',
        1,
    )
    root = repo(tmp_path, {"k8s/web.yaml": BENIGN + "---\n" + annotated})
    code, findings, _ = scan(root, "k8s")
    assert code == 0
    assert [suppressed for _, _, suppressed in where(findings, "PG301")] == [True]
    assert [suppressed for _, _, suppressed in where(findings, "PG005")] == [True]


def test_the_same_identity_in_separate_files_is_not_reported(tmp_path: Path) -> None:
    """Overlays and samples repeat objects; each file is applied on its own."""
    root = repo(tmp_path, {"a/web.yaml": BENIGN, "b/web.yaml": BENIGN, "c/web.yaml": PRIVILEGED})
    code, findings, _ = scan(root, ".")
    assert where(findings, "PG005") == []
    # each file's annotation covers its own object; c/ has none
    assert where(findings, "PG301") == [("c/web.yaml", 17, False)]
    assert code == 1


def test_context_objects_never_count(tmp_path: Path) -> None:
    """A ``--context`` snapshot with its own duplicates, and copies of scanned objects."""
    snapshot = BENIGN + "---\n" + PRIVILEGED + "---\n" + BENIGN
    root = repo(tmp_path, {"k8s/web.yaml": BENIGN, "snapshot/all.yaml": snapshot})
    code, findings, notes = scan(root, "k8s", "--context-path", "snapshot")
    assert code == 0
    assert where(findings, "PG005") == []
    assert notes == []


def test_list_items_are_objects_of_their_own(tmp_path: Path) -> None:
    """An annotated List item covers that item only; a repeated item is PG005."""
    benign_item = "\n".join("    " + line for line in BENIGN.splitlines()).replace(
        "    apiVersion", "  - apiVersion", 1
    )
    privileged_item = "\n".join("    " + line for line in PRIVILEGED.splitlines()).replace(
        "    apiVersion", "  - apiVersion", 1
    )
    listed = f"apiVersion: v1\nkind: List\nitems:\n{benign_item}\n{privileged_item}\n"
    root = repo(tmp_path, {"k8s/list.yaml": listed})
    second = 4 + BENIGN.count("\n")
    code, findings, _ = scan(root, "k8s")
    assert code == 1
    assert where(findings, "PG005") == [("k8s/list.yaml", second, False)]
    assert where(findings, "PG301") == [("k8s/list.yaml", second + 16, False)]


def test_an_overlay_annotation_does_not_cover_another_overlay(tmp_path: Path) -> None:
    """Two overlays of one base render the same base document: same file, same line,
    same identity. Overlay A's annotation must not silence overlay B's privileged patch
    (before, it did: the finding came out suppressed), and two units are not PG005."""
    require_kustomize()
    base = PRIVILEGED.replace("          securityContext:\n            privileged: true\n", "")
    patch_a = """\
resources: [../base]
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
        namespace: team-a
        annotations:
          poolgate.io/ignore: "PG301=reviewed, not privileged"
"""
    patch_b = """\
resources: [../base]
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web, namespace: team-a}
      spec:
        template:
          spec:
            containers: [{name: web, securityContext: {privileged: true}}]
"""
    root = repo(
        tmp_path,
        {
            "base/kustomization.yaml": "resources: [web.yaml]\n",
            "base/web.yaml": base,
            "overlay-a/kustomization.yaml": patch_a,
            "overlay-b/kustomization.yaml": patch_b,
        },
    )
    code, findings, _ = scan(root, "overlay-a", "overlay-b")
    assert code == 1
    # the patched field is not in the base file: its nearest line there, the container
    assert where(findings, "PG301") == [("base/web.yaml", 14, False)]
    assert where(findings, "PG005") == []


def test_a_kustomization_output_is_one_unit(tmp_path: Path) -> None:
    """Two resources of one kustomization with one identity (the version differs, which
    Kustomize lets through): kustomize orders apps/v1 before apps/v1beta2, so the
    benign v1beta2 copy is what the cluster keeps, reported with the other's file."""
    require_kustomize()
    legacy = BENIGN.replace("apps/v1", "apps/v1beta2")
    root = repo(
        tmp_path,
        {
            "app/kustomization.yaml": "resources: [privileged.yaml, legacy.yaml]\n",
            "app/privileged.yaml": PRIVILEGED,
            "app/legacy.yaml": legacy,
        },
    )
    _, findings, _ = scan(root, "app")
    [duplicate] = [f for f in findings if f["ruleId"] == "PG005"]
    assert duplicate["location"]["uri"] == "app/legacy.yaml"
    assert duplicate["location"]["line"] == 1
    assert "(first at app/privileged.yaml:1)" in duplicate["message"]


FAKE_HELM = """
# helm renders a private copy of the chart (scanner/sources/helm.py) in an environment
# of its own: the chart is named by its Chart.yaml, the outputs' directory is written here.
chart = open(os.path.join(sys.argv[3], "Chart.yaml")).read().split("name: ")[1].split()[0]
sys.stdout.write(open(os.path.join(OUTPUTS, chart + ".yaml")).read())
"""


def test_a_chart_output_is_one_unit_and_charts_are_separate(tmp_path: Path) -> None:
    """Helm renders a chart's templates as one stream: one identity from two templates
    is PG005, naming the other template; the same identity in another chart is not."""
    twice = (
        "---\n# Source: a/templates/web.yaml\n"
        + BENIGN
        + "---\n# Source: a/templates/debug.yaml\n"
        + PRIVILEGED
    )
    once = "---\n# Source: b/templates/web.yaml\n" + PRIVILEGED
    files = {"charts/a/Chart.yaml": "apiVersion: v2\nname: a\nversion: 0.1.0\n"}
    files["charts/b/Chart.yaml"] = files["charts/a/Chart.yaml"].replace("name: a", "name: b")
    files["charts/a/templates/web.yaml"] = BENIGN
    files["charts/a/templates/debug.yaml"] = PRIVILEGED
    files["charts/b/templates/web.yaml"] = PRIVILEGED
    root = repo(tmp_path, files)
    outputs = tmp_path / "rendered"
    outputs.mkdir()
    (outputs / "a.yaml").write_text(twice)
    (outputs / "b.yaml").write_text(once)
    bin_dir = tmp_path / "bin"
    _fake_tool(bin_dir, "helm", f"OUTPUTS = {str(outputs)!r}\n" + FAKE_HELM)
    env = {"PATH": str(bin_dir)}
    result = cli_run.poolgate("scan", "charts", "--format", "json", cwd=root, env=env)
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    [duplicate] = [f for f in findings if f["ruleId"] == "PG005"]
    # Helm objects point at their template's kind line (scanner/sources/helm.py)
    assert (duplicate["location"]["uri"], duplicate["location"]["line"]) == (
        "charts/a/templates/debug.yaml",
        2,
    )
    assert "(first at charts/a/templates/web.yaml:2)" in duplicate["message"]
    privileged = where(findings, "PG301")
    assert [(uri, suppressed) for uri, _, suppressed in privileged] == [
        ("charts/a/templates/debug.yaml", False),
        ("charts/b/templates/web.yaml", False),
    ]


def _fake_tool(directory: Path, name: str, body: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport os, sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


# --- the identity PG005 compares ------------------------------------------------------


def test_every_cluster_scoped_resource_poolgate_lists_is_known_as_such() -> None:
    for resource in RESOURCES:
        assert ((resource.group, resource.kind) in CLUSTER_SCOPED) is not resource.namespaced


def test_each_copy_is_reported_once_against_the_first() -> None:
    """2,000 objects in one file, every other one a copy of the one before, and a third
    copy named against the first."""
    documents = [
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{index // 2}, namespace: ns}}\n"
        for index in range(2_000)
    ]
    documents.append("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c0, namespace: ns}\n")
    objects = parse_stream("---\n".join(documents), "many.yaml").objects
    found = duplicate_objects(objects)
    assert len(found) == 1_001
    names = [document.ref.name for document in found if document.ref is not None]
    assert sorted(set(names)) == sorted(f"c{index}" for index in range(1_000))
    assert found[-1].message.startswith("ConfigMap ns/c0 is defined again (first at line 1)")
