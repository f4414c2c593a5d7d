"""The corpus for notebooks and scripts, on polars: `open_corpus()` gives every table as a `LazyFrame` over one Parquet
snapshot, the common views where polars says them well, and `to_duckdb()` for the rest.

    from transcripts import open_corpus
    corpus = open_corpus()                       # the data dir `transcripts data where` prints, or give one
    corpus.turns.filter(pl.col("role") == "user").collect()

The package sits on top of the four (it reads what `sinks/` wrote and finds the data dir as `flows/etl/settings`
does); nothing of the pipeline imports it. See docs/mcp.md ("The Python API") for the recipes.
"""

from __future__ import annotations

from transcripts.corpus import Corpus, NoCorpus, open_corpus

__all__ = ["Corpus", "NoCorpus", "open_corpus"]
