"""Scenarios in, confusion matrix out: each scenario rendered as the bundles the collector
would have written (lab/builder.py, so the records are the collector's formats), all
ingested into one archive, each incident classified in process, and the seed's
diagnose-oom.py asked about the same history through a fake Prometheus.

The harness reads a scenario's evidence only; `truth`, `strength` and `story` go to the
report, never into a bundle.
"""

import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from evidence.analyze.classify import classify
from evidence.analyze.ingest import connect, ingest
from evidence.archive.clock import iso
from evidence.capture.probes.prometheus import QUERIES, step_for
from lab.builder import Builder, engine
from lab.core import EVIDENCE
from lab.eval import peer as seed
from lab.eval.promql import FakePrometheus, Store, openmetrics
from lab.eval.world import TRUTHS, EngineAtCapture, ProcessAtCapture, Scenario
from lab.promserver import Prometheus, missing

DAY_S = 86400
# Where every generated day ends: fixed, so that a seed alone repeats a run exactly (each
# deployment's time zone still puts the capture at its own hour of the day).
SUITE_END = datetime(2026, 11, 29, 3, 12, tzinfo=UTC).timestamp()
# What the prometheus probe says on a box with nothing on its default port.
NO_PROMETHEUS = (
    "Prometheus at http://127.0.0.1:9090 (no [prometheus] configured; tried the default): "
    "nothing is listening (connection refused)"
)
NOT_FAULTS = ("no-fault", "ambiguous", "insufficient-evidence")
INDEX = "rows.json"  # what evaluate leaves beside its archives, for rejudge
UPTIME_S = 30 * DAY_S  # the box booted well before its first baseline
ACCURACY_BAR = 0.95  # issue 12: right on at least 95 % of the generated histories
BARS = (
    f"at least {ACCURACY_BAR * 100:.0f} % right, no healthy box called a fault, no failed one "
    "called no-fault"
)
Progress = Callable[[str], None]
CORNER = "truth \\ verdict"


@dataclass
class Row:
    id: str
    truth: str
    strength: float
    deployment: str
    engine: str
    ours: str  # our verdict
    our_score: float  # our top candidate's score
    peer: str | None  # the seed's verdict (None: not asked)
    peer_score: int | None
    story: str
    top: list[tuple[str, float]] = field(default_factory=list)  # our top three candidates


def _rows(processes: Iterable[ProcessAtCapture], boot: float) -> list[dict[str, Any]]:
    """The process rows as the collector writes them, started at boot where the day does
    not say otherwise: the same process keeps its start time from bundle to bundle."""
    return [
        {
            "pid": p.pid,
            "ppid": p.ppid,
            "name": p.name,
            "cmdline": p.cmdline,
            "rss_bytes": p.rss_bytes,
            "start_time": iso(boot if p.started is None else p.started),
        }
        for p in processes
    ]


def _engine(e: EngineAtCapture) -> dict[str, Any]:
    """The engines probe's record of one engine, as its reader would have written it."""
    if not e.answering:
        reason = e.reason or "no answer"
        # The status the collector's HTTP client gives each way of not answering.
        status = (
            "absent"
            if "refused" in reason
            else "timeout"
            if re.search(r"timed? ?out|no answer within", reason)
            else "error"
        )
        return engine(e.name, e.kind, status=status, reason=reason, url=e.url)
    readings: dict[str, Any] = {}
    if e.kind == "llama-swap":  # /running: what the manager believes is loaded
        models = [
            {"model": m, "state": "ready", "ttl": None, "proxy": None, "cmd": None, "name": None}
            for m in e.loaded
        ]
        readings["/running"] = {"models": models, "loaded": list(e.loaded)}
    elif e.kind == "ollama":  # /api/ps: the models resident
        models = [{"name": m, "size": None, "size_vram": None} for m in e.loaded]
        readings["/api/ps"] = {
            "models": models,
            "loaded": list(e.loaded),
            "size_total": None,
            "size_vram_total": None,
        }
    elif e.loaded:
        readings["/v1/models"] = {"models": [{"id": m, "max_model_len": None} for m in e.loaded]}
    return engine(e.name, e.kind, e.metrics or None, readings, url=e.url)


def _gpu(b: Builder, s: Scenario, used: int | None, processes: list[ProcessAtCapture]) -> None:
    """The gpu probe's record, as NVML read it at that moment: the card's memory where it
    is a discrete card, the processes holding some either way; absent without NVML."""
    on_gpu = [p for p in processes if p.gpu_bytes is not None]
    if not on_gpu and used is None:
        b.absent("gpu", "no NVML")
        return
    b.gpu(
        name="NVIDIA GB10" if s.unified else "NVIDIA RTX PRO 6000",
        total=s.card_total if used is not None else None,
        used=used,
        processes=[(p.pid, p.name, p.gpu_bytes) for p in on_gpu],
        unified=s.unified,
    )


def history(s: Scenario, store: Store | None = None) -> tuple[list[dict[str, Any]], float, int]:
    """The prometheus probe's queries (exactly its list) answered over the day before the
    capture at its step: (entries in its record format, start, step)."""
    store = store or Store(s.series)
    start, step = s.end - DAY_S, step_for(DAY_S)
    entries = []
    for name, expr in QUERIES:
        series = store.query_range(expr, start, s.end, step)
        entry: dict[str, Any] = {"name": name, "expr": expr, "series": series}
        if series:
            entries.append({**entry, "status": "ok", "reason": None, "warnings": []})
        else:
            reason = "no series: nothing publishes this here"
            entries.append({**entry, "status": "absent", "reason": reason})
    return entries, start, step


def bundle(s: Scenario, archive: Path) -> list[Path]:
    """Write the scenario as its bundles: the cron baselines of the host, oldest first, then
    the incident (the last path)."""
    boot = min([s.end - UPTIME_S, *(b[0] - DAY_S for b in s.baselines)])
    boot_id = f"{s.hostname}-boot"
    written = []
    for t, _used, available, processes, card in sorted(s.baselines, key=lambda b: b[0]):
        b = Builder(
            s.hostname,
            t,
            total=s.memory_total,
            boot_id=boot_id,
            uptime_s=t - boot,
            trigger=("cron", "baseline"),
            window_s=0.0,
        )
        b.memory([(t, s.memory_total - available)], swap_total=s.swap_total)
        _gpu(b.host().processes(_rows(processes, boot)), s, card, processes)
        written.append(b.write(archive))
    b = Builder(
        s.hostname,
        s.end,
        total=s.memory_total,
        boot_id=boot_id,
        uptime_s=s.end - boot,
        trigger=s.trigger,
    )
    b.host()
    if s.window:
        b.memory(
            [(t, s.memory_total - available) for t, _used, available, _swap in s.window],
            swap_total=s.swap_total,
            swaps=[swap for *_, swap in s.window],
        )
        times = [w[0] for w in s.window]
        b.pressure([(t, s.psi_some) for t in times], [(t, s.psi_full) for t in times])
    b.processes(_rows(s.processes, boot))
    _gpu(b, s, s.card_used, s.processes)
    if s.engines:
        b.engines([_engine(e) for e in s.engines])
    if s.checks:
        b.checks(
            [
                {"name": c.name, "kind": c.kind, "ok": c.ok, "status": c.status}
                | {"reason": c.reason, "answer": {}}
                for c in s.checks
            ]
        )
    kernel = sorted(s.kernel)
    b.kernel([text for _, text in kernel], times=[t for t, _ in kernel])
    if s.logs:
        name = s.engines[0].name if s.engines else "engine"
        b.logs([text for _, text in sorted(s.logs)], name=name)
    if s.prometheus:
        entries, start, step = history(s)
        b.history(entries, start, step)
    else:
        b.absent("prometheus", NO_PROMETHEUS)
    return [*written, b.write(archive)]


def _bundle_id(path: Path) -> str:
    return orjson.loads((path / "manifest.json").read_bytes())["bundle_id"]


def _ours(result: dict[str, Any]) -> tuple[str, float, list[tuple[str, float]]]:
    top = [(c["fault"], c["score"]) for c in result["candidates"][:3]]
    return result["verdict"], (top[0][1] if top else 0), top


def _peers(
    scenarios: list[Scenario], work: Path, jobs: int, progress: Progress | None
) -> dict[str, tuple[str, int]]:
    """The seed's answer for each scenario, `jobs` scripts at a time, through one fake
    Prometheus; a scenario without Prometheus is a URL with nothing behind it. Paths and
    URLs are named by position: a scenario's id holds its truth."""
    script = seed.seed_script(work)
    done: list[str] = []

    def one(i: int, s: Scenario) -> tuple[str, int]:
        key = f"s{i}"
        if s.prometheus:
            # Its clock's "now" is the capture: shifted at the start, so a few seconds late.
            url = server.add(key, s.series, shift=s.end - time.time())
        else:
            url = f"{server.url}/s/none"
        try:
            return seed.verdict(script, url, work / key)
        finally:
            server.remove(key)
            done.append(key)
            if progress and len(done) % 25 == 0:
                progress(f"peer: {len(done)} of {len(scenarios)}")

    with FakePrometheus() as server, ThreadPoolExecutor(max_workers=jobs) as pool:
        answers = pool.map(one, range(len(scenarios)), scenarios)
        return dict(zip((s.id for s in scenarios), answers, strict=True))


def evaluate(
    scenarios: list[Scenario],
    workdir: Path,
    peer: bool = True,
    jobs: int = 2,
    progress: Progress | None = None,
    timing: dict[str, float] | None = None,
) -> list[Row]:
    """Every scenario written into one archive, ingested at once and classified in process;
    the seed run on the same histories beside (unless peer is False). `timing`, if given,
    receives the seconds spent rendering, ingesting, classifying and waiting for peers.

    A host's bundles are its history, so two scenarios of the same hostname never share an
    archive (the second goes to archive-2, and so on): neither is read as the other's past.
    """
    if len({s.id for s in scenarios}) < len(scenarios):
        raise ValueError("scenario ids repeat: the rows could not be told apart")
    clock = timing if timing is not None else {}
    (workdir / "peer").mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=1) as background:
        # The peers are subprocesses: they run while this process renders and classifies.
        peers = (
            background.submit(_peers, scenarios, workdir / "peer", jobs, progress) if peer else None
        )
        start = time.monotonic()
        seen: Counter[str] = Counter()
        archives: dict[Path, dict[str, str]] = {}  # archive -> scenario id -> its incident
        for i, s in enumerate(scenarios):
            seen[s.hostname] += 1
            n = seen[s.hostname]
            archive = workdir / ("archive" if n == 1 else f"archive-{n}")
            archives.setdefault(archive, {})[s.id] = _bundle_id(bundle(s, archive)[-1])
            if progress and (i + 1) % 50 == 0:
                progress(f"rendered {i + 1} of {len(scenarios)}")
        clock["render_s"] = time.monotonic() - start
        clock["ingest_s"] = 0.0
        for archive in archives:
            start = time.monotonic()
            summary = ingest(archive)
            clock["ingest_s"] += time.monotonic() - start
            if summary.quarantined:
                raise RuntimeError(f"the harness wrote broken bundles: {summary.line()}")
        ours = _classify_all(archives, clock)
        start = time.monotonic()
        answers = peers.result() if peers else {}
        clock["peer_wait_s"] = time.monotonic() - start
    rows = [_row(s, ours[s.id], answers.get(s.id, (None, None))) for s in scenarios]
    where = {key: (a.name, b) for a, incidents in archives.items() for key, b in incidents.items()}
    (workdir / INDEX).write_bytes(
        orjson.dumps([{**asdict(r), "archive": where[r.id][0], "bundle": where[r.id][1]}
                      for r in rows])
    )  # fmt: skip
    return rows


def rejudge(workdir: Path, progress: Progress | None = None) -> list[Row]:
    """The scenarios an earlier `evaluate` left in `workdir` (python -m lab.eval --keep),
    classified again by the analyst as it is now, without rendering or ingesting them anew:
    a rule change measured in a minute. The peer's answers are kept as they were."""
    try:
        index = orjson.loads((workdir / INDEX).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"no evaluation to rejudge in {workdir}: {exc}") from exc
    archives: dict[Path, dict[str, str]] = {}
    for r in index:
        archives.setdefault(workdir / r.pop("archive"), {})[r["id"]] = r.pop("bundle")
    ours = _classify_all(archives, {}, progress)
    rows = []
    for r in index:
        r["ours"], r["our_score"], r["top"] = ours[r["id"]]
        rows.append(Row(**r))
    return rows


def _classify_all(
    archives: dict[Path, dict[str, str]], clock: dict[str, float], progress: Progress | None = None
) -> dict[str, tuple[str, float, list[tuple[str, float]]]]:
    """Each archive's incidents classified: scenario id -> our verdict, score, top three."""
    clock["classify_s"] = 0.0
    ours = {}
    for i, (archive, incidents) in enumerate(archives.items()):
        start = time.monotonic()
        con = connect(archive, read_only=True)
        try:
            for key, bundle_id in incidents.items():
                ours[key] = _ours(classify(con, bundle_id))
        finally:
            con.close()
        clock["classify_s"] += time.monotonic() - start
        if progress and (i + 1) % 50 == 0:
            progress(f"classified {i + 1} of {len(archives)} archives")
    return ours


def _row(
    s: Scenario,
    ours: tuple[str, float, list[tuple[str, float]]],
    theirs: tuple[str | None, float | None],
) -> Row:
    verdict, score, top = ours
    return Row(
        s.id, s.truth, s.strength, s.deployment, s.engine, verdict, score,
        theirs[0], theirs[1], s.story, top,
    )  # fmt: skip


def real(
    scenarios: list[Scenario], workdir: Path, progress: Progress | None = None
) -> list[Row] | str:
    """A handful of scenarios through the real path: each one's history backfilled into a
    real Prometheus (shifted so its end is a minute ago), the real `evidence capture`
    against it, `evidence classify latest`, and the seed on the same server. The capture
    reads this machine for everything but the history. Returns why not, where it cannot."""
    why = missing()
    if why:
        return why
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        script = seed.seed_script(workdir)
    except FileNotFoundError as exc:
        return str(exc)
    rows = []
    for i, s in enumerate(scenarios):
        place = workdir / f"s{i}"  # not the id: the config's path is in the bundle
        place.mkdir(parents=True)
        if progress:
            progress(f"real Prometheus: {s.id}")
        server = Prometheus(place, openmetrics(s.series, shift=time.time() - 60 - s.end))
        try:
            config = place / "c.toml"
            config.write_text(
                f'[prometheus]\nurl = "{server.url}"\nlookback = "24h"\n'
                # The scenario is the Prometheus history; this machine's own kernel log
                # (where the fault lab kills processes on purpose) is not part of it.
                '[capture]\nkernel_lookback = "1s"\nkernel_tail = 0\n'
            )
            archive = place / "archive"
            kind, name, detail = s.trigger
            trigger = f"{kind}:{name}" if name else kind
            described = ["--detail", detail] if detail else []
            _evidence(
                "capture", "--window", "0", "--trigger", trigger, *described,
                "--quiet", "--archive", str(archive), "--config", str(config),
            )  # fmt: skip
            result = orjson.loads(
                _evidence("classify", "latest", "--archive", str(archive), "--json")
            )
            theirs = seed.verdict(script, server.url, place)
        finally:
            server.close()
        rows.append(_row(s, _ours(result), theirs))
    return rows


def _evidence(*args: str) -> bytes:
    done = subprocess.run([EVIDENCE, *args], capture_output=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"evidence {args[0]} exited {done.returncode}: {done.stderr[-2000:]!r}")
    return done.stdout


def _wrong_fault(verdict: str | None, truth: str) -> bool:
    """A confident wrong answer: a named fault, not the truth."""
    return verdict is not None and verdict not in NOT_FAULTS and verdict != truth


def _healthy_called_fault(verdict: str | None, truth: str) -> bool:
    """A healthy box reported as faulty: a named fault, or two faults too close to pick."""
    return truth == "no-fault" and verdict not in ("no-fault", "insufficient-evidence")


def _failed_called_healthy(verdict: str | None, truth: str) -> bool:
    return truth != "no-fault" and verdict == "no-fault"


@dataclass
class Figures:
    """What the bars are judged on, with the rows behind each count."""

    total: int
    right: list[Row]
    confident_wrong: list[Row]
    healthy_called_fault: list[Row]
    failed_called_healthy: list[Row]

    @property
    def accuracy(self) -> float:
        return len(self.right) / self.total if self.total else 0.0

    @property
    def holds(self) -> bool:
        return (
            self.accuracy >= ACCURACY_BAR
            and not self.healthy_called_fault
            and not self.failed_called_healthy
        )


def figures(rows: list[Row], who: str = "ours") -> Figures:
    """The bars' figures for our verdicts (who="ours") or the peer's (who="peer")."""

    def where(test: Callable[[str | None, str], bool]) -> list[Row]:
        return [r for r in rows if test(getattr(r, who), r.truth)]

    return Figures(
        total=len(rows),
        right=where(lambda verdict, truth: verdict == truth),
        confident_wrong=where(_wrong_fault),
        healthy_called_fault=where(_healthy_called_fault),
        failed_called_healthy=where(_failed_called_healthy),
    )


def _order(verdicts: Iterable[str]) -> list[str]:
    """The catalog's truths first, then the other faults seen, then the non-answers."""
    seen = set(verdicts)
    faults = [t for t in TRUTHS if t != "no-fault"]
    others = sorted(seen - set(TRUTHS) - set(NOT_FAULTS))
    return [*faults, *others, *[v for v in NOT_FAULTS if v in seen or v == "no-fault"]]


def _short(names: list[str]) -> list[str]:
    """Column heads: each name's initials (memory-pressure-stall: mps), unless two clash."""
    initials = ["".join(w[0] for w in n.split("-")) for n in names]
    clash = {i for i, n in Counter(initials).items() if n > 1}
    return [n if i in clash else i for n, i in zip(names, initials, strict=True)]


def matrix(rows: list[Row], who: str = "ours") -> str:
    """Rows: the truth; columns: every verdict given (by initials, with a legend); then
    how many of each truth were right."""
    verdicts = [getattr(r, who) or "-" for r in rows]
    columns = _order(verdicts)
    heads = _short(columns)
    truths = [t for t in TRUTHS if any(r.truth == t for r in rows)]
    width = max(len(c) for c in [*truths, CORNER])
    cells = [max(len(h), 3) + 2 for h in heads]
    counts = Counter((r.truth, v) for r, v in zip(rows, verdicts, strict=True))
    head = f"{CORNER:<{width}}" + "".join(f"{h:>{w}}" for h, w in zip(heads, cells, strict=True))
    lines = [head + "   right"]
    for t in truths:
        n = sum(1 for r in rows if r.truth == t)
        line = f"{t:<{width}}" + "".join(
            f"{counts[(t, c)] or '.':>{w}}" for c, w in zip(columns, cells, strict=True)
        )
        lines.append(f"{line}   {counts[(t, t)]}/{n} ({100 * counts[(t, t)] / n:.0f} %)")
    legend = ", ".join(f"{h} {c}" for h, c in zip(heads, columns, strict=True) if h != c)
    return "\n".join([*lines, f"({legend})"] if legend else lines)


def summary(f: Figures) -> str:
    return (
        f"right {len(f.right)}/{f.total} ({100 * f.accuracy:.1f} %); confident wrong "
        f"{len(f.confident_wrong)}; healthy called a fault {len(f.healthy_called_fault)}; "
        f"failed called no-fault {len(f.failed_called_healthy)}"
    )


def listed(rows: list[Row]) -> str:
    """Rows as the misses are listed: verdict, top three candidates, the scenario's story."""
    return "\n".join(
        f"  {r.id}: {r.truth} read as {r.ours} "
        f"[{', '.join(f'{fault} {score:g}' for fault, score in r.top)}] "
        f"({r.deployment}, {r.engine}, strength {r.strength:.2f})\n    {r.story}"
        for r in rows
    )


def report(rows: list[Row], misses: bool = True) -> str:
    """The confusion matrices (ours, then the peer's where it was asked), the figures the
    bars are judged on, and our misses for debugging."""
    ours = figures(rows)
    out = [
        f"evidence classify, {len(rows)} scenarios",
        matrix(rows),
        summary(ours),
        f"bars ({BARS}): {'hold' if ours.holds else 'FAIL'}",
    ]
    asked = [r for r in rows if r.peer is not None]
    if asked:
        out += [
            "",
            f"the seed's diagnose-oom.py on the same histories, {len(asked)} scenarios "
            "(a top score of 0 read as no-fault)",
            matrix(asked, "peer"),
            summary(figures(asked, "peer")),
        ]
    wrong = [r for r in rows if r.ours != r.truth]
    if misses and wrong:
        out += ["", f"our misses ({len(wrong)}):", listed(wrong)]
    return "\n".join(out)
