"""A GPU workload of a kind poolgate does not model cannot pass silently (issue 24, item 5).

A pull request author who wraps GPU pods in a CRD poolgate does not know (an Argo
Workflow, a Kubeflow TrainJob, an in-house kind), or buries them deep or late in a huge
object, gets a warning notification naming the kind and the path, and the exit code
stays what the findings make it. The search of such objects is bounded: a huge object
is reported as not searched, in a run that still ends.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import poolgate

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "unmodelled"


def _scan(path: Path, cwd: Path) -> tuple[int, list[dict[str, object]]]:
    """Exit code and notifications of a scan that finds nothing else."""
    result = poolgate("scan", str(path), "--format", "json", cwd=cwd, timeout=300)
    document = json.loads(result.stdout)
    assert document["findings"] == [], document["findings"]
    return result.returncode, document["notifications"]


def test_gpu_workloads_of_unmodelled_kinds_are_warned_about_and_the_exit_code_stays(
    tmp_path: Path,
) -> None:
    target = tmp_path / "gpu-workloads.yaml"
    target.write_text((FIXTURES / "gpu-workloads.yaml").read_text())
    code, notes = _scan(target, tmp_path)
    assert code == 0
    messages = [str(note["message"]) for note in notes]
    assert all(note["level"] == "warning" for note in notes)
    assert [m.split(" (")[0] for m in messages] == [
        "GPU workload not checked: Workflow finetune",
        "GPU workload not checked: TrainJob multi-node",
        "GPU workload not checked: SeldonDeployment llm",
        "GPU workload not checked: InferenceJob amd-and-dra",
    ]


def test_not_workloads_stay_quiet(tmp_path: Path) -> None:
    target = tmp_path / "not-workloads.yaml"
    target.write_text((FIXTURES / "not-workloads.yaml").read_text())
    result = poolgate("scan", str(target), "--format", "json", cwd=tmp_path)
    document = json.loads(result.stdout)
    assert document["notifications"] == []
    # The NodePool is judged as a pool (untainted, no SKU label), not as a workload.
    assert {f["ruleId"] for f in document["findings"]} == {"PG101", "PG102"}
    assert result.returncode == 1


def test_a_gpu_container_buried_in_a_huge_object_is_not_passed_as_clean(tmp_path: Path) -> None:
    filler = "\n".join(f"    - {{k{index}: [1]}}" for index in range(30_000))
    target = tmp_path / "huge.yaml"
    target.write_text(
        "apiVersion: example.com/v1\nkind: Batch\nmetadata:\n  name: huge\n  namespace: ml\n"
        f"spec:\n  filler:\n{filler}\n  worker:\n    name: w\n    resources:\n"
        "      limits:\n        nvidia.com/gpu: 8\n"
    )
    code, notes = _scan(target, tmp_path)
    assert code == 0
    [note] = notes
    assert str(note["message"]).startswith(
        "Batch huge (example.com/v1) was not searched for pods and GPU requests to its end"
    )
