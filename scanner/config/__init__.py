"""Configuration: ``.poolgate.yaml`` values, the file, where the policy comes from."""
