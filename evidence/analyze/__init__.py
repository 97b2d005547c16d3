"""The analyst: ingests bundles into DuckDB and reasons over them offline.

Invariant: reads bundles, never writes to them; imports evidence.archive and
evidence.schemas, never the collector (tests/test_layers.py).
"""
