"""The verdict goes back where the alert came from: one alert, EvidenceVerdict, posted to
Alertmanager's v2 API (POST /api/v2/alerts) once an incident is classified.

Its labels are host, fault and bundle, on top of the labels every alert that triggered
the capture shared (severity, instance, team...): Alertmanager routes on labels, so the
verdict reaches the same receivers as the alert that started it. The same bundle always
posts the same labels, so classifying it twice is the same alert to Alertmanager, not a
second page. No endsAt: Alertmanager resolves it after its resolve_timeout, as it does
for any alert that is not sent again.

Invariants: only a failure-triggered capture, or a baseline whose verdict names a fault,
posts (a quiet baseline is not news); labels and annotations pass capture.redact's
scrubbing upstream (the bundle holds nothing unredacted); one bounded request, and a
failure is one line for the caller, never an exception past post().
"""

import urllib.error
import urllib.request
from typing import Any

import orjson

from evidence.analyze.incident import NOT_FAULTS, Incident

ALERTNAME = "EvidenceVerdict"
PATH = "/api/v2/alerts"
TIMEOUT_S = 5.0
OURS = ("alertname", "host", "fault", "bundle")


class NotifyError(Exception):
    """The alert did not reach Alertmanager; the message says why, in one line."""


def worth_posting(incident: Incident) -> bool:
    return not incident.routine or incident.verdict not in NOT_FAULTS


def _shared_labels(alerts: list[dict[str, Any]]) -> dict[str, str]:
    """The labels every triggering alert had with the same value."""
    if not alerts:
        return {}
    shared = dict(alerts[0].get("labels", {}))
    for alert in alerts[1:]:
        labels = alert.get("labels", {})
        shared = {k: v for k, v in shared.items() if labels.get(k) == v}
    return {k: v for k, v in shared.items() if k not in OURS}


def verdict_alert(incident: Incident, manifest: dict[str, Any], report: str) -> dict[str, Any]:
    """The postable alert (Alertmanager's v2 `postableAlert`) for one classified bundle."""
    labels = {
        **_shared_labels(manifest.get("trigger", {}).get("alerts") or []),
        "alertname": ALERTNAME,
        "host": incident.host,
        "fault": incident.verdict,
        "bundle": incident.bundle_id,
    }
    return {
        "labels": labels,
        "annotations": {
            "summary": f"evidence: {incident.verdict} on {incident.host}",
            "description": _description(incident),
            "report": report,
        },
        "startsAt": incident.started_at.isoformat().replace("+00:00", "Z"),
    }


def _description(incident: Incident) -> str:
    """The verdict's first reason and the failure, as the report's first lines say them."""
    said = [f"trigger {incident.trigger}"]
    failure = incident.result["context"].get("failure")
    if failure:
        said.append(f"failure: {failure}")
    for candidate in incident.result["candidates"]:
        if candidate["fault"] == incident.verdict and candidate["evidence_for"]:
            said.insert(0, f"{candidate['title']}: {candidate['evidence_for'][0]}")
    return "; ".join(said)


def post(url: str, alert: dict[str, Any], timeout_s: float = TIMEOUT_S) -> None:
    """POST one alert to the Alertmanager at `url` (its base URL); NotifyError if refused."""
    target = url.rstrip("/") + PATH
    request = urllib.request.Request(
        target,
        data=orjson.dumps([alert]),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        said = exc.read(300).decode("utf-8", "replace").strip()
        raise NotifyError(f"Alertmanager at {url} refused the verdict: {exc.code} {said}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NotifyError(f"Alertmanager at {url} did not take the verdict: {reason}") from None
