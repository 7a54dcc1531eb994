"""Configuration: ``.poolgate.yaml`` values, which file applies (discovery), reading and
validating it, the default file ``config init`` writes, and where the policy comes from."""
