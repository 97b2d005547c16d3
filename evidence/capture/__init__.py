"""The collector: freezes a bounded, read-only evidence bundle of this machine.

Invariant: nothing under evidence/capture/ imports duckdb or jinja2; it runs on a box under
memory pressure, where every megabyte and every millisecond counts.
"""
