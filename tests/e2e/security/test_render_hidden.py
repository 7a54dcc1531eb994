"""Issue 21, class 2 (its Kustomize part): a kustomization hides manifests that
``kubectl apply -R -f DIR`` would apply. In a rendered Kustomize directory, a manifest
file no field names is scanned as a plain manifest, with a warning naming it; files the
build names are reported once, through the build. Helm chart directories keep their
behaviour (only the rendered templates). Real ``kubectl kustomize`` throughout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_run import ROOT

from .support import (
    CONFIGMAP,
    PRIVILEGED,
    fake_tool,
    findings,
    notes,
    render_env,
    report,
    repository,
    scan,
    upload_pack,
    write,
)

NOTE = (
    "not named by {kustomization} or the kustomizations it builds in: scanned as a plain "
    "manifest (`kubectl apply -R -f` would apply it)"
)
PATCH = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team-a
spec:
  template:
    spec:
      hostPID: true
"""


def test_an_empty_kustomization_does_not_hide_its_directory(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    write(repo, {"app/Kustomization": "resources: []\n", "app/deploy.yaml": PRIVILEGED})
    result = scan(repo, "app")
    assert result.returncode == 1, result.stdout + result.stderr
    assert findings(result) == [("PG301", "app/deploy.yaml", "web")]
    assert notes(result) == [
        ("warning", "app/deploy.yaml", None, NOTE.format(kustomization="app/Kustomization"))
    ]


def test_named_files_are_reported_once_and_data_files_not_as_objects(tmp_path: Path) -> None:
    """deploy.yaml is built (one finding, through the build); patch.yaml is a patch, not
    an object; notes.yaml holds no Kubernetes object, so it gets no warning."""
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": "resources: [deploy.yaml]\npatches:\n  - path: patch.yaml\n",
            "app/deploy.yaml": PRIVILEGED,
            "app/patch.yaml": PATCH,
            "app/notes.yaml": "owner: team-a\n",
        },
    )
    result = scan(repo, "app")
    assert notes(result) == []
    assert findings(result) == [
        ("PG301", "app/deploy.yaml", "web"),
        ("PG302", "app/deploy.yaml", "web"),  # the patch's hostPID, on the built object
    ]


def test_files_below_are_covered_by_the_build_or_their_own(tmp_path: Path) -> None:
    """A base the build reaches is walked with it; a kustomization below that the build
    does not reach is rendered on its own, and a chart below is rendered too."""
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": "resources: [base]\n",
            "app/base/kustomization.yaml": "resources: [cm.yaml]\n",
            "app/base/cm.yaml": CONFIGMAP.format(name="named"),
            "app/base/extra.yaml": PRIVILEGED.replace("name: web", "name: extra"),
            "app/other/Kustomization": "resources: []\n",
            "app/other/pod.yaml": PRIVILEGED.replace("name: web", "name: other"),
            "app/chart/Chart.yaml": "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
        },
    )
    empty = tmp_path / "no-helm"
    empty.mkdir()
    kubectl_only = empty / "kubectl"
    kubectl_only.symlink_to(shutil.which("kubectl", path=render_env()["PATH"]) or "kubectl")
    result = scan(repo, "app", env={"PATH": str(empty)})
    assert findings(result) == [
        ("PG301", "app/base/extra.yaml", "extra"),
        ("PG301", "app/other/pod.yaml", "other"),
    ]
    assert sorted(notes(result)) == [
        (
            "error",
            "app/chart",
            None,
            "Helm chart not rendered: `helm` is not installed (https://helm.sh/docs/intro/install/); "
            "scanned nothing in it",
        ),
        (
            "warning",
            "app/base/extra.yaml",
            None,
            NOTE.format(kustomization="app/kustomization.yaml"),
        ),
        (
            "warning",
            "app/other/pod.yaml",
            None,
            NOTE.format(kustomization="app/other/Kustomization"),
        ),
    ]
    assert report(result)["summary"]["objects"] == 3  # named, extra, other


def test_a_refused_kustomization_scans_its_manifests_but_not_its_patches(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    marker = tmp_path / "PWNED"
    write(
        repo,
        {
            "app/kustomization.yaml": (
                f"resources: [deploy.yaml, {upload_pack(marker)}]\npatches:\n  - path: patch.yaml\n"
            ),
            "app/deploy.yaml": PRIVILEGED,
            "app/patch.yaml": PATCH.replace("name: web", "name: patched"),
        },
    )
    result = scan(repo, "app")
    assert not marker.exists()
    assert findings(result) == [("PG301", "app/deploy.yaml", "web")]
    assert [level for level, *_ in notes(result)] == ["error"]  # the refusal; no warnings


RECORDED_HELM = ROOT / "fixtures" / "recorded" / "helm-trainer.yaml"


def test_a_chart_directory_keeps_rendering_only_its_templates(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    shutil.copytree(ROOT / "fixtures" / "helm" / "trainer", repo / "chart")
    write(repo, {"chart/extra.yaml": PRIVILEGED.replace("name: web", "name: extra")})
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "helm", f"sys.stdout.write(open({str(RECORDED_HELM)!r}).read())")
    result = scan(repo, "chart", env={"PATH": str(bin_dir)})
    assert "extra" not in {name for *_, name in findings(result)}
    assert notes(result) == []


def test_a_config_file_in_a_kustomization_directory_is_never_an_object(tmp_path: Path) -> None:
    """The left-out files of a build are read as a walk reads them: ``.poolgate.yaml``
    (a GpuPoolGate object by its apiVersion and kind) is configuration, never scanned."""
    repo = repository(tmp_path)
    config = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nmetadata: {name: x}\nspec: {}\n"
    write(
        repo,
        {
            "app/kustomization.yaml": "resources: [deploy.yaml]\n",
            "app/deploy.yaml": PRIVILEGED,
            "app/extra/.poolgate.yaml": config,  # not the config in use: found by name
        },
    )
    result = scan(repo, "app")
    assert notes(result) == []
    assert findings(result) == [("PG301", "app/deploy.yaml", "web")]
    assert report(result)["summary"]["objects"] == 1
