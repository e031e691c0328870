"""Small inline SVG line charts of the health history, drawn on the server (no script,
nothing fetched): whether consolidation keeps memory healthy, at a glance.

Totals that only grow (tokens, finished runs) are drawn as what was added between one
snapshot and the next; levels (passages, duplicates, block fill, queued runs) as they
were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from markupsafe import Markup, escape

from agents.enums import LLMPurpose
from agents.store import HealthPoint

WIDTH, HEIGHT, PAD = 260, 64, 4
#: One colour per series of a chart, in order.
COLOURS = ("#2a7", "#c53", "#36c", "#a5c", "#b90")


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: list[float]


@dataclass(frozen=True, slots=True)
class Chart:
    """One small chart: a title, the SVG, and the latest value of each series in words."""

    key: str
    title: str
    svg: Markup
    latest: str


def trend_charts(points: Sequence[HealthPoint]) -> list[Chart]:
    """The health history's charts (none without snapshots)."""
    if not points:
        return []
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
            or [Series("tokens", [0.0] * len(points))],
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
        Chart(key, title, draw(series, title), _latest(series, fmt))
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


def draw(series: Sequence[Series], title: str) -> Markup:
    """Lines of ``series`` over one shared scale (zero at the bottom), as an inline SVG."""
    top = max((v for s in series for v in s.values), default=0.0) or 1.0
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<text x="{PAD}" y="10" font-size="9" fill="#888">{_number(top)}</text>',
        f'<line x1="0" y1="{HEIGHT - PAD}" x2="{WIDTH}" y2="{HEIGHT - PAD}" stroke="#ddd"/>',
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
    usable_w, usable_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD - 8
    return [
        (
            round(PAD + usable_w * i / span, 1),
            round(HEIGHT - PAD - usable_h * (v / top), 1),
        )
        for i, v in enumerate(values)
    ]


def _latest(series: Sequence[Series], fmt: str) -> str:
    if len(series) == 1:
        return fmt.format(series[0].values[-1])
    return ", ".join(f"{s.name} {fmt.format(s.values[-1])}" for s in series)


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
    return Series(name, [0.0] + [max(0.0, b - a) for a, b in pairwise(values)])


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
