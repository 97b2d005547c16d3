"""The rule for orphaned-result: "The watcher went away; the work succeeded"."""

from evidence.analyze.facts import Facts
from evidence.analyze.rules.judgement import Judgement, rule


@rule("orphaned-result")
def orphaned_result(f: Facts) -> Judgement:
    j = Judgement()
    if not f.jobs:
        j.missing.append("an engine's job history (ComfyUI /history)")
        return j
    done = [x for x in f.jobs if x["completed"] and x["outputs"] not in (None, "[]", [])]
    started = f.bundle["started_at"]
    recent = [
        x for x in done if x["ended_at"] and 0 <= (started - x["ended_at"]).total_seconds() <= 3600
    ]
    watcher_gave_up = f.bundle["trigger_kind"] in ("healthcheck", "alert", "systemd")
    if recent and watcher_gave_up:
        j.add(
            3,
            f"the engine's history says job {recent[-1]['job_id']} completed with outputs "
            f"while the capture was triggered as a failure "
            f"({f.bundle['trigger_kind']}:{f.bundle['trigger_name']})",
        )
    elif recent:
        j.add(1, f"job {recent[-1]['job_id']} completed with outputs shortly before")
    failed = [x for x in f.jobs if x["status"] == "error"]
    if failed and not recent:
        j.evidence_against.append(f"the history shows job {failed[-1]['job_id']} failed")
    return j
