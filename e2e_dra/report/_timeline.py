"""A suite's timeline as inline SVG: cluster steps, each subtest's phases and the components'
ready times as bars on one time axis, so a slow restart or a phase that waited shows at a glance.

No script: each bar's ``<title>`` is its tooltip, which every browser shows on hover.
"""

from __future__ import annotations

from html import escape

from e2e_dra.report._load import SuiteRecord

LABEL_WIDTH = 230
PLOT_WIDTH = 880
ROW = 16
AXIS = 22
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)

COLORS = {
    "passed": "#2e9e4f",
    "failed": "#d7263d",
    "xfailed": "#c77d2e",
    "skipped": "#b8b8b8",
    "interrupted": "#f0a202",
    "ready": "#7b5ea7",
}


class Timeline:
    """The rows of one suite's timeline and their SVG."""

    def __init__(self, record: SuiteRecord) -> None:
        self.record = record
        ends = [r.start + r.seconds for r in record.results]
        ends += [(t.started or 0) + t.seconds for t in record.ready]
        self.total = max([record.wall_seconds, *ends, 1.0])

    def x(self, seconds: float) -> float:
        return LABEL_WIDTH + max(0.0, seconds) / self.total * PLOT_WIDTH

    def svg(self) -> str:
        rows = self._rows()
        height = AXIS + ROW * len(rows) + 6
        width = LABEL_WIDTH + PLOT_WIDTH + 10
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="timeline of {escape(self.record.suite)}">'
        ]
        parts += self._axis(height)
        for index, (label, bars) in enumerate(rows):
            y = AXIS + index * ROW
            if index % 2:
                parts.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW}" fill="#f4f4f4"/>')
            parts.append(
                f'<text x="{LABEL_WIDTH - 6}" y="{y + ROW - 4}" text-anchor="end" '
                f'class="rowlabel">{escape(label)}</text>'
            )
            parts += [self._bar(y, *bar) for bar in bars]
        parts.append("</svg>")
        return "\n".join(parts)

    def _rows(self) -> list[tuple[str, list[tuple[float, float, str, str, str]]]]:
        """(label, [(start, seconds, color, tooltip, text in the bar)]) per row."""
        steps = [
            (r.start, r.seconds, COLORS[r.outcome], f"{r.id}: {r.outcome}", r.step or r.id)
            for r in self.record.results
            if r.phase is None
        ]
        rows = [("cluster steps", steps)]
        if self.record.ready:
            ready = [
                (
                    t.started,
                    t.seconds,
                    COLORS["ready"],
                    f"{t.component} ({t.state}): ready after {t.seconds:.1f}s"
                    + (f", {t.attempts} attempts" if t.attempts > 1 else ""),
                    "",
                )
                for t in self.record.ready
                if t.started is not None
            ]
            rows.append(("components ready", ready))
        subtests: dict[str, list[tuple[float, float, str, str, str]]] = {}
        for r in self.record.results:
            if r.phase is not None and r.subtest is not None:
                tip = f"{r.id}: {r.outcome} after {r.seconds:.1f}s"
                if r.message:
                    tip += f"\n{r.message}"
                bar = (r.start, r.seconds, COLORS[r.outcome], tip, "")
                subtests.setdefault(r.subtest, []).append(bar)
        rows += sorted(subtests.items())
        return rows

    def _bar(self, y: float, start: float, seconds: float, color: str, tip: str, text: str) -> str:
        x = self.x(start)
        width = max(1.5, self.x(start + seconds) - x)
        bar = (
            f'<g><title>{escape(tip)}</title><rect x="{x:.1f}" y="{y + 2}" width="{width:.1f}" '
            f'height="{ROW - 4}" rx="2" fill="{color}"/>'
        )
        if text and width > 6.5 * len(text) + 4:
            bar += f'<text x="{x + 3:.1f}" y="{y + ROW - 5}" class="barlabel">{escape(text)}</text>'
        return bar + "</g>"

    def _axis(self, height: int) -> list[str]:
        step = next((s for s in TICK_STEPS if self.total / s <= 12), TICK_STEPS[-1])
        parts = []
        tick = 0
        while tick <= self.total:
            x = self.x(tick)
            label = f"{tick // 60}m{tick % 60:02d}s" if tick >= 60 else f"{tick}s"
            parts.append(
                f'<line x1="{x:.1f}" y1="{AXIS - 4}" x2="{x:.1f}" y2="{height}" stroke="#ddd"/>'
                f'<text x="{x:.1f}" y="{AXIS - 8}" text-anchor="middle" class="tick">{label}</text>'
            )
            tick += step
        return parts
