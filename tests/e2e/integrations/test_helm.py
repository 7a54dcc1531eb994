"""Helm charts: the mapping of rendered objects to templates, and the scan around it.

The mapping is tested on recorded ``helm template`` output (fixtures/recorded);
the command line, environment and routing with a stand-in ``helm`` that records
how it was called and prints that output; real Helm only when it is installed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from pg_integration import PRIVILEGED, ROOT, clean_env, fake_tool, run_poolgate

from scanner.sources import helm
from scanner.sources.rendered import RenderOptions

CHART = ROOT / "fixtures" / "helm" / "trainer"
RECORDED = ROOT / "fixtures" / "recorded" / "helm-trainer.yaml"
TEMPLATES = "fixtures/helm/trainer/templates"
NOT_INSTALLED = (
    "fixtures/helm/trainer: Helm chart not rendered: `helm` is not installed "
    "(https://helm.sh/docs/intro/install/); scanned nothing in it"
)


def test_recorded_output_maps_every_object_to_its_template() -> None:
    inventory = helm.map_output(RECORDED.read_text(), CHART, ROOT)
    placed = [
        (obj.kind, obj.name, obj.origin.uri, obj.origin.line, obj.origin.source_type)
        for obj in inventory.objects
    ]
    assert placed == [
        # Two ServiceAccounts from one template: its two `kind: ServiceAccount`
        # lines, in order (names are templated, so order decides).
        ("ServiceAccount", "trainer-trainer", f"{TEMPLATES}/serviceaccount.yaml", 2, "helm"),
        ("ServiceAccount", "trainer-trainer-debug", f"{TEMPLATES}/serviceaccount.yaml", 9, "helm"),
        ("Deployment", "trainer-trainer", f"{TEMPLATES}/deployment.yaml", 2, "helm"),
    ]
    assert inventory.files == 2
    assert not inventory.invalid and not inventory.read_errors


def test_every_field_of_a_rendered_object_points_at_its_kind_line() -> None:
    """The template line of a field is not knowable; the object's kind line is."""
    inventory = helm.map_output(RECORDED.read_text(), CHART, ROOT)
    deployment = inventory.objects[-1]
    path = "spec.template.spec.containers[0].securityContext.privileged"
    assert deployment.position(path) == (2, 1)
    assert deployment.body["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "privileged": True
    }


def test_locate_uses_the_only_kind_line() -> None:
    template = "# comment\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .x }}\n"
    assert helm.locate(template, "Service", "anything", 0, 1) == 3


def test_locate_picks_the_document_with_the_literal_name() -> None:
    template = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n"
        "---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    a: b\n  name: second\n"
    )
    # Only one rendered ConfigMap (the other was dropped by a condition): the name decides.
    assert helm.locate(template, "ConfigMap", "second", 0, 1) == 7
    assert helm.locate(template, "ConfigMap", "first", 0, 1) == 2


def test_locate_falls_back_to_line_1_when_it_cannot_know() -> None:
    two = (
        "kind: Secret\nmetadata:\n  name: {{ .a }}\n"
        "---\n"
        "kind: Secret\nmetadata:\n  name: {{ .b }}\n"
    )
    # A range produced three Secrets from two kind lines: no honest choice.
    assert helm.locate(two, "Secret", "x", 2, 3) == 1
    assert helm.locate("kind: {{ .Values.kind }}\n", "Deployment", "x", 0, 1) == 1
    assert helm.locate(two, "Deployment", "x", 0, 1) == 1


def test_templates_that_are_not_on_disk_map_to_the_chart_file(tmp_path: Path) -> None:
    """A packaged subchart (charts/sub-1.0.0.tgz) or a path trying to leave the chart."""
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n")
    rendered = (
        "---\n# Source: app/charts/sub/templates/cm.yaml\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\n"
        "---\n# Source: app/../../etc/passwd\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: escape\n"
    )
    inventory = helm.map_output(rendered, chart, tmp_path)
    assert [(obj.origin.uri, obj.origin.line) for obj in inventory.objects] == [
        ("chart/Chart.yaml", 1),
        ("chart/Chart.yaml", 1),
    ]


def test_objects_without_a_namespace_land_in_the_helm_namespace(tmp_path: Path) -> None:
    """``helm template --namespace`` writes the namespace only where a template spells
    .Release.Namespace; ``helm install`` puts every namespaced object there, so that is
    where poolgate judges it (found in review: a chart's privileged DaemonSet was
    judged in default). Cluster-scoped kinds, kinds of unknown scope and objects
    that name their namespace are left as written."""
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n")
    rendered = "".join(
        f"---\n# Source: app/templates/{name}.yaml\n{body}"
        for name, body in (
            ("ds", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: dcgm\n"),
            (
                "cr",
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                "metadata:\n  name: reader\n",
            ),
            (
                "own",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: elsewhere\n",
            ),
            ("crd", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"),
        )
    )
    inventory = helm.placed(helm.map_output(rendered, chart, tmp_path), "gpu-operator")
    assert [(obj.kind, obj.namespace, obj.ref.namespace) for obj in inventory.objects] == [
        ("DaemonSet", "gpu-operator", "gpu-operator"),
        ("ClusterRole", "", ""),
        ("ConfigMap", "elsewhere", "elsewhere"),
        ("Widget", "", ""),
    ]


def test_command_line_passes_values_and_sets_and_nothing_else(tmp_path: Path) -> None:
    options = RenderOptions(helm_values=["v.yaml"], helm_set=["a.b=1"], helm_namespace="ml")
    argv = helm.command("/bin/helm", Path("fixtures/helm/My_Chart"), options)
    assert argv == [
        "/bin/helm",
        "template",
        "my-chart",
        os.path.abspath("fixtures/helm/My_Chart"),
        "--namespace",
        "ml",
        "--values",
        os.path.abspath("v.yaml"),
        "--set",
        "a.b=1",
    ]


def recording_helm(log: Path, output: Path = RECORDED) -> str:
    """A stand-in helm that appends how it was called to ``log`` and prints ``output``.
    The paths are in the script: the renderer's environment is an allowlist."""
    return f"""
plugins = os.environ.get("HELM_PLUGINS", "")
record = {{"argv": sys.argv[1:], "plugins": plugins, "cwd": os.getcwd(),
          "plugin_files": os.listdir(plugins or "/nonexistent"),
          "no_plugins": os.environ.get("HELM_NO_PLUGINS", ""),
          "post_renderer": os.environ.get("HELM_POST_RENDERER", "")}}
with open({json.dumps(str(log))}, "a") as log:
    log.write(json.dumps(record) + "\\n")
sys.stdout.write(open({json.dumps(str(output))}).read())
"""


def _fake_helm_env(tmp_path: Path, body: str | None = None) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    log = tmp_path / "helm.log"
    fake_tool(bin_dir, "helm", body if body is not None else recording_helm(log))
    env = clean_env(
        PATH=str(bin_dir),
        HELM_PLUGINS="/should/not/be/used",
        HELM_POST_RENDERER="/should/not/be/used",
    )
    return env, log


def test_scan_renders_the_chart_once_and_reports_on_the_template(tmp_path: Path) -> None:
    env, log = _fake_helm_env(tmp_path)
    values = tmp_path / "values-prod.yaml"
    values.write_text("privileged: true\n")
    result = run_poolgate(
        "scan",
        "fixtures/helm",
        "--helm-values",
        str(values),
        "--helm-set",
        "image=registry.example.com/x@sha256:" + "b" * 64,
        "--helm-namespace",
        "ml",
        "--format",
        "json",
        env=env,
    )
    assert result.returncode == 1, result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 1  # one render per chart, no subprocess per object
    # Helm renders a private copy of the chart (issue 21: nothing outside the chart to
    # read), named as the chart, in its working directory.
    copy = Path(calls[0]["argv"][2])
    assert copy.name == "trainer" and copy != CHART and ROOT not in copy.parents
    assert calls[0]["cwd"] == str(copy)
    assert calls[0]["argv"] == [
        "template",
        "trainer",
        str(copy),
        "--namespace",
        "ml",
        "--values",
        str(values),
        "--set",
        "image=registry.example.com/x@sha256:" + "b" * 64,
    ]
    assert calls[0]["plugins"] != "/should/not/be/used" and calls[0]["plugin_files"] == []
    assert calls[0]["no_plugins"] == "1" and calls[0]["post_renderer"] == ""
    report = json.loads(result.stdout)
    privileged = [f for f in report["findings"] if f["ruleId"] == "PG301"]
    assert [(f["location"]["uri"], f["location"]["line"]) for f in privileged] == [
        (f"{TEMPLATES}/deployment.yaml", 2)
    ]
    assert privileged[0]["object"]["name"] == "trainer-trainer"


def test_a_template_named_alone_renders_its_chart(tmp_path: Path) -> None:
    """pre-commit passes changed files one by one; a template alone is not YAML."""
    env, log = _fake_helm_env(tmp_path)
    result = run_poolgate(
        "scan",
        f"{TEMPLATES}/deployment.yaml",
        f"{TEMPLATES}/serviceaccount.yaml",
        "fixtures/helm/trainer/values.yaml",
        "--format",
        "json",
        env=env,
    )
    assert result.returncode == 1, result.stderr
    assert len(log.read_text().splitlines()) == 1
    report = json.loads(result.stdout)
    assert not [f for f in report["findings"] if f["ruleId"] == "PG001"]
    assert any(f["ruleId"] == "PG301" for f in report["findings"])


def test_without_helm_the_chart_is_reported_and_the_rest_is_scanned(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = clean_env(PATH=str(empty))
    only_chart = run_poolgate("scan", "fixtures/helm", env=env)
    assert only_chart.returncode == 3, only_chart.stderr
    assert f"poolgate: error: {NOT_INSTALLED}" in only_chart.stdout

    bad = tmp_path / "bad.yaml"
    bad.write_text(PRIVILEGED)
    with_more = run_poolgate("scan", "fixtures/helm", str(bad), "--format", "json", env=env)
    assert with_more.returncode == 1  # a finding outranks "incomplete"
    report = json.loads(with_more.stdout)
    assert [f["ruleId"] for f in report["findings"]] == ["PG301"]
    assert [n["message"] for n in report["notifications"]] == [NOT_INSTALLED.split(": ", 1)[1]]


def test_helm_failure_is_one_line_on_the_chart(tmp_path: Path) -> None:
    failing = (
        'sys.stderr.write("walk.go:75: found symbolic link\\n'
        'Error: parse error at (trainer/templates/deployment.yaml:4): unclosed action\\n")\n'
        "sys.exit(1)"
    )
    env, _ = _fake_helm_env(tmp_path, failing)
    result = run_poolgate("scan", "fixtures/helm", env=env)
    assert result.returncode == 3
    assert (
        "poolgate: error: fixtures/helm/trainer: Helm chart not rendered: helm template failed: "
        "parse error at (trainer/templates/deployment.yaml:4): unclosed action"
    ) in result.stdout
    assert "Traceback" not in result.stderr


def test_a_chart_linking_outside_the_repository_is_not_rendered(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    chart = repo / "chart"
    shutil.copytree(CHART, chart)
    (repo / ".git").mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("token\n")
    (chart / "files").mkdir()
    (chart / "files" / "token").symlink_to(outside)
    env, log = _fake_helm_env(tmp_path)
    result = run_poolgate("scan", "chart", cwd=repo, env=env)
    assert result.returncode == 3
    # Issue 21 names the file and tightens the boundary to the chart.
    assert (
        "chart/files/token: Helm chart chart not rendered: symbolic link points outside the chart"
    ) in result.stdout
    assert not log.exists()


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed on this machine")
def test_real_helm_renders_the_fixture_chart() -> None:
    result = run_poolgate("scan", "fixtures/helm", "--format", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    located = {
        (f["ruleId"], f["location"]["uri"], f["location"]["line"]) for f in report["findings"]
    }
    assert ("PG301", f"{TEMPLATES}/deployment.yaml", 2) in located
    assert report["summary"]["objects"] == 3
