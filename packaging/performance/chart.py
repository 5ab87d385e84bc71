"""The side-by-side run as an SVG chart: for each cell, records/s and broker
CPU per record of both sides, each a bar at the median of the rounds with a
whisker from the lowest round to the highest. Hand-written SVG (no plotting
library on the machine); side_by_side.py writes it beside summary.md."""

import statistics
from xml.sax.saxutils import escape

PANELS = (("records_per_second", "records/s (higher is better)", "{:,.0f}"),
          ("cpu_us_per_record", "broker CPU µs per record (lower is better)", "{:.2f}"))
COLORS = {"candidate": "#1f77b4", "reference": "#ff7f0e"}
CELL_HEIGHT = 64
BAR_HEIGHT = 18
LABEL_WIDTH = 260
PANEL_WIDTH = 300
GAP = 40
TOP = 56


def spread(rows, cell, role, metric):
    """(median, lowest, highest) of `metric` over the rounds, or None."""
    values = [r[metric] for r in rows if r["cell"] == cell and r["role"] == role and r[metric] == r[metric]]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def bar(x0, y, scale, stats, color, fmt):
    """One side's bar, its whisker and its median's value."""
    median, low, high = stats
    width = max(1.0, median * scale)
    whisker_y = y + BAR_HEIGHT / 2
    return [
        f'<rect x="{x0:.1f}" y="{y:.1f}" width="{width:.1f}" height="{BAR_HEIGHT}" fill="{color}"/>',
        f'<line x1="{x0 + low * scale:.1f}" y1="{whisker_y:.1f}" x2="{x0 + high * scale:.1f}" '
        f'y2="{whisker_y:.1f}" stroke="black" stroke-width="1.5"/>',
        f'<text x="{x0 + max(width, high * scale) + 4:.1f}" y="{y + BAR_HEIGHT - 4:.1f}" '
        f'font-size="11">{escape(fmt.format(median))}</text>',
    ]


def cell_group(rows, cell, index, labels):
    """The elements of one cell: its name and a panel per metric."""
    y = TOP + index * CELL_HEIGHT
    out = [f'<g class="cell" data-cell="{escape(cell)}">',
           f'<text x="8" y="{y + BAR_HEIGHT + 6}" font-size="12">{escape(cell)}</text>']
    for panel, (metric, _, fmt) in enumerate(PANELS):
        x0 = LABEL_WIDTH + panel * (PANEL_WIDTH + GAP)
        stats = {role: spread(rows, cell, role, metric) for role in labels}
        largest = max((s[2] for s in stats.values() if s), default=0)
        # 80% of the panel for the largest round, room for the value's text.
        scale = 0.8 * PANEL_WIDTH / largest if largest > 0 else 0
        for offset, (role, side_stats) in enumerate(stats.items()):
            if side_stats:
                out += bar(x0, y + offset * (BAR_HEIGHT + 4), scale, side_stats, COLORS[role], fmt)
    out.append("</g>")
    return out


def svg(rows, cells, labels, title):
    """The chart of `cells` (labels as the rows name them); `labels` maps
    candidate and reference to their sides' names."""
    width = LABEL_WIDTH + len(PANELS) * (PANEL_WIDTH + GAP)
    height = TOP + len(cells) * CELL_HEIGHT + 16
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="8" y="18" font-size="14" font-weight="bold">{escape(title)}</text>']
    for panel, (_, heading, _) in enumerate(PANELS):
        x0 = LABEL_WIDTH + panel * (PANEL_WIDTH + GAP)
        out.append(f'<text x="{x0}" y="{TOP - 10}" font-size="12">{escape(heading)}</text>')
    legend_x = 8
    for role, label in labels.items():
        out.append(f'<rect x="{legend_x}" y="28" width="12" height="12" fill="{COLORS[role]}"/>')
        out.append(f'<text x="{legend_x + 16}" y="38" font-size="11">{escape(label)}</text>')
        legend_x += 16 + 7 * len(label) + 24
    out.append(f'<text x="{legend_x}" y="38" font-size="11">bar: median of the rounds; whisker: lowest to highest</text>')
    for index, cell in enumerate(cells):
        out += cell_group(rows, cell, index, labels)
    out.append("</svg>")
    return "\n".join(out) + "\n"
