"""A suite's timeline as inline SVG, from the cluster's bring-up on: cluster steps, a row per
component with the time each state's start took until it was ready (and its restarts), and a row
per subtest with its phases, on one time axis, so a slow restart or a phase that waited shows at
a glance.

What runs before the bring-up (fetching or building the releases, ``versions``; the node's
runtime, ``node-runtime``) can take many minutes on a cold machine and nothing of the cluster
happens meanwhile: drawn to scale it took most of the axis and squeezed the run into a sliver. It
is one bar of fixed width at the axis' start, labelled with how long it took, and the axis counts
from the bring-up.

No script: each bar's ``<title>`` is its tooltip, which every browser shows on hover.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from e2e_dra.report._load import ReadyTime, Result, SuiteRecord

LABEL_WIDTH = 230
PLOT_WIDTH = 880
SETUP_WIDTH = 110
"""Pixels of the collapsed bar of what ran before the bring-up, whatever its length."""
SETUP_GAP = 8
ROW = 16
AXIS = 22
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400)
BRING_UP = "bring-up"

COLORS = {
    "passed": "#2e9e4f",
    "failed": "#d7263d",
    "xfailed": "#c77d2e",
    "skipped": "#b8b8b8",
    "interrupted": "#f0a202",
    "ready": "#7b5ea7",
    "retried": "#b4457f",
    "setup": "#6f8196",
    "restart": "#222222",
}

Bar = tuple[float, float, str, str, str]
"""(start, seconds, color, tooltip, text in the bar)."""


def clock(seconds: float) -> str:
    """``75`` -> ``1m15s``, ``3700`` -> ``1h01m40s``, ``4`` -> ``4.0s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@dataclass(frozen=True)
class Row:
    """One row of a timeline: its label, its bars and its marks (``(at, tooltip, text)``)."""

    label: str
    bars: tuple[Bar, ...]
    marks: tuple[tuple[float, str, str], ...] = ()


class Axis:
    """Seconds since the suite started -> x: what ran before ``origin`` (the bring-up) squeezed
    into :data:`SETUP_WIDTH` pixels, the rest to scale; ticks count from ``origin``."""

    def __init__(self, origin: float, total: float) -> None:
        self.origin = origin
        self.total = max(total, origin + 1.0)
        self.start = LABEL_WIDTH + (SETUP_WIDTH if origin > 0 else 0)

    @property
    def collapsed(self) -> bool:
        return self.origin > 0

    def x(self, seconds: float, *, end: bool = False) -> float:
        """Where ``seconds`` is drawn; ``end``: as the end of a bar (one that ends at the
        bring-up ends before the gap that marks the collapsed part's end)."""
        seconds = max(0.0, seconds)
        if self.collapsed and (seconds < self.origin or (end and seconds <= self.origin)):
            return LABEL_WIDTH + seconds / self.origin * (SETUP_WIDTH - SETUP_GAP)
        span = self.total - self.origin
        return self.start + (seconds - self.origin) / span * (LABEL_WIDTH + PLOT_WIDTH - self.start)

    def ticks(self) -> list[tuple[float, str]]:
        span = self.total - self.origin
        step = next((s for s in TICK_STEPS if span / s <= 12), TICK_STEPS[-1])
        found = []
        tick = 0
        while tick <= span:
            found.append((self.x(self.origin + tick), clock(tick) if tick >= 60 else f"{tick}s"))
            tick += step
        return found


class Timeline:
    """The rows of one suite's timeline and their SVG."""

    def __init__(self, record: SuiteRecord) -> None:
        self.record = record
        ends = [r.start + r.seconds for r in record.results]
        ends += [(t.started or 0) + t.seconds for t in record.ready]
        total = max([record.wall_seconds, *ends, 1.0])
        self.setup = self._setup()
        self.axis = Axis(self.setup[0] if self.setup else 0.0, total)

    def _setup(self) -> tuple[float, list[Result]] | None:
        """(when the cluster's bring-up started, the cluster steps that ran before it), or None
        when nothing ran before it or there was no bring-up (the run failed before one)."""
        starts = [r.start for r in self.record.results if r.phase is None and r.step == BRING_UP]
        starts += [t.started for t in self.record.ready if t.started is not None]
        if not starts:
            return None
        origin = min(starts)
        before = [r for r in self.record.results if r.phase is None and r.start < origin]
        return (origin, before) if before and origin > 0 else None

    def svg(self) -> str:
        rows = self.rows()
        height = AXIS + ROW * len(rows) + 6
        width = LABEL_WIDTH + PLOT_WIDTH + 10
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="timeline of {escape(self.record.suite)}">'
        ]
        parts += self._axis(height)
        for index, row in enumerate(rows):
            y = AXIS + index * ROW
            if index % 2:
                parts.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW}" fill="#f4f4f4"/>')
            parts.append(
                f'<text x="{LABEL_WIDTH - 6}" y="{y + ROW - 4}" text-anchor="end" '
                f'class="rowlabel">{escape(row.label)}</text>'
            )
            parts += [self._bar(y, *bar) for bar in row.bars]
            parts += [self._mark(y, *mark) for mark in row.marks]
        parts.append("</svg>")
        return "\n".join(parts)

    def rows(self) -> list[Row]:
        """The cluster steps (what ran before the bring-up as one bar), a row per component,
        then a row per subtest."""
        return [self._cluster_steps(), *self._components(), *self._subtests()]

    def _cluster_steps(self) -> Row:
        before = self.setup[1] if self.setup else []
        bars: list[Bar] = []
        if self.setup is not None:
            origin = self.setup[0]
            said = "; ".join(f"{r.id} {clock(r.seconds)} {r.outcome}" for r in before)
            outcomes = {r.outcome for r in before}
            worst = next((o for o in ("failed", "interrupted") if o in outcomes), "setup")
            tip = f"before the cluster's bring-up: {clock(origin)} (drawn collapsed): {said}"
            bars.append((0.0, origin, COLORS[worst], tip, f"setup {clock(origin)}"))
        for r in self.record.results:
            if r.phase is None and not any(r is b for b in before):
                tip = f"{r.id}: {r.outcome}, ran {clock(r.seconds)}"
                bars.append((r.start, r.seconds, COLORS[r.outcome], tip, r.step or r.id))
        return Row("cluster steps", tuple(bars))

    def _components(self) -> list[Row]:
        """A row per component: each of its starts until it was ready (a bar per state), a mark
        where it was restarted into a later state, and ``↻n`` after a start that took more than
        one attempt (its ``attempts``)."""
        per: dict[str, list[ReadyTime]] = {}
        for t in self.record.ready:
            if t.started is not None:
                per.setdefault(t.component, []).append(t)
        rows = []
        for component, times in per.items():
            times.sort(key=lambda t: t.started or 0.0)
            bars: list[Bar] = []
            marks = []
            for index, t in enumerate(times):
                started = t.started or 0.0
                tip = f"{component} ({t.state}): ready {clock(t.seconds)} after its start"
                if t.attempts > 1:
                    tip += f", {t.attempts} attempts ({t.attempts - 1} restarts before ready)"
                color = COLORS["retried"] if t.attempts > 1 else COLORS["ready"]
                bars.append((started, t.seconds, color, tip, t.state))
                if index:
                    said = f"{component} restarted into {t.state} {self._since(started)}"
                    marks.append((started, said, ""))
                if t.attempts > 1:
                    marks.append((started + t.seconds, tip, f"↻{t.attempts - 1}"))
            rows.append(Row(component, tuple(bars), tuple(marks)))
        return rows

    def _subtests(self) -> list[Row]:
        subtests: dict[str, list[Bar]] = {}
        for r in self.record.results:
            if r.phase is not None and r.subtest is not None:
                tip = f"{r.id}: {r.outcome}, ran {clock(r.seconds)}"
                if r.message:
                    tip += f"\n{r.message}"
                bar = (r.start, r.seconds, COLORS[r.outcome], tip, "")
                subtests.setdefault(r.subtest, []).append(bar)
        return [Row(name, tuple(bars)) for name, bars in sorted(subtests.items())]

    def _since(self, seconds: float) -> str:
        if self.axis.collapsed:
            return f"{clock(seconds - self.axis.origin)} after the bring-up started"
        return f"{clock(seconds)} after the suite started"

    def _bar(self, y: float, start: float, seconds: float, color: str, tip: str, text: str) -> str:
        x = self.axis.x(start)
        width = max(1.5, self.axis.x(start + seconds, end=True) - x)
        bar = (
            f'<g><title>{escape(tip)}</title><rect x="{x:.1f}" y="{y + 2}" width="{width:.1f}" '
            f'height="{ROW - 4}" rx="2" fill="{color}"/>'
        )
        if text and width > 6.5 * len(text) + 4:
            bar += f'<text x="{x + 3:.1f}" y="{y + ROW - 5}" class="barlabel">{escape(text)}</text>'
        return bar + "</g>"

    def _mark(self, y: float, at: float, tip: str, text: str) -> str:
        """A restart: a tick across the row where it happened; with ``text`` (``↻2``), the
        count of restarts a start needed, after its bar."""
        x = self.axis.x(at)
        if text:
            return (
                f'<g class="retries"><title>{escape(tip)}</title><text x="{x + 2:.1f}" '
                f'y="{y + ROW - 4}" fill="{COLORS["retried"]}">{escape(text)}</text></g>'
            )
        return (
            f'<g class="restart"><title>{escape(tip)}</title><line x1="{x:.1f}" y1="{y}" '
            f'x2="{x:.1f}" y2="{y + ROW}" stroke="{COLORS["restart"]}" stroke-width="2"/></g>'
        )

    def _axis(self, height: int) -> list[str]:
        parts = []
        if self.axis.collapsed:
            end = LABEL_WIDTH + SETUP_WIDTH - SETUP_GAP / 2
            parts.append(
                f'<text x="{LABEL_WIDTH + 2}" y="{AXIS - 8}" class="tick">before bring-up</text>'
                f'<line x1="{end:.1f}" y1="{AXIS - 4}" x2="{end:.1f}" y2="{height}" '
                'stroke="#999" stroke-dasharray="3,3"/>'
            )
        for x, label in self.axis.ticks():
            parts.append(
                f'<line x1="{x:.1f}" y1="{AXIS - 4}" x2="{x:.1f}" y2="{height}" stroke="#ddd"/>'
                f'<text x="{x:.1f}" y="{AXIS - 8}" text-anchor="middle" class="tick">{label}</text>'
            )
        return parts
