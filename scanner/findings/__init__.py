"""Findings: the records every reporter reads, suppressions, baselines, drift."""
