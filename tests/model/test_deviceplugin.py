"""Device-plugin sharing configs: which resource names the plugin accepts and advertises."""

from __future__ import annotations

import pytest

from scanner.model.deviceplugin import known_resource, parse_entry


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("nvidia.com/gpu", True),
        ("gpu", True),  # the plugin puts nvidia.com/ before a bare name
        ("nvidia.com/mig-1g.10gb", True),
        ("mig-3g.40gb", True),
        # go-nvlib's attributes, "+" written "." as the plugin advertises them
        ("nvidia.com/mig-1g.10gb.me", True),
        ("nvidia.com/mig-1g.24gb.gfx", True),
        ("nvidia.com/mig-2g.48gb.me.all", True),
        ("nvidia.com/mig-1g.24gb-me", True),
        # the plugin's parser refuses "+" (not a DNS subdomain)
        ("nvidia.com/mig-1g.10gb+me", False),
        # compute-instance profiles are not advertised under the mixed strategy
        ("nvidia.com/mig-1c.2g.10gb", False),
        ("nvidia.com/mig-1g.10GB", False),
        ("nvidia.com/mig-1g.10gb.foo", False),
        ("nvidia.com/gpus", False),
        ("nvidia.com/gpu.shared", False),
        ("amd.com/gpu", False),
        ("", False),
    ],
)
def test_known_resource(name: str, known: bool) -> None:
    assert known_resource(name) is known


def test_a_plus_spelling_names_the_advertised_profile() -> None:
    text = (
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - {name: nvidia.com/mig-1g.10gb+me, replicas: 2}\n"
        "    - {name: nvidia.com/gpux, replicas: 2}\n"
    )
    entry = parse_entry("k", text, "data", 7)
    plus, other = entry["resources"]
    assert (plus["known"], plus["advertisedAs"]) == (False, "nvidia.com/mig-1g.10gb.me")
    assert (other["known"], other["advertisedAs"]) == (False, "")
