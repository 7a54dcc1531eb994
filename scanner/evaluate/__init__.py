"""Evaluation: rules over subjects, and the optimisations proven equal to it."""
