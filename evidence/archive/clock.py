"""Timestamps in the one format every bundle file uses: UTC ISO 8601 with milliseconds."""

from datetime import UTC, datetime


def iso(ts: float) -> str:
    """Format a Unix time as e.g. 2026-11-29T03:12:45.123Z."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def stamp(ts: float) -> str:
    """The compact form used in bundle directory names: 20261129T031245Z."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y%m%dT%H%M%SZ")
