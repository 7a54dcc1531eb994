"""A pull request that writes YAML into the PolicyReports a platform team applies.

``poolgate scan --format policyreport`` output is made to be applied with
``kubectl apply --server-side -f``. Its strings come from the pull request: object
names, namespaces, image names quoted in messages, file names. An author who could
end a report document inside one of them (a line ``---`` and an object of their own)
would have a ClusterRoleBinding applied with the platform team's credentials. Every
string is a quoted scalar of the report it belongs to: the stream holds poolgate's
reports and nothing else, and each string reads back exactly as it was written.
"""

from __future__ import annotations

from pathlib import Path

import cli_run
import policyreport_crd
import yaml

INJECTED = (
    "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
    "metadata: {name: pwn}\nroleRef: {kind: ClusterRole, name: cluster-admin}\n"
    "subjects: [{kind: User, name: attacker}]\n# "
)


def test_strings_from_a_pull_request_cannot_add_objects_to_the_stream(tmp_path: Path) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": INJECTED, "namespace": "team-a"},
        "spec": {
            "containers": [
                {
                    "name": INJECTED,
                    "image": f"evil/{INJECTED}",
                    "securityContext": {"privileged": True},
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        },
    }
    namespaced = dict(pod, metadata={"name": "other", "namespace": INJECTED})
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump_all([pod, namespaced]), encoding="utf-8")
    result = cli_run.poolgate("scan", ".", "--format", "policyreport", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    objects = policyreport_crd.load_stream(result.stdout)
    assert {o["kind"] for o in objects} == {"PolicyReport", "ClusterPolicyReport"}
    assert all(o["apiVersion"] == "wgpolicyk8s.io/v1alpha2" for o in objects)
    # Not a name a namespace can have: its results are in the cluster's report.
    assert [o["metadata"].get("namespace") for o in objects] == [None, "team-a"]
    resources = [r["resources"][0] for o in objects for r in o["results"]]
    assert {"name": INJECTED, "namespace": "team-a"}.items() <= resources[-1].items()
    assert any(r.get("namespace") == INJECTED for r in resources)
    # Messages hold the names too, on one line (the engine escapes line breaks).
    assert any("ClusterRoleBinding" in r["message"] for o in objects for r in o["results"])
