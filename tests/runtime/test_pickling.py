"""What crosses between processes (a forked evaluation's findings, a helper's
workloads and answers: scanner/runtime/executors.py, scanner/evaluate/shipping.py) is pickled by its
fields (``__reduce__``). A field added to one of these classes without being added to
its ``__reduce__`` would come back as its default, or not at all: every field here
is set to a value unlike its default, and must survive the round trip."""

from __future__ import annotations

import pickle
from dataclasses import fields
from typing import Any

import pytest

from scanner.findings.records import Finding, Level, Location, Outcome, Related, Suppression
from scanner.inventory import LineMap, ObjectRef, Origin

REF = ObjectRef("apps/v1", "Deployment", "team-a", "trainer")
LOCATION = Location("cluster://prod/team-a/Deployment/trainer", 7, 3, "spec.template.spec")
ORIGIN = Origin("k8s/train.yaml", 2, 14, 5, "cluster", "charts/train (rendered)")
SAMPLES: list[Any] = [
    REF,
    LOCATION,
    ORIGIN,
    LineMap({"spec": (3, 1), "spec.replicas": (4, 3)}, "items[2]", {12: 9}),
    Related(LOCATION, "does not drop ALL capabilities"),
    Finding(
        "PG201",
        Level.WARNING,
        "pool a100 shares GPUs",
        LOCATION,
        REF,
        "cluster",
        Outcome.ERROR,
        Suppression("external", "accepted until the MIG pool exists"),
        ORIGIN,
        (Related(LOCATION, "uses hostPort 80"),),
    ),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: type(sample).__name__)
def test_every_field_survives_pickling(sample: Any) -> None:
    for described in fields(sample):
        assert getattr(sample, described.name) != described.default, described.name
    copy = pickle.loads(pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(copy) is type(sample)
    for described in fields(sample):
        assert getattr(copy, described.name) == getattr(sample, described.name)
    assert copy == sample
    _, arguments = sample.__reduce__()
    assert len(arguments) == len(fields(sample))


def test_shared_parts_stay_shared() -> None:
    """Findings on one object share its reference: pickled once, one object again."""
    second = Finding("PG101", Level.ERROR, "no taint", LOCATION, REF)
    first, again = pickle.loads(pickle.dumps([SAMPLES[-1], second]))
    assert first.ref is again.ref
    assert first.location is again.location
