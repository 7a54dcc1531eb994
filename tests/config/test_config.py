"""``.poolgate.yaml``: discovery, schema problems with key path and line, conversion to Config."""

from __future__ import annotations

import datetime
import os
from dataclasses import fields, replace
from pathlib import Path

import pytest

from scanner.config import discovery, template, validation
from scanner.config import file as configfile
from scanner.config.values import AdminSubject, Config, Exemption, Require
from scanner.errors import ConfigError, UsageError
from scanner.findings.records import Level
from scanner.pipeline import ScanOptions, load_ruleset, scan_paths

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "config"

HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- discovery -------------------------------------------------------------------


def test_discovery_walks_up_from_a_file_or_directory(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    config = write(tmp_path / ".poolgate.yaml", HEADER)
    deep = tmp_path / "k8s" / "apps" / "gpu"
    deep.mkdir(parents=True)
    manifest = write(deep / "train.yaml", "")
    assert discovery.discover(deep) == config
    assert discovery.discover(manifest) == config
    nearer = write(tmp_path / "k8s" / ".poolgate.yaml", HEADER)
    assert discovery.discover(manifest) == nearer


def test_discovery_stops_at_the_repository_root(tmp_path: Path) -> None:
    write(tmp_path / ".poolgate.yaml", HEADER)  # above the repository: not ours
    repo = tmp_path / "repo"
    (repo / "k8s").mkdir(parents=True)
    (repo / ".git").write_text("gitdir: ../elsewhere\n")  # worktrees have a .git file
    assert discovery.discover(repo / "k8s") is None
    inside = write(repo / ".poolgate.yaml", HEADER)
    assert discovery.discover(repo / "k8s") == inside


def test_discovery_without_a_repository_stops_at_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: outside a repository the walk went to ``/``, so whoever could
    write an ancestor (``/tmp/.poolgate.yaml``) set the policy of the scan."""
    write(tmp_path / ".poolgate.yaml", HEADER)  # a writable ancestor: never read
    work = tmp_path / "work"
    deep = work / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert discovery.discover(deep) is None
    assert discovery.search_path(deep) == ([deep, deep.parent, work], work)
    nearer = write(work / "a" / ".poolgate.yaml", HEADER)
    assert discovery.discover(deep) == nearer
    nearer.unlink()
    own = write(work / ".poolgate.yaml", HEADER)
    assert discovery.discover(deep) == own


def test_discovery_outside_a_repository_and_the_working_directory_finds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    write(tmp_path / ".poolgate.yaml", HEADER)
    config = write(elsewhere / ".poolgate.yaml", HEADER + "spec: {skuLabel: elsewhere}\n")
    manifest = write(elsewhere / "pod.yaml", "")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert discovery.search_path(manifest) == ([], None)
    assert discovery.discover(manifest) is None
    loaded = discovery.resolve([str(manifest)])
    assert loaded.config == Config()
    assert loaded.warnings == (
        f"{config} is not used: it is outside a repository and the working directory, "
        "where discovery does not look; pass --config to use it",
    )
    assert discovery.resolve([str(manifest)], config).config.sku_label == "elsewhere"


def test_a_symlinked_config_may_not_point_outside_the_repository(tmp_path: Path) -> None:
    outside = write(tmp_path / "secret.yaml", "token: hunter2\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".poolgate.yaml").symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link points outside the repository"):
        discovery.discover(repo)
    inside = write(repo / "config" / "poolgate.yaml", HEADER)
    (repo / ".poolgate.yaml").unlink()
    (repo / ".poolgate.yaml").symlink_to(inside)
    assert discovery.discover(repo) == repo / ".poolgate.yaml"


def test_resolve_prefers_the_explicit_file_and_defaults_without_one(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    assert discovery.resolve([str(tmp_path)]).config == Config()
    explicit = write(tmp_path / "ci" / "strict.yaml", HEADER + "spec: {skuLabel: gpu-sku}\n")
    write(tmp_path / ".poolgate.yaml", HEADER + "spec: {skuLabel: discovered}\n")
    assert discovery.resolve([str(tmp_path)], explicit).config.sku_label == "gpu-sku"
    assert discovery.resolve([str(tmp_path)]).config.sku_label == "discovered"
    with pytest.raises(UsageError, match="no such file"):
        discovery.resolve([str(tmp_path)], tmp_path / "missing.yaml")


# --- conversion ------------------------------------------------------------------


def test_design_example_maps_onto_config() -> None:
    loaded = configfile.load(FIXTURES / "design-example.yaml")
    config = loaded.config
    assert loaded.warnings == ()
    assert config.require == Require()
    assert config.pool_labels == ("pool", "cloud.google.com/gke-nodepool", "karpenter.sh/nodepool")
    assert config.operator_namespaces == ("gpu-operator", "nvidia-gpu-operator")
    assert config.rules["PG204"].level is Level.NOTE and config.rules["PG204"].enabled is None
    assert config.rules["PG306"].enabled is False and config.rules["PG306"].line == 22
    assert config.exemptions == (
        Exemption(
            rule="PG301",
            namespace="monitoring",
            kind="DaemonSet",
            name="dcgm-exporter",
            reason="DCGM exporter needs device access; owned by the platform team.",
            expires=datetime.date(2027, 3, 31),
            line=24,
        ),
    )
    assert config.source == str(FIXTURES / "design-example.yaml")


def test_false_switches_become_empty_and_every_field_is_mapped(tmp_path: Path) -> None:
    rules = tmp_path / "policy" / "rules"
    rules.mkdir(parents=True)
    path = write(
        tmp_path / "policy" / ".poolgate.yaml",
        HEADER
        + """\
spec:
  require: {runtimeClass: false, networkPolicy: false, podSecurity: baseline,
            imageDigestPin: false, signatureVerify: false, workloadIdentity: false,
            timeSliceSameTrustOnly: false, forbidNodeWideObjectIAM: false,
            weightBucketPublicAccess: true, cmek: false}
  operatorNamespaces: [gpu-ops]
  systemNamespaces: [kube-system, calico-system]
  trustDomainLabel: acme.io/tenant
  skuLabel: acme.io/gpu
  poolLabels: [acme.io/pool]
  extendedResourceToleration: true
  workloadIdentityKeys: [acme.io/cloud-role]
  workloadIdentityAccounts: [ml/trainer, batch-*/*]
  admins:
    - {kind: Group, name: platform-admins}
    - {kind: ServiceAccount, name: argocd, namespace: argocd}
  ruleDirs: [rules]
  rules:
    PG501: {params: {allowTags: [latest]}}
""",
    )
    config = configfile.load(path).config
    assert config == Config(
        require=Require(
            runtime_class="",
            image_digest_pin=False,
            signature_verify=False,
            pod_security="baseline",
            network_policy="",
            workload_identity=False,
            time_slice_same_trust_only=False,
            forbid_node_wide_object_iam=False,
            weight_bucket_public_access=True,
            cmek=False,
        ),
        operator_namespaces=("gpu-ops",),
        system_namespaces=("kube-system", "calico-system"),
        trust_domain_label="acme.io/tenant",
        sku_label="acme.io/gpu",
        pool_labels=("acme.io/pool",),
        extended_resource_toleration=True,
        workload_identity_keys=("acme.io/cloud-role",),
        workload_identity_accounts=("ml/trainer", "batch-*/*"),
        admins=(
            AdminSubject("Group", "platform-admins"),
            AdminSubject("ServiceAccount", "argocd", "argocd"),
        ),
        rules=config.rules,
        rule_dirs=(str(rules),),
        source=str(path),
    )
    assert dict(config.rules["PG501"].params) == {"allowTags": ["latest"]}
    view = config.cel_view()
    assert view["require"]["runtimeClass"] == "" and view["require"]["networkPolicy"] == ""
    assert view["extendedResourceToleration"] is True
    assert view["require"]["weightBucketPublicAccess"] is True and view["require"]["cmek"] is False
    assert view["workloadIdentityKeys"] == ["acme.io/cloud-role"]
    assert view["admins"][1] == {"kind": "ServiceAccount", "name": "argocd", "namespace": "argocd"}


def test_cel_view_names_every_rule_facing_field_in_camel_case() -> None:
    not_rule_facing = {"rules", "rule_dirs", "exemptions", "exclude", "source", "admission_preview"}
    view = Config().cel_view()

    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part.capitalize() for part in rest)

    expected = {camel(f.name) for f in fields(Config) if f.name not in not_rule_facing}
    assert set(view) == expected
    assert set(view["require"]) == {camel(f.name).replace("Iam", "IAM") for f in fields(Require)}


# --- problems --------------------------------------------------------------------


def test_wrong_types_fail_with_key_path_and_line_all_in_one_pass() -> None:
    """The schema's problems and the conversion's (an impossible date in a section the
    schema passed) come together: no fix-one-run-again loop."""
    with pytest.raises(ConfigError) as caught:
        configfile.load(FIXTURES / "wrong-types.yaml")
    message = str(caught.value)
    shown = os.path.relpath(FIXTURES / "wrong-types.yaml")
    assert message.startswith("6 config problems:")
    for line, path, text in [
        (6, "spec.require.runtimeClass", "expected a RuntimeClass name or false, got boolean true"),
        (7, "spec.require.podSecurity", 'expected one of "privileged", "baseline", "restricted"'),
        (8, "spec.require.imageDigestPin", 'expected a boolean (true/false), got string "yes"'),
        (9, "spec.operatorNamespaces", 'expected a list, got string "gpu-operator"'),
        (11, "spec.rules.PG301.level", 'expected one of "error", "warning", "note"; got'),
        (14, "spec.exemptions[0].expires", "2027-02-30 is not a calendar date"),
    ]:
        assert f"{shown}:{line}: {path}: {text}" in message, message


def test_an_impossible_date_fails_after_the_schema_passes(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        HEADER + "spec:\n  exemptions:\n    - rule: PG301\n      expires: 2027-02-30\n",
    )
    with pytest.raises(ConfigError, match=r"c\.yaml:6: spec\.exemptions\[0\]\.expires: "):
        configfile.load(path)


def test_unknown_keys_come_with_key_path_line_and_the_key_they_misspell() -> None:
    loaded = configfile.load(FIXTURES / "unknown-keys.yaml")
    assert loaded.warnings == ()
    assert [key.line for key in loaded.unknown] == [9, 10, 11]
    assert [key.describe() for key in loaded.unknown] == [
        "unknown key spec.require.gpuDirect",
        "unknown key spec.poolLabel; did you mean poolLabels?",
        "unknown key spec.metadataOwner",
    ]
    assert loaded.config.require.runtime_class == ""
    assert loaded.config.pool_labels == Config().pool_labels


def test_an_unknown_key_in_an_exemption_is_an_error_not_a_wider_exemption(
    tmp_path: Path,
) -> None:
    """Ignoring ``matches:`` or ``knd:`` would leave an exemption that matches more
    objects than it names, so these keys fail the file instead of warning."""
    path = write(
        tmp_path / ".poolgate.yaml",
        HEADER
        + "spec:\n  exemptions:\n"
        + "    - rule: PG301\n      matches: {namespace: monitoring}\n      reason: dcgm\n"
        + "    - rule: PG501\n      match: {namespace: monitoring, knd: DaemonSet}\n"
        + "      reason: vendor\n",
    )
    with pytest.raises(ConfigError) as caught:
        configfile.load(path)
    message = str(caught.value)
    assert message.startswith("2 config problems:"), message
    assert f"{path}:6: spec.exemptions[0].matches: unknown key in an exemption" in message
    assert f"{path}:9: spec.exemptions[1].match.knd: unknown key in an exemption" in message


def test_each_problem_is_listed_once_and_null_is_named_plainly(tmp_path: Path) -> None:
    path = write(tmp_path / ".poolgate.yaml", "spec:\n  require:\n    podSecurity: null\n")
    with pytest.raises(ConfigError) as caught:
        configfile.load(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == len(set(lines)), lines
    assert any(line.endswith("missing required key apiVersion, kind") for line in lines)
    assert any("podSecurity: expected one of" in line and "got null" in line for line in lines)
    assert not any("null null" in line for line in lines)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        (HEADER + "---\n" + HEADER, "more than one YAML document"),
        ("[1, 2]\n", "expected a GpuPoolGate mapping, got a list"),
        ("kind: GpuPoolGate\n", "(top level): missing required key apiVersion"),
        (HEADER.replace("GpuPoolGate", "Config"), 'kind: expected "GpuPoolGate"'),
        (HEADER + "spec: {skuLabel: [\n", "YAML does not parse"),
        (HEADER + "spec: {skuLabel: a, skuLabel: b}\n", "duplicate key 'skuLabel'"),
        (HEADER + "spec:\n  ruleDirs: [nope]\n", "spec.ruleDirs[0]: nope: no such directory"),
    ],
)
def test_bad_files_fail_with_one_clear_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / ".poolgate.yaml", text)
    with pytest.raises(ConfigError) as caught:
        configfile.load(path)
    assert expected in str(caught.value)
    assert str(caught.value).startswith(f"{path}:")  # not under the working directory


def test_unknown_rule_ids_are_listed_when_rules_load(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".poolgate.yaml",
        HEADER
        + "spec:\n  rules:\n    PG301: {level: warning}\n    PG999: {enabled: false}\n"
        + "  exemptions:\n    - {rule: ACME001, reason: x}\n",
    )
    config = configfile.load(path).config
    with pytest.raises(ConfigError) as caught:
        load_ruleset(ScanOptions(engine="cpp", config=config))
    message = str(caught.value)
    assert "2 config problems" in message
    assert ":6: spec.rules.PG999: unknown rule id PG999" in message
    assert ":8: spec.exemptions[0].rule: unknown rule id ACME001" in message
    assert "PG301" not in message


def test_rule_params_must_be_declared_and_of_the_defaults_type(tmp_path: Path) -> None:
    """Found in review: a misspelt parameter left the default in force unseen, and a
    string for PG603's minutes turned every evaluation into a rule error (exit 3)."""
    path = write(
        tmp_path / ".poolgate.yaml",
        HEADER
        + "spec:\n  rules:\n"
        + "    PG603: {params: {minute: 5}}\n"
        + "    PG604: {params: {minutes: ten}}\n"
        + "    PG301: {params: {strict: true}}\n",
    )
    config = configfile.load(path).config
    with pytest.raises(ConfigError) as caught:
        load_ruleset(ScanOptions(engine="cpp", config=config))
    message = str(caught.value)
    assert "3 config problems" in message
    assert (
        ":5: spec.rules.PG603.params.minute: PG603 has no parameter minute (it has: minutes)"
        in message
    )
    assert (
        ":6: spec.rules.PG604.params.minutes: string where the rule's default is int (30)"
        in message
    )
    assert (
        ":7: spec.rules.PG301.params.strict: PG301 has no parameter strict (it has: none)"
        in message
    )
    assert caught.value.hint == "`poolgate rules show ID` lists a rule's parameters"
    valid = write(
        tmp_path / "ok.yaml", HEADER + "spec:\n  rules:\n    PG603: {params: {minutes: 5}}\n"
    )
    options = ScanOptions(engine="cpp", config=configfile.load(valid).config, mode="audit")
    ruleset = load_ruleset(options)
    assert next(rule for rule in ruleset.rules if rule.id == "PG603").params == {"minutes": 5}


def test_a_whole_number_for_a_double_parameter_is_that_double(tmp_path: Path) -> None:
    """Found in review: `ratio: 1` for a default of 0.5 passed the config check and then
    failed every evaluation (CEL has no int * double)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME003-ratio.yaml").write_text(
        "id: ACME003\nname: ratio\nlevel: warning\nsummary: s.\ndescription: d.\n"
        "remediation: r.\nsubject: object\nmatch: {kinds: [ConfigMap]}\n"
        "params: {ratio: 0.5}\n"
        "validations:\n  - expression: double(size(object.data)) * params.ratio < 1.5\n"
        "    message: too much data\n"
    )
    config = write(
        tmp_path / ".poolgate.yaml",
        HEADER + "spec:\n  rules:\n    ACME003: {params: {ratio: 1}}\n",
    )
    options = ScanOptions(engine="cpp", config=configfile.load(config).config, rule_dirs=(rules,))
    ruleset = load_ruleset(options)
    rule = next(rule for rule in ruleset.rules if rule.id == "ACME003")
    assert rule.params == {"ratio": 1.0} and isinstance(rule.params["ratio"], float)
    manifest = write(
        tmp_path / "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b, c: d}\n",
    )
    report = scan_paths([str(manifest)], ruleset, repo_root=tmp_path)
    assert [(f.rule_id, f.outcome.value) for f in report.findings] == [("ACME003", "fail")]


# --- config init -----------------------------------------------------------------


def test_default_text_validates_and_equals_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / ".poolgate.yaml", template.default_text())
    loaded = configfile.load(path)
    assert loaded.warnings == ()
    assert loaded.config == replace(Config(), source=str(path))
    assert "# " in template.default_text()  # commented


def test_init_target_refuses_to_overwrite(tmp_path: Path) -> None:
    assert template.init_target(str(tmp_path), force=False) == tmp_path / ".poolgate.yaml"
    write(tmp_path / ".poolgate.yaml", HEADER)
    with pytest.raises(UsageError, match="already exists"):
        template.init_target(str(tmp_path), force=False)
    assert template.init_target(str(tmp_path), force=True) == tmp_path / ".poolgate.yaml"
    with pytest.raises(UsageError, match="no such directory"):
        template.init_target(str(tmp_path / "missing" / "c.yaml"), force=False)


def test_docs_example_is_valid_and_complete(tmp_path: Path) -> None:
    """docs/configuration.md's example loads with no warning (it names every key)."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    section = page[page.index("# Configuration") :]
    example = section[section.index("```yaml\n") + 8 : section.index("```\n", 10)]
    (tmp_path / "policy" / "rules").mkdir(parents=True)
    loaded = configfile.load(write(tmp_path / ".poolgate.yaml", example))
    assert loaded.warnings == ()
    spec_keys = set(validation.schema()["properties"]["spec"]["properties"])
    assert {
        line.split(":")[0].strip()
        for line in example.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    } >= spec_keys


def test_a_nul_in_a_config_string_becomes_a_replacement_character(
    tmp_path: Path,
) -> None:
    """As in manifests: cel-cpp ends a string at a NUL, so ``"gpu" in ["gpu\\0x"]`` is
    true in CEL and false in Python, and a guard deciding the condition in Python
    would disagree with CEL about it (found in review)."""
    path = write(
        tmp_path / ".poolgate.yaml",
        "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"
        'spec:\n  operatorNamespaces: ["gpu\\0x", "nvidia-gpu-operator"]\n',
    )
    config = configfile.load(path).config
    assert config.cel_view()["operatorNamespaces"] == ["gpu\ufffdx", "nvidia-gpu-operator"]


@pytest.mark.parametrize("entry", ["{outside}", "../outside", "escape"])
def test_rule_directories_must_stay_inside_the_repository(tmp_path: Path, entry: str) -> None:
    """The config comes from the pull request: its ruleDirs must not point the CI job
    at files elsewhere on the runner (found in review: a rule directory at / or a
    symlink out of the checkout was read, and rule errors printed what was there)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "rules").mkdir()
    (repo / "escape").symlink_to(outside)
    text = HEADER + f"spec:\n  ruleDirs: [rules, {entry.format(outside=outside)!r}]\n"
    path = write(repo / ".poolgate.yaml", text)
    with pytest.raises(ConfigError) as caught:
        configfile.load(path)
    message = str(caught.value)
    assert "spec.ruleDirs[1]" in message and "outside the repository" in message
    assert "spec.ruleDirs[0]" not in message


def test_paths_under_different_configs_are_warned_about(tmp_path: Path) -> None:
    """The config is the one found from the first path; a second path that another
    config governs (pre-commit passing two teams' files) would be judged by the
    first team's exemptions without a word (found in review)."""
    (tmp_path / ".git").mkdir()
    a = write(tmp_path / "teams" / "a" / ".poolgate.yaml", HEADER + "spec: {}\n")
    for name in ("teams/a/x.yaml", "teams/a/z.yaml", "teams/b/y.yaml", "teams/c/w.yaml"):
        write(tmp_path / name, "kind: ConfigMap\n")
    same = discovery.resolve([str(tmp_path / "teams/a/x.yaml"), str(tmp_path / "teams/a/z.yaml")])
    assert same.path == a and same.warnings == ()
    mixed = discovery.resolve(
        [str(tmp_path / name) for name in ("teams/a/x.yaml", "teams/b/y.yaml", "teams/c/w.yaml")]
    )
    assert mixed.path == a
    [warning] = mixed.warnings
    assert "fall under different configs (no file besides" in warning
    assert "applies to all of them; give --config" in warning


def test_sku_labels_replace_the_providers_defaults_and_sku_label_always_counts(
    tmp_path: Path,
) -> None:
    """Issue 24, item 6: PG104 accepts a selection on any SKU-bearing label."""
    defaults = Config().cel_view()["skuLabels"]
    assert defaults[0] == "sku"
    assert {"cloud.google.com/gke-accelerator", "nvidia.com/gpu.product"} <= set(defaults)
    path = write(
        tmp_path / ".poolgate.yaml",
        HEADER + "spec:\n  skuLabel: acme.io/gpu\n  skuLabels: [acme.io/model, acme.io/gpu]\n",
    )
    config = configfile.load(path).config
    assert config.sku_labels == ("acme.io/model", "acme.io/gpu")
    assert config.cel_view()["skuLabels"] == ["acme.io/gpu", "acme.io/model"]
    for bad, expected in (
        ("skuLabels: acme.io/model", "spec.skuLabels"),
        ("skuLabels: ['']", "spec.skuLabels[0]"),
        ("skuLabels: [a, a]", "spec.skuLabels"),
    ):
        path = write(tmp_path / "bad.yaml", HEADER + f"spec:\n  {bad}\n")
        with pytest.raises(ConfigError) as caught:
            configfile.load(path)
        assert expected in str(caught.value), str(caught.value)
