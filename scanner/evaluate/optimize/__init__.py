"""Speed-ups of the evaluation, each a transform proven equal to the plain path."""
