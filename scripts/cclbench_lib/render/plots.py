"""Plots people can read: P2P heatmaps and size sweeps. matplotlib is optional; report.load_pyplot()
hands in pyplot (Agg) or the report says why there are no plots.

Heatmap: integer GPU ticks, the value written in every cell, a colour scale from 0 to the largest
value (the caller may share it across the tests of one unit), no offset or scientific notation on
the colour bar, and unmeasured cells hatched and labelled "n/a" (never drawn as 0).
Lines: one line per sweep point, physical ceilings as dashed horizontal lines, the x axis on
powers of two labelled with the sizes (8K .. 64M).
"""

import io
import math

from ..base.files import write_atomic
from ..base.values import format_size


MISSING_LABEL = "n/a"
MAX_SIZE_TICKS = 16


def cell_text(value):
    """The number written in a heatmap cell: three significant digits, never exponent notation."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def plain_formatter():
    from matplotlib.ticker import ScalarFormatter
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    return formatter


def heatmap_figure(pyplot, title, matrix, unit, vmax=None, higher_is_better=True):
    """(figure, axis, image, colorbar) of an N x N matrix (rows src, columns dst; None = not measured)."""
    from matplotlib.patches import Rectangle
    size = len(matrix)
    values = [[math.nan if v is None else float(v) for v in row] for row in matrix]
    measured = [v for row in values for v in row if not math.isnan(v)]
    top = vmax if vmax is not None else (max(measured) if measured else 1.0)
    if not top > 0:
        top = 1.0
    import matplotlib
    colour_map = matplotlib.colormaps["viridis" if higher_is_better else "viridis_r"].copy()
    colour_map.set_bad("white")
    figure, axis = pyplot.subplots(figsize=(1.6 + 0.62 * max(size, 4), 0.9 + 0.55 * max(size, 4)))
    image = axis.imshow(values, cmap=colour_map, vmin=0.0, vmax=top, interpolation="nearest")
    bar = figure.colorbar(image, ax=axis, label=unit, format=plain_formatter())
    axis.set_xticks(range(size), [str(i) for i in range(size)])
    axis.set_yticks(range(size), [str(i) for i in range(size)])
    axis.set_xlabel("destination GPU")
    axis.set_ylabel("source GPU")
    axis.set_title(title)
    font = 8 if size <= 8 else (6 if size <= 16 else 4)
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            if math.isnan(value):
                axis.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.6", linewidth=0))
                axis.text(j, i, MISSING_LABEL, ha="center", va="center", fontsize=font, color="0.3")
            else:
                shade = min(max(value / top, 0.0), 1.0)
                if not higher_is_better:
                    shade = 1.0 - shade
                axis.text(j, i, cell_text(value), ha="center", va="center", fontsize=font,
                          color="black" if shade > 0.55 else "white")
    return figure, axis, image, bar


def size_ticks(sizes):
    """Powers of two from the smallest to the largest size, thinned to at most MAX_SIZE_TICKS."""
    sizes = [s for s in sizes if isinstance(s, int) and s > 0]
    if not sizes:
        return []
    low, high = int(math.floor(math.log2(min(sizes)))), int(math.ceil(math.log2(max(sizes))))
    ticks = [1 << e for e in range(low, high + 1)]
    step = max(1, math.ceil(len(ticks) / MAX_SIZE_TICKS))
    return ticks[::step]


def lines_figure(pyplot, title, ylabel, series, logy=False, ceilings=()):
    """(figure, axis): one line per (label, [(size, value or None)]) series; ceilings [(label, value)]
    drawn dashed. Missing values leave a gap in their line, never a 0."""
    from matplotlib.ticker import FixedLocator, NullLocator
    figure, axis = pyplot.subplots(figsize=(8, 4.5))
    sizes = []
    for label, points in series:
        xs = [x for x, y in points]
        ys = [math.nan if y is None else y for x, y in points]
        sizes += xs
        if any(not math.isnan(y) for y in ys):
            axis.plot(xs, ys, marker="o", markersize=3, label=label)
    for label, value in ceilings:
        axis.axhline(value, linestyle="--", color="0.35", linewidth=1, label=label)
    axis.set_xscale("log", base=2)
    ticks = size_ticks(sizes)
    if ticks:
        axis.xaxis.set_major_locator(FixedLocator(ticks))
        axis.set_xticks(ticks, [format_size(t) for t in ticks], rotation=45, fontsize=8)
        axis.xaxis.set_minor_locator(NullLocator())
    if logy:
        axis.set_yscale("log")
    else:
        axis.set_ylim(bottom=0)
        axis.yaxis.set_major_formatter(plain_formatter())
    axis.set_xlabel("size (bytes, nccl-tests size column: requested -b..-e)")
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.grid(True, which="major", alpha=0.3)
    if series or ceilings:
        axis.legend(fontsize=7)
    return figure, axis


def save(pyplot, figure, path):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    pyplot.close(figure)
    write_atomic(path, buffer.getvalue())


def plot_heatmap(pyplot, path, title, matrix, unit, vmax=None, higher_is_better=True):
    figure = heatmap_figure(pyplot, title, matrix, unit, vmax, higher_is_better)[0]
    save(pyplot, figure, path)


def plot_lines(pyplot, path, title, ylabel, series, logy=False, ceilings=()):
    figure = lines_figure(pyplot, title, ylabel, series, logy, ceilings)[0]
    save(pyplot, figure, path)
