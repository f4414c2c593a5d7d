"""The benchmark: a deterministic generator of a realistic transcript corpus, and a runner that times the ETL.

`bench/generate.py` and `bench/run.py` are the commands (see bench/README.md); the other modules are their parts.
Nothing here is imported by the pipeline.
"""
