"""`make eval`: the classifier on hundreds of generated histories.

generate.py makes a Scenario (a day of a deployment as its exporters would have recorded
it, with or without an injected fault); promql.py answers the collector's queries over
it as Prometheus would; harness.py writes each scenario as a bundle, ingests and
classifies it, runs the seed's diagnose-oom.py on the same history, and prints the
confusion matrix.
"""
