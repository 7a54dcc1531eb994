"""Rules: load, validate and compile rule files; their docs, catalog, cache. (Rule
fixtures run the pipeline, so they live beside it: ``scanner.pipeline.fixtures``.)"""
