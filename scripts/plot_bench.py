#!/usr/bin/env python3
"""Plots `epochrun bench --json` results as one SVG, with nothing but the standard library.

    scripts/plot_bench.py OUT.svg RESULT.json [RESULT.json ...]

Left panel: bandwidth (MB/s, median round) against the size per rank, from the results with
one blob per rank. Right panel: bandwidth against the blob count, from the results that share
the size per rank of the largest group of blob counts (a sweep at a fixed total). Each measure
is one line: epochrun's save and load solid, the write and read limits dashed in the same
colour as the measure they bound. Also prints the results as a Markdown table.
"""
import json
import math
import sys
from collections import defaultdict

WIDTH, HEIGHT = 960, 420
PANEL_WIDTH, PANEL_HEIGHT = 380, 300
MARGIN_LEFT, MARGIN_TOP = 80, 50
STYLES = {  # measure -> (colour, dashed)
    "save": ("#1f77b4", False),
    "write_limit": ("#1f77b4", True),
    "load": ("#d62728", False),
    "read_limit": ("#d62728", True),
}


def load_rows(files):
    rows = []
    for name in files:
        with open(name) as f:
            # Timing rows only: the memory rows (save_memory, load_memory) carry no bandwidth.
            rows.extend(row for row in json.load(f) if "mb_per_second" in row)
    return rows


def series(rows, x_key):
    """measure -> sorted [(x, MB/s)]; the later of two results at the same x wins."""
    points = defaultdict(dict)
    for row in rows:
        points[row["name"]][row[x_key]] = row["mb_per_second"]
    return {name: sorted(by_x.items()) for name, by_x in points.items()}


def panel(left, title, x_label, lines, x_format):
    """SVG elements of one panel: log x axis, log y axis in whole decades (bandwidths of a
    page-cache read and of a thousand small blobs lie orders of magnitude apart)."""
    out = []
    xs = sorted({x for points in lines.values() for x, _ in points})
    if not xs:
        out.append(f'<text x="{left + PANEL_WIDTH / 2}" y="{MARGIN_TOP + PANEL_HEIGHT / 2}" '
                   f'text-anchor="middle">no data</text>')
        return out
    ys = [y for points in lines.values() for _, y in points]
    y_low = math.floor(math.log10(min(ys)))
    y_high = max(math.ceil(math.log10(max(ys))), y_low + 1)
    low, high = math.log10(xs[0]), math.log10(xs[-1])
    span = high - low or 1.0
    inset = 0.06 * PANEL_WIDTH  # keeps the first and last points and labels off the frame

    def px(x):
        if high == low:
            return left + PANEL_WIDTH / 2
        return left + inset + (math.log10(x) - low) / span * (PANEL_WIDTH - 2 * inset)

    def py(y):
        return MARGIN_TOP + PANEL_HEIGHT - (math.log10(y) - y_low) / (y_high - y_low) * PANEL_HEIGHT

    bottom = MARGIN_TOP + PANEL_HEIGHT
    out.append(f'<text x="{left + PANEL_WIDTH / 2}" y="{MARGIN_TOP - 20}" text-anchor="middle" '
               f'font-weight="bold">{title}</text>')
    out.append(f'<rect x="{left}" y="{MARGIN_TOP}" width="{PANEL_WIDTH}" height="{PANEL_HEIGHT}" '
               'fill="none" stroke="#444"/>')
    for decade in range(y_low, y_high + 1):
        y = 10**decade
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + PANEL_WIDTH}" y2="{py(y):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for x in xs:
        out.append(f'<line x1="{px(x):.1f}" y1="{bottom}" x2="{px(x):.1f}" y2="{bottom + 5}" '
                   'stroke="#444"/>')
        out.append(f'<text x="{px(x):.1f}" y="{bottom + 18}" text-anchor="middle">'
                   f'{x_format(x)}</text>')
    out.append(f'<text x="{left + PANEL_WIDTH / 2}" y="{bottom + 38}" text-anchor="middle">'
               f'{x_label}</text>')
    out.append(f'<text transform="translate({left - 55},{MARGIN_TOP + PANEL_HEIGHT / 2}) '
               'rotate(-90)" text-anchor="middle">MB/s, all ranks (median round, log scale)</text>')
    for name, points in sorted(lines.items()):
        colour, dashed = STYLES.get(name, ("#2ca02c", False))
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        for x, y in points:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
    return out


def legend(left, top):
    out = []
    for i, (name, (colour, dashed)) in enumerate(STYLES.items()):
        x = left + i * 150
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<line x1="{x}" y1="{top}" x2="{x + 30}" y2="{top}" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 36}" y="{top + 4}">{name}</text>')
    return out


def markdown_table(rows):
    """One line per bench run: save and load against their limits (MB/s and median ratios)."""
    runs = defaultdict(dict)
    for row in rows:
        runs[(row["blobs"], row["mib_per_rank"], row["ranks"], row["cold"])][row["name"]] = row
    lines = ["| ranks | MiB/rank | blobs | reads | save MB/s | write limit MB/s | save ratio "
             "| load MB/s | read limit MB/s | load ratio |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for (blobs, mib, ranks, cold), m in sorted(runs.items()):
        lines.append(
            f"| {ranks} | {mib:g} | {blobs} | {'cold' if cold else 'page cache'} "
            f"| {m['save']['mb_per_second']:.0f} | {m['write_limit']['mb_per_second']:.0f} "
            f"| {m['save']['ratio']:.2f} | {m['load']['mb_per_second']:.0f} "
            f"| {m['read_limit']['mb_per_second']:.0f} | {m['load']['ratio']:.2f} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    rows = load_rows(argv[2:])
    by_size = series([r for r in rows if r["blobs"] == 1], "mib_per_rank")
    blob_counts = defaultdict(set)
    for row in rows:
        blob_counts[row["mib_per_rank"]].add(row["blobs"])
    fixed = max(blob_counts, key=lambda size: (len(blob_counts[size]), size)) if rows else None
    by_blobs = series([r for r in rows if r["mib_per_rank"] == fixed], "blobs")
    ranks = sorted({r["ranks"] for r in rows})
    cold = sorted({r["cold"] for r in rows})

    elements = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
                'font-family="sans-serif" font-size="12">',
                f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    elements += panel(MARGIN_LEFT, "bandwidth against size per rank (1 blob)", "MiB per rank",
                      by_size, lambda x: f"{x:g}")
    elements += panel(MARGIN_LEFT + PANEL_WIDTH + 110,
                      f"bandwidth against blob count ({fixed:g} MiB per rank)" if fixed else "",
                      "blobs per rank", by_blobs, lambda x: f"{x:g}")
    elements += legend(MARGIN_LEFT, HEIGHT - 15)
    elements.append(f'<text x="{WIDTH - 10}" y="14" text-anchor="end" fill="#666">'
                    f'ranks: {", ".join(map(str, ranks))}; cold reads: '
                    f'{", ".join("yes" if c else "no" for c in cold)}</text>')
    elements.append("</svg>")
    with open(argv[1], "w") as f:
        f.write("\n".join(elements) + "\n")
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
