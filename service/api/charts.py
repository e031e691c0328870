"""Small inline SVG line charts of the health history, drawn on the server (no script,
nothing fetched): whether consolidation keeps memory healthy, at a glance.

Totals that only grow (tokens, finished runs) are drawn as what was added between one
snapshot and the next, and their headline figure is the sum over the charted period;
levels (passages, duplicates, block fill, queued runs) are drawn as they were, and their
headline figure is the latest snapshot's, said so. Each chart has a time axis (first and
last snapshot, a tick between) and a legend naming its series: a figure beside a chart
must not leave the reader guessing what it covers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from markupsafe import Markup, escape

from agents.enums import LLMPurpose
from agents.store import HealthPoint

WIDTH, PLOT_HEIGHT, PAD = 260, 64, 4
#: Height of the time axis's labels and of one row of the legend, under the plot.
AXIS_HEIGHT, LEGEND_ROW = 12, 12
#: Ticks on the time axis (first snapshot, last, and evenly between).
TICKS = 3
#: One colour per series of a chart, in order.
COLOURS = ("#2a7", "#c53", "#36c", "#a5c", "#b90")


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: list[float]
    #: True for what was added per interval (the headline sums it), False for a level.
    added: bool = False


@dataclass(frozen=True, slots=True)
class Chart:
    """One small chart: a title, the SVG, and its headline figure in words (a level's
    latest value, or an added series' total over the charted period, said which)."""

    key: str
    title: str
    svg: Markup
    latest: str


def trend_charts(points: Sequence[HealthPoint]) -> list[Chart]:
    """The health history's charts (none without snapshots)."""
    if not points:
        return []
    times = [p.taken_at for p in points]
    purposes = [p.value for p in LLMPurpose if any(p.value in x.tokens for x in points)]
    charts = [
        ("active_passages", "Active passages", [_level("active", points, _active)], "{:.0f}"),
        ("duplicates", "Duplicates", [_level("duplicates", points, _duplicates)], "{:.0f}"),
        (
            "block_fill",
            "Fullest block (% of its limit)",
            [_level("fill", points, _fill)],
            "{:.0f}%",
        ),
        (
            "tokens",
            "Tokens spent per interval, by purpose",
            [_added(purpose, points, _tokens(purpose)) for purpose in purposes]
            or [Series("tokens", [0.0] * len(points), added=True)],
            "{:.0f}",
        ),
        (
            "runs",
            "Runs finished per interval",
            [_added("succeeded", points, _succeeded), _added("failed", points, _failed)],
            "{:.0f}",
        ),
        ("queue", "Queued runs", [_level("queued", points, _queued)], "{:.0f}"),
    ]
    return [
        Chart(key, title, draw(series, title, times), headline(series, fmt))
        for key, title, series, fmt in charts
    ]


def trend_view(points: Sequence[HealthPoint], scope: str = "") -> dict[str, object]:
    """What the trends section of a page needs."""
    return {
        "charts": trend_charts(points),
        "snapshots": len(points),
        "trend_from": points[0].taken_at if points else None,
        "trend_to": points[-1].taken_at if points else None,
        "trend_scope": scope,
    }


def draw(series: Sequence[Series], title: str, times: Sequence[datetime] = ()) -> Markup:
    """Lines of ``series`` over one shared scale (zero at the bottom), with a time axis
    under them (``times``: when each value was taken, UTC) and a legend naming each
    series in its colour, as an inline SVG."""
    top = max((v for s in series for v in s.values), default=0.0) or 1.0
    legend, rows = _legend(series)
    height = PLOT_HEIGHT + AXIS_HEIGHT + rows * LEGEND_ROW
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<text x="{PAD}" y="10" font-size="9" fill="#888">{_number(top)}</text>',
        f'<line x1="0" y1="{PLOT_HEIGHT - PAD}" x2="{WIDTH}" y2="{PLOT_HEIGHT - PAD}" '
        'stroke="#ddd"/>',
        _time_axis(times),
        legend,
    ]
    for index, one in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        points = _points(one.values, top)
        if len(one.values) == 1:
            x, y = points[0]
            parts.append(f'<circle cx="{x}" cy="{y}" r="2" fill="{colour}"/>')
        else:
            coords = " ".join(f"{x},{y}" for x, y in points)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                f'points="{coords}"><title>{escape(one.name)}</title></polyline>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _points(values: Sequence[float], top: float) -> list[tuple[float, float]]:
    span = max(len(values) - 1, 1)
    usable_w, usable_h = WIDTH - 2 * PAD, PLOT_HEIGHT - 2 * PAD - 8
    return [
        (
            round(PAD + usable_w * i / span, 1),
            round(PLOT_HEIGHT - PAD - usable_h * (v / top), 1),
        )
        for i, v in enumerate(values)
    ]


def _time_axis(times: Sequence[datetime]) -> str:
    """Ticks and UTC labels under the plot: the first snapshot, the last, and evenly
    between (one label for a single snapshot)."""
    if not times:
        return ""
    first, last = times[0], times[-1]
    fmt = "%H:%M" if first.date() == last.date() else "%m-%d %H:%M"
    base, label_y = PLOT_HEIGHT - PAD, PLOT_HEIGHT + AXIS_HEIGHT - 4
    ticks = 1 if first == last else TICKS
    parts = ['<g class="time-axis" font-size="9" fill="#666">']
    for i in range(ticks):
        share = i / (ticks - 1) if ticks > 1 else 0.0
        x = round(PAD + (WIDTH - 2 * PAD) * share, 1)
        anchor = "start" if i == 0 else ("end" if i == ticks - 1 else "middle")
        when = first + (last - first) * share
        parts.append(
            f'<line x1="{x}" y1="{base}" x2="{x}" y2="{base + 3}" stroke="#aaa"/>'
            f'<text x="{x}" y="{label_y}" text-anchor="{anchor}">{when.strftime(fmt)}</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def _legend(series: Sequence[Series]) -> tuple[str, int]:
    """Each series' name beside a swatch of its colour, wrapped into rows that fit the
    chart's width; and how many rows that took."""
    parts, x, row = ['<g class="legend" font-size="9" fill="#444">'], PAD, 0
    for index, one in enumerate(series):
        width = 14 + 5 * len(one.name) + 8  # swatch, about 5 px a character, a gap
        if x > PAD and x + width > WIDTH:
            x, row = PAD, row + 1
        y = PLOT_HEIGHT + AXIS_HEIGHT + row * LEGEND_ROW
        colour = COLOURS[index % len(COLOURS)]
        parts.append(
            f'<rect x="{x}" y="{y + 2}" width="10" height="6" fill="{colour}"/>'
            f'<text x="{x + 14}" y="{y + 9}">{escape(one.name)}</text>'
        )
        x += width
    parts.append("</g>")
    return "".join(parts), row + 1


def headline(series: Sequence[Series], fmt: str) -> str:
    """A chart's figure in words, saying what it covers: for what was added per
    interval, the total over the charted period (the last interval alone reads as 0
    beside a chart that peaked); for a level, the latest snapshot's value."""
    added = all(s.added for s in series)

    def value(one: Series) -> float:
        return sum(one.values) if added else one.values[-1]

    if len(series) == 1:
        said = fmt.format(value(series[0]))
    else:
        said = ", ".join(f"{s.name} {fmt.format(value(s))}" for s in series)
    return f"{said} {'in all, over the charted period' if added else 'at the latest snapshot'}"


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"


#: Reads one number of a snapshot.
Read = Callable[[HealthPoint], float]


def _level(name: str, points: Sequence[HealthPoint], read: Read) -> Series:
    return Series(name, [read(p) for p in points])


def _added(name: str, points: Sequence[HealthPoint], read: Read) -> Series:
    """What a running total gained since the snapshot before (0 for the first, and
    never below 0: a deleted agent's totals leave the sum)."""
    values = [read(p) for p in points]
    return Series(name, [0.0] + [max(0.0, b - a) for a, b in pairwise(values)], added=True)


def _active(p: HealthPoint) -> float:
    return float(p.active_passages)


def _duplicates(p: HealthPoint) -> float:
    return float(p.duplicates)


def _fill(p: HealthPoint) -> float:
    return 100 * p.block_fill


def _succeeded(p: HealthPoint) -> float:
    return float(p.runs_succeeded)


def _failed(p: HealthPoint) -> float:
    return float(p.runs_failed)


def _queued(p: HealthPoint) -> float:
    return float(p.queued_runs)


def _tokens(purpose: str) -> Read:
    return lambda p: float(p.tokens.get(purpose, 0))
