"""Inline-SVG line charts for the HTML incident report: pure functions, stdlib only.

Invariants, which the report's reader relies on:
- Unknown is not zero. A None or non-finite reading breaks its line: the points on either
  side are never joined and nothing is drawn for the gap. A lone reading between gaps is
  a dot, so it stays visible.
- A series with no readings is left out of the plot but named in the legend as not
  measured; a chart with no readings at all is a not-measured panel, never an empty plot.
- A reading beyond CLIP (in the chart's display unit) is no measurement of a real machine
  (an exporter's overflow, a sentinel): it is drawn at the limit and the chart says how
  many were, so one absurd value can neither break the page nor pass for a reading.
- Self-contained and deterministic: no scripts, fonts or links; every text is escaped;
  the same input gives the same string (coordinates rounded to 0.1 px).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

# Okabe-Ito, the colour-blind-safe set, less its yellow (unreadable on white).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
UNMEASURED = 'stroke="#999" stroke-dasharray="2 2"'  # legend swatch of a series with no readings
GIB, MIB = 1024**3, 1024**2
# Time tick spacings: round seconds, minutes, hours, then days; past a week, whole days.
TIME_STEPS = (
    (1, 2, 5, 10, 15, 30)
    + tuple(60 * m for m in (1, 2, 5, 10, 15, 30))
    + tuple(3600 * h for h in (1, 2, 3, 6, 12, 24, 48, 168))
)
# Layout in px: plot margins, the band under the plot for tick labels and the UTC caption,
# one legend row, and the width of a character at the 11 px sans-serif used throughout.
LEFT, RIGHT, TOP, AXIS_H, ROW_H, CHAR_W = 64, 16, 30, 34, 16, 6.2
SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}"'
    ' role="img" aria-label="{label}" font-family="sans-serif" font-size="11">'
    "<title>{label}</title>"
)
UNITS = {
    "bytes": (GIB, " GiB"),  # MiB instead when the chart's largest value is under 2 GiB
    "ratio": (0.01, "%"),
    "percent": (1, "%"),
    "count": (1, ""),
    "seconds": (1, " s"),
}
CLIP = 1e12  # display units: 1e12 GiB, %, requests or seconds


@dataclass(frozen=True)
class Line:
    label: str
    points: list[tuple[float, float | None]]  # (epoch seconds, value); None = not measured


@dataclass(frozen=True)
class Marker:
    t: float  # epoch seconds
    label: str


def line_chart(
    title: str,
    lines: Sequence[Line],
    unit: str,
    markers: Sequence[Marker] = (),
    width: int = 760,
    height: int = 220,
) -> str:
    """An SVG line chart of `lines` over UTC time. `unit` is bytes, ratio, percent, count
    or seconds; gaps stay gaps, and input with no readings at all gives `not_measured`."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; expected one of {', '.join(UNITS)}")
    bound = CLIP * UNITS[unit][0]
    known = [
        [(t, v) if v is not None and math.isfinite(v) else None for t, v in _by_time(ln)]
        for ln in lines
    ]
    clipped = sum(1 for pts in known for p in pts if p and abs(p[1]) > bound)
    known = [[p and (p[0], max(-bound, min(bound, p[1]))) for p in pts] for pts in known]
    values = [p for pts in known for p in pts if p]
    if not values:
        return not_measured(title, "no readings", width)
    scale, suffix = _unit(unit, max(abs(v) for _, v in values))
    axis = [v / scale for _, v in values]
    # from zero, so heights compare; a share is read against the whole, so up to 100%
    y_ticks = _nice_ticks(min(0.0, *axis), max(100.0 if suffix == "%" else 0.0, *axis))
    t0, t1 = min(t for t, _ in values), max(t for t, _ in values)
    if t1 == t0:  # one instant: centre it in a minute rather than divide by zero
        t0, t1 = t0 - 30, t1 + 30
    measured = [any(pts) for pts in known]
    legend = _legend([ln.label for ln in lines], measured, width)
    bottom = height - AXIS_H - ROW_H * (1 + max(row for _, row, _ in legend))
    right = width - RIGHT

    def x(t: float) -> float:
        return LEFT + (t - t0) / (t1 - t0) * (right - LEFT)

    def y(axis_value: float) -> float:
        low, high = y_ticks[0], y_ticks[-1]
        return bottom - (axis_value - low) / (high - low) * (bottom - TOP)

    out = [
        SVG.format(w=width, h=height, label=_esc(title)),
        f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{_esc(title)}</text>',
    ]
    if clipped:
        out.append(
            f'<text x="{right}" y="16" text-anchor="end" fill="#a00">{clipped} reading'
            f"{'s' if clipped != 1 else ''} beyond ±{bound / scale:g}{suffix} drawn at the limit"
            "</text>"
        )
    for tick in y_ticks:
        ty, label = _f(y(tick)), _tick_label(tick, y_ticks[1] - y_ticks[0]) + suffix
        out.append(f'<line x1="{LEFT}" y1="{ty}" x2="{right}" y2="{ty}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 4}" y="{ty}" dy="4" text-anchor="end">{label}</text>')
    out.append(f'<path d="M{LEFT} {TOP}V{bottom}H{right}" fill="none" stroke="#666"/>')
    out += _time_axis(t0, t1, x, bottom, right)
    for i, pts in enumerate(known):
        colour = PALETTE[i % len(PALETTE)]
        for run in _runs(pts):
            xy = [(_f(x(t)), _f(y(v / scale))) for t, v in run]
            if len(xy) == 1:
                out.append(f'<circle cx="{xy[0][0]}" cy="{xy[0][1]}" r="2.5" fill="{colour}"/>')
            else:
                out.append(
                    f'<polyline points="{" ".join(f"{a},{b}" for a, b in xy)}" fill="none"'
                    f' stroke="{colour}" stroke-width="1.5" stroke-linejoin="round"/>'
                )
    for m in markers:
        if t0 <= m.t <= t1:
            mx, flip = x(m.t), x(m.t) > right - 150  # label left of the line near the end
            out.append(
                f'<line x1="{_f(mx)}" y1="{TOP}" x2="{_f(mx)}" y2="{bottom}" stroke="#444"'
                ' stroke-dasharray="4 3"/>'
                f'<text x="{_f(mx - 3 if flip else mx + 3)}" y="{TOP + 10}" fill="#444"'
                f' text-anchor="{"end" if flip else "start"}">{_esc(m.label)}</text>'
            )
    for i, row, lx in legend:
        ly = bottom + AXIS_H + ROW_H * row + 10
        swatch = f'stroke="{PALETTE[i % len(PALETTE)]}"' if measured[i] else UNMEASURED
        out.append(
            f'<line x1="{_f(lx)}" y1="{ly}" x2="{_f(lx + 16)}" y2="{ly}" stroke-width="2"'
            f' {swatch}/><text x="{_f(lx + 20)}" y="{ly}" dy="4">'
            f"{_esc(_legend_text(lines[i].label, measured[i]))}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def not_measured(title: str, reason: str, width: int = 760) -> str:
    """A short panel saying that `title` has no chart, and why (e.g. "unsupported: NVML
    not found"), so a missing source reads as missing, never as a flat line."""
    return (
        SVG.format(w=width, h=56, label=_esc(f"{title}: not measured"))
        + f'<rect x="0.5" y="0.5" width="{width - 1}" height="55" fill="#f4f4f4" stroke="#ccc"/>'
        f'<text x="12" y="22" font-size="13" font-weight="bold">{_esc(title)}</text>'
        f'<text x="12" y="42" font-style="italic" fill="#555">not measured: {_esc(reason)}</text>'
        "</svg>"
    )


def _by_time(line: Line) -> list[tuple[float, float | None]]:
    return sorted(line.points, key=lambda p: p[0])  # by time only: values may be None


def _esc(text: str) -> str:
    return escape(text, quote=True)


def _f(v: float) -> str:
    return f"{v:.1f}"


def _unit(unit: str, biggest: float) -> tuple[float, str]:
    """The divisor from stored values to axis values, and the tick label's suffix."""
    if unit == "bytes" and biggest < 2 * GIB:
        return MIB, " MiB"
    return UNITS[unit]


def _nice_ticks(lo: float, hi: float) -> list[float]:
    """4 to 6 round ticks covering lo..hi: the smallest step of 1, 2, 2.5 or 5 times a
    power of ten that spans it in at most 5 intervals, with both ends on whole steps."""
    span = hi - lo or 1.0
    power = 10 ** math.floor(math.log10(span / 5))
    for step in (m * power for m in (1, 2, 2.5, 5, 10, 20)):
        first, last = math.floor(lo / step + 1e-9), math.ceil((lo + span) / step - 1e-9)
        if last - first <= 5:
            break
    return [k * step for k in range(first, last + 1)]


def _tick_label(v: float, step: float) -> str:
    """As many decimals as the step needs (2.5 -> one), thousands separated."""
    decimals = next((d for d in range(7) if abs(round(step, d) - step) < 1e-9 * step), 6)
    return f"{v:,.{decimals}f}"


def _time_axis(t0: float, t1: float, x, bottom: float, right: float) -> list[str]:
    """UTC ticks on whole multiples of a round step, labelled for the span: seconds only
    when ticks are seconds apart, the date only when the span reaches a day."""
    span = t1 - t0
    step = next((s for s in TIME_STEPS if span / s <= 6), math.ceil(span / 6 / 86400) * 86400)
    if step < 60:
        fmt = "%H:%M:%S"
    elif span < 86400:
        fmt = "%H:%M"
    else:
        fmt = "%m-%d %H:%M" if step < 86400 else "%m-%d"
    out = []
    for tick in range(math.ceil(t0 / step) * step, math.floor(t1) + 1, step):
        tx, label = _f(x(tick)), datetime.fromtimestamp(tick, UTC).strftime(fmt)
        # a label centred on the last tick would run past the edge of the picture
        anchor = "end" if x(tick) + CHAR_W * len(label) / 2 > right + RIGHT else "middle"
        out.append(
            f'<line x1="{tx}" y1="{bottom}" x2="{tx}" y2="{bottom + 4}" stroke="#666"/>'
            f'<text x="{tx}" y="{bottom + 16}" text-anchor="{anchor}">{label}</text>'
        )
    day = datetime.fromtimestamp(t0, UTC).strftime("%Y-%m-%d")
    out.append(
        f'<text x="{right}" y="{bottom + 28}" text-anchor="end" fill="#666">UTC, from {day}</text>'
    )
    return out


def _runs(points: list[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive known points; an unknown (None) ends a run and is not drawn."""
    runs: list[list[tuple[float, float]]] = [[]]
    for p in points:
        if p is None:
            runs.append([])
        else:
            runs[-1].append(p)
    return [r for r in runs if r]


def _legend_text(label: str, measured: bool) -> str:
    return label if measured else f"{label} (not measured)"


def _legend(labels: list[str], measured: list[bool], width: int) -> list[tuple[int, int, float]]:
    """(line index, row, x) for each legend entry: swatch, text, gap; rows wrap at the width."""
    placed, row, lx = [], 0, float(LEFT)
    for i, (label, ok) in enumerate(zip(labels, measured, strict=True)):
        w = 20 + CHAR_W * len(_legend_text(label, ok)) + 14
        if lx > LEFT and lx + w > width - RIGHT:
            row, lx = row + 1, float(LEFT)
        placed.append((i, row, lx))
        lx += w
    return placed
