"""The resident recorder (`evidence record`): the last hours of host, GPU and engine
readings in a fixed-size ring, handed to every capture, and captures of its own when the
box starts to fail.

It runs the collector's own probes (evidence.capture.probes), each at its own pace; the
collector never imports this package.
"""
