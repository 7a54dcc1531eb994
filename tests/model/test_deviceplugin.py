"""Device-plugin sharing configs: which resource names the plugin accepts and advertises."""

from __future__ import annotations

import pytest

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.deviceplugin import _looks_like_config, known_resource, parse_entry
from scanner.sources.yaml.document import parse_plain


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
    entry = parse_entry("k", text, "data", 7, parse_plain)
    plus, other = entry["resources"]
    assert (plus["known"], plus["advertisedAs"]) == (False, "nvidia.com/mig-1g.10gb.me")
    assert (other["known"], other["advertisedAs"]) == (False, "")


def _config_map(value: str) -> KubeObject:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"k": value},
    }
    return KubeObject(body, Origin("c.yaml"), LineMap({}))


@pytest.mark.parametrize(
    ("value", "config"),
    [
        ("version: v1\nsharing:\n  timeSlicing:\n    resources: []\n", True),
        ('{"sharing": {"mps": {"resources": []}}}', True),  # JSON, no version
        ("flags:\n  migStrategy: mixed\n", True),
        ("version: v1\nsharing: [unclosed\n", True),  # does not parse: PG205 reports it
        ("sharing: {timeSlicing: 2}\n", True),  # malformed, PG205's to report
        # Found in review: escapes spell keys the text does not (YAML and JSON alike).
        ('sharing:\n  "time\\u0053licing": {resources: []}\n', True),
        ('{"flags": {"mig\\u0053trategy": "mixed"}}', True),
        ('sharing:\n  "time\\x53licing": {resources: []}\n', True),
        ('sharing:\n  ? "time\\\n    Slicing"\n  : {resources: []}\n', True),  # escaped line break
        # A dashboard full of escapes that spell nothing of the plugin's is not parsed.
        ('{"panels": [{"expr": "rate(x{job=\\"a\\"}[5m])", "flags": "\\u00e9"}]}', False),
        # An application's config that only mentions the words is not composed, and
        # one that spells a sharing mode or a flag outside those places is not one.
        ("server:\n  port: 8080\n# tuning knob: feature_flags = 5\n", False),
        ("flags:\n  darkMode: true\n", False),  # a feature-flag service's
        ("notes: mps and timeSlicing and sharing\n", False),
    ],
)
def test_which_config_map_values_are_device_plugin_configs(value: str, config: bool) -> None:
    assert _looks_like_config(_config_map(value), parse_plain) is config
