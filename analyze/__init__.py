"""The analyst: ingests bundles into DuckDB and reasons over them offline.

Invariant: reads bundles, never writes to them; may import schemas/, never capture/.
"""
