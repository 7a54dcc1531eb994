"""The nightly audit: what to read from a cluster, reading it, what could not be seen."""
