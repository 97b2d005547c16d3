"""The bottom layer: what the collector and the analyst both know about an archive.

Its layout and root, its locks, the clock format of every bundle file, and the references
that keep bundles from pruning. Standard library only: the collector imports it on a box
under memory pressure, and the analyst without the collector.
"""
