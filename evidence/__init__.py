"""evidence: flight recorder and incident analyst for local AI services.

Layers, bottom up (tests/test_layers.py fails when one is crossed):
- evidence.archive: the archive's layout, locks, clock and references; standard library only.
- evidence.schemas: the bundle contract and the catalogs, as data.
- evidence.capture (the collector) and evidence.analyze (the analyst): each imports only
  the two above, never the other.
- evidence.record (the resident recorder): runs the collector's probes, so it imports
  evidence.capture besides the bottom two; nothing but the command line imports it.
- evidence.reports: the renderers; imports nothing of ours.
- evidence.cli: the one command group; the only place that imports everything, and it
  loads the analyst and the renderers inside the commands that use them.
"""

__version__ = "0.2.0"
