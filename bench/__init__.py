"""Benchmarks: each ``bench/*_bench.py`` module has a ``main()``; ``python -m bench`` runs them."""
