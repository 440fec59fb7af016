#!/usr/bin/env python3
"""Plots `epochrun bench --scale --json` results (one per rank count) as one SVG, with nothing
but the standard library, and prints them as a Markdown table.

    scripts/plot_scale.py OUT.svg SCALE.json [SCALE.json ...]

Left panel: the median seconds of a save and a load of a tiny state against the rank count,
solid, with their hand-made equivalents dashed in the same colour (log-log). Right panel: the
two ratios against the rank count, with the target.
"""
import json
import math
import sys

WIDTH, HEIGHT = 960, 420
PANEL_WIDTH, PANEL_HEIGHT = 380, 300
MARGIN_LEFT, MARGIN_TOP = 80, 50
STYLES = {  # measure -> (colour, dashed)
    "scale_save": ("#1f77b4", False),
    "scale_save_limit": ("#1f77b4", True),
    "scale_load": ("#d62728", False),
    "scale_load_limit": ("#d62728", True),
}
LABELS = {"scale_save": "save", "scale_save_limit": "hand-made save", "scale_load": "load",
          "scale_load_limit": "hand-made load"}


def runs(files):
    """ranks -> {row name -> row}."""
    by_ranks = {}
    for name in files:
        with open(name) as f:
            rows = json.load(f)
        by_ranks[rows[0]["ranks"]] = {row["name"]: row for row in rows}
    return dict(sorted(by_ranks.items()))


def axis(values, log):
    low, high = min(values), max(values)
    if log:
        low, high = math.floor(math.log10(low)), math.ceil(math.log10(high))
        return low, max(high, low + 1)
    return 0.0, high * 1.1 or 1.0


def panel(left, title, y_label, lines, xs, log_y, target=None):
    out = [f'<text x="{left + PANEL_WIDTH / 2}" y="{MARGIN_TOP - 20}" text-anchor="middle" '
           f'font-weight="bold">{title}</text>',
           f'<rect x="{left}" y="{MARGIN_TOP}" width="{PANEL_WIDTH}" height="{PANEL_HEIGHT}" '
           'fill="none" stroke="#444"/>']
    ys = [y for points in lines.values() for _, y in points] + ([target] if target else [])
    y_low, y_high = axis(ys, log_y)
    x_low, x_high = math.log10(xs[0]), math.log10(xs[-1])
    inset = 0.06 * PANEL_WIDTH

    def px(x):
        span = (x_high - x_low) or 1.0
        return left + inset + (math.log10(x) - x_low) / span * (PANEL_WIDTH - 2 * inset)

    def py(y):
        value = math.log10(y) if log_y else y
        return MARGIN_TOP + PANEL_HEIGHT - (value - y_low) / (y_high - y_low) * PANEL_HEIGHT

    bottom = MARGIN_TOP + PANEL_HEIGHT
    ticks = [10**d for d in range(int(y_low), int(y_high) + 1)] if log_y else \
        [y_high * k / 5 for k in range(6)]
    for y in ticks:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + PANEL_WIDTH}" y2="{py(y):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{bottom + 18}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{left + PANEL_WIDTH / 2}" y="{bottom + 38}" text-anchor="middle">'
               'ranks (log scale)</text>')
    out.append(f'<text transform="translate({left - 55},{MARGIN_TOP + PANEL_HEIGHT / 2}) '
               f'rotate(-90)" text-anchor="middle">{y_label}</text>')
    if target:
        out.append(f'<line x1="{left}" y1="{py(target):.1f}" x2="{left + PANEL_WIDTH}" '
                   f'y2="{py(target):.1f}" stroke="#2ca02c" stroke-dasharray="2,3"/>')
        out.append(f'<text x="{left + PANEL_WIDTH - 4}" y="{py(target) - 4:.1f}" '
                   f'text-anchor="end" fill="#2ca02c">target {target:g}</text>')
    for name, points in lines.items():
        colour, dashed = STYLES[name]
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"'
                   f'{dash}/>')
        for x, y in points:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
    return out


def step(row, what, name):
    for entry in row[what]["steps"]:
        if entry["step"] == name:
            return entry["median_seconds"] * 1e3
    return 0.0


def markdown(by_ranks):
    lines = ["| ranks | save ms | hand-made ms | save ratio | load ms | hand-made ms | load ratio "
             "| rank 0: lay out ms | write data ms | agreements ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ranks, rows in by_ranks.items():
        save, load, steps = rows["scale_save"], rows["scale_load"], rows["scale_steps"]
        agreements = sum(entry["median_seconds"] for entry in steps["save"]["steps"]
                         if entry["step"].endswith("(agree)")) * 1e3
        lines.append(
            f"| {ranks} | {save['median_seconds'] * 1e3:.2f} "
            f"| {save['limit_median_seconds'] * 1e3:.2f} | {save['ratio']:.2f} "
            f"| {load['median_seconds'] * 1e3:.2f} | {load['limit_median_seconds'] * 1e3:.2f} "
            f"| {load['ratio']:.2f} | {step(steps, 'save', 'lay out'):.2f} "
            f"| {step(steps, 'save', 'write data'):.2f} | {agreements:.2f} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    by_ranks = runs(argv[2:])
    xs = list(by_ranks)
    seconds = {name: [(r, rows[name.replace("_limit", "")]["limit_median_seconds"] * 1e3
                       if name.endswith("_limit") else rows[name]["median_seconds"] * 1e3)
                      for r, rows in by_ranks.items()] for name in STYLES}
    ratios = {name: [(r, rows[name]["ratio"]) for r, rows in by_ranks.items()]
              for name in ("scale_save", "scale_load")}
    elements = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
                'font-family="sans-serif" font-size="12">',
                f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    elements += panel(MARGIN_LEFT, "one checkpoint of 64 KiB per rank", "ms, median round (log)",
                      seconds, xs, True)
    elements += panel(MARGIN_LEFT + PANEL_WIDTH + 110, "against the hand-made equivalent",
                      "ratio, median of the rounds", ratios, xs, False, target=3.0)
    for i, (name, (colour, dashed)) in enumerate(STYLES.items()):
        x = MARGIN_LEFT + i * 170
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        elements.append(f'<line x1="{x}" y1="{HEIGHT - 15}" x2="{x + 30}" y2="{HEIGHT - 15}" '
                        f'stroke="{colour}" stroke-width="2"{dash}/>')
        elements.append(f'<text x="{x + 36}" y="{HEIGHT - 11}">{LABELS[name]}</text>')
    elements.append("</svg>")
    with open(argv[1], "w") as f:
        f.write("\n".join(elements) + "\n")
    print(markdown(by_ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
