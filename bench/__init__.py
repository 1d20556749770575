"""Benchmarks for errkb (issue 6): a 150k-record corpus, generated logs and one runner.

``bench.corpus`` builds the records (real ones extracted from Python sources, topped up with
deterministic variants), ``bench.logs`` writes logs with known errors planted in them and the
ground truth beside them, and ``bench.run`` measures everything in one command::

    python -m bench.run                 # 150,000 records, a 50 MB log
    python -m bench.run --quick         # a few thousand records, a few MB: under a minute

Everything is generated under ``bench/out/`` (git-ignored) and reused when the seed and sizes
are the same.
"""
