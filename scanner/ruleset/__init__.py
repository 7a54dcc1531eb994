"""Rules: load, validate and compile rule files; their docs, catalog, fixtures, cache."""
