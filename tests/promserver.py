"""A real Prometheus for the tests (lab/promserver.py), skipped where it is not installed."""

from conftest import need

from lab.promserver import Prometheus, missing

__all__ = ["Prometheus", "require"]


def require() -> None:
    reason = missing()
    need(reason is None, reason or "")
