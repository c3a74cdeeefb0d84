#!/usr/bin/env python3
"""Draws CPU per operation against the request rate, on log-log axes, as an SVG: the tables that
../shared/bench/rate-sweep.sh prints (one per build), HAProxy and sidecar mode off each a curve.

    bench/rate-curve.py OUT.svg LABEL=TABLE.txt [LABEL=TABLE.txt ...]

A table's rows are `op/s haproxy off off/hp fast-off full-off node`; the row "max" (unthrottled) is drawn at the
op rate given by MAX_RATE (default 40000: about what the sweep's unthrottled runs reached on the 2-core VM). Every
table gives two curves in its colour: the sidecar (solid) and the HAProxy of the same run (dashed). Standard library only.
"""
import math
import os
import sys

W, H, L, R, T, B = 760, 440, 70, 250, 30, 55
COLORS = ["#c0392b", "#2471a3", "#7d3c98", "#b9770e"]


def read(path):
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and (f[0].isdigit() or f[0] == "max"):
            rate = float(os.environ.get("MAX_RATE", "40000")) if f[0] == "max" else float(f[0])
            rows.append((rate, float(f[1]), float(f[2])))
    return rows


def main():
    out, specs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    tables = [(label, read(path)) for label, path in specs]
    curves = []
    for i, (label, rows) in enumerate(tables):
        color = COLORS[i % len(COLORS)]
        curves.append((f"sidecar off, {label}", color, [(r, off) for r, _, off in rows], ""))
        curves.append((f"HAProxy, same run", color, [(r, hp) for r, hp, _ in rows], "6,4"))
    xs = [x for _, _, pts, _ in curves for x, _ in pts]
    ys = [y for _, _, pts, _ in curves for _, y in pts]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    px = lambda x: L + (math.log10(x) - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: H - B - (math.log10(y) - y0) / (y1 - y0) * (H - T - B)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>']
    for d in range(x0, x1 + 1):
        for m in (1, 2, 5):
            v = m * 10 ** d
            if math.log10(v) > x1:
                continue
            s.append(f'<line x1="{px(v):.1f}" y1="{T}" x2="{px(v):.1f}" y2="{H - B}" stroke="#e5e5e5"/>')
            if m == 1 or (m == 2 and v < 1000):
                s.append(f'<text x="{px(v):.1f}" y="{H - B + 16}" text-anchor="middle">{v:,}</text>')
    for d in range(y0, y1 + 1):
        for m in (1, 2, 5):
            v = m * 10 ** d
            if math.log10(v) > y1:
                continue
            s.append(f'<line x1="{L}" y1="{py(v):.1f}" x2="{W - R}" y2="{py(v):.1f}" stroke="#e5e5e5"/>')
            s.append(f'<text x="{L - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    s.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#888"/>')
    s.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">request rate, op/s (log; the last point is unthrottled)</text>')
    s.append(f'<text transform="translate(18,{(T + H - B) / 2}) rotate(-90)" text-anchor="middle">CPU µs per operation (log)</text>')
    for i, (label, color, pts, dash) in enumerate(curves):
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        s.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
        for x, y in pts:
            s.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>')
        ly = T + 14 + 20 * i
        s.append(f'<line x1="{W - R + 12}" y1="{ly - 4}" x2="{W - R + 36}" y2="{ly - 4}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
        s.append(f'<text x="{W - R + 42}" y="{ly}">{label}</text>')
    s.append("</svg>")
    open(out, "w").write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
