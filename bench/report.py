"""The picture of a matrix run: a PNG of plots and a self-contained HTML page around it.

Input is the JSON document bench/matrix.py writes (its "summary" rows: cell,
phase, metric, medians a/b, per-repeat values, ratio). Plots, one row each:
produce MB/s, consume MB/s, produce latency p50/p99, broker CPU-s per GB,
the A/B records/s ratio per cell with the regression threshold (these over the
cells that produce and consume), and produce-to-consume latency p50/p99/p99.9
of the latency cells (`perf e2e` at fixed rates).

    python bench/report.py bench/results/matrix-<timestamp>.json   # re-draw
"""

from __future__ import annotations

import base64
import html
import json
import math
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"A": "#1f77b4", "B": "#ff7f0e"}


def _rows(document: dict[str, Any], phase: str, name: str) -> dict[str, dict[str, Any]]:
    return {r["cell"]: r for r in document["summary"] if r["phase"] == phase and r["metric"] == name}


def _cells(document: dict[str, Any], phase: str = "produce") -> list[str]:
    """The cells that ran `phase` (latency cells run e2e alone, the others produce and consume)."""
    ran = {r["cell"] for r in document["summary"] if r["phase"] == phase}
    return [c for c in document["cells"] if c in ran]


def _dress(ax: Any, cells: list[str], title: str, ylabel: str = "", log: bool = False,
           ncol: int = 1) -> None:
    """Title, axis labels, cell names under the bars, grid and legend of one plot."""
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * (3.0 if log else 1.25))  # headroom for the legend
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels(cells, rotation=35, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", ncol=ncol)


def _bars(ax: Any, document: dict[str, Any], phase: str, name: str, title: str,
          ylabel: str, log: bool = False) -> None:
    cells = _cells(document, phase)
    rows = _rows(document, phase, name)
    width = 0.38
    for offset, side in ((-width / 2, "A"), (width / 2, "B")):
        medians = [(rows.get(c) or {}).get(side.lower()) or 0.0 for c in cells]
        xs = [i + offset for i in range(len(cells))]
        ax.bar(xs, medians, width, color=COLORS[side], label=_label(document, side))
        for x, cell in zip(xs, cells, strict=True):
            values = (rows.get(cell) or {}).get(f"{side.lower()}_values") or []
            ax.plot([x] * len(values), values, ".", color="black", markersize=3)
    _dress(ax, cells, title, ylabel, log)


def _latency(ax: Any, document: dict[str, Any]) -> None:
    cells = _cells(document)
    width = 0.38
    for offset, side in ((-width / 2, "A"), (width / 2, "B")):
        key = side.lower()
        p50 = [(_rows(document, "produce", "p50").get(c) or {}).get(key) or 0.0 for c in cells]
        p99 = [(_rows(document, "produce", "p99").get(c) or {}).get(key) or 0.0 for c in cells]
        xs = [i + offset for i in range(len(cells))]
        ax.bar(xs, p99, width, color=COLORS[side], alpha=0.45,
               label=f"{_label(document, side)} p99")
        ax.bar(xs, p50, width, color=COLORS[side], label=f"{_label(document, side)} p50")
    title = "produce latency (send to ack, at full speed), median of repeats"
    _dress(ax, cells, title, "ms (log)", log=True, ncol=2)


def _e2e(ax: Any, document: dict[str, Any]) -> None:
    cells = _cells(document, "e2e")
    width = 0.38
    for offset, side in ((-width / 2, "A"), (width / 2, "B")):
        key = side.lower()
        xs = [i + offset for i in range(len(cells))]
        for metric, alpha in (("p99_9", 0.25), ("p99", 0.5), ("p50", 1.0)):
            values = [(_rows(document, "e2e", metric).get(c) or {}).get(key) or 0.0 for c in cells]
            ax.bar(xs, values, width, color=COLORS[side], alpha=alpha,
                   label=f"{_label(document, side)} {metric.replace('_', '.')}")
    _dress(ax, cells, "produce-to-consume latency at a fixed rate (perf e2e), median of repeats",
           "ms (log)", log=True, ncol=2)


def _cpu(ax: Any, document: dict[str, Any]) -> None:
    cells = _cells(document)
    width = 0.2
    bars = (("produce", "A", -1.5), ("produce", "B", -0.5), ("consume", "A", 0.5),
            ("consume", "B", 1.5))
    for phase, side, slot in bars:
        rows = _rows(document, phase, "cpu_s_per_gb")
        values = [(rows.get(c) or {}).get(side.lower()) or 0.0 for c in cells]
        ax.bar([i + slot * width for i in range(len(cells))], values, width, color=COLORS[side],
               alpha=1.0 if phase == "produce" else 0.5,
               hatch=None if phase == "produce" else "//",
               label=f"{_label(document, side)} {phase}")
    _dress(ax, cells, "broker CPU-seconds per GB (utime+stime from /proc; "
           "solid produce, hatched consume)", "CPU-s / GB", ncol=2)


def _ratios(ax: Any, document: dict[str, Any]) -> None:
    cells = _cells(document)
    width = 0.38
    for offset, phase, color in ((-width / 2, "produce", "#2ca02c"),
                                 (width / 2, "consume", "#9467bd")):
        rows = _rows(document, phase, "records_per_s")
        values = [(rows.get(c) or {}).get("ratio") or 0.0 for c in cells]
        ax.bar([i + offset for i in range(len(cells))], values, width, color=color,
               label=f"{phase} A/B")
    ax.axhline(1.0, color="black", linewidth=0.8)
    sigma = document.get("noise_log_stdev")
    if sigma:
        ax.axhspan(math.exp(-sigma), math.exp(sigma), color="grey", alpha=0.15,
                   label=f"measured run-to-run noise, 1 sigma (log stdev {sigma:g})")
    threshold = document.get("regression_threshold")
    if threshold:
        ax.axhline(1.0 - threshold, color="red", linestyle="--", linewidth=1,
                   label=f"regression line 1 - {threshold:g}")
    _dress(ax, cells, "A/B throughput ratio (records/s, medians)", "A/B")


def _label(document: dict[str, Any], side: str) -> str:
    return f"{side}: {document[side.lower()]['name']}"


def draw_png(document: dict[str, Any], path: Path) -> Path:
    cells = len(_cells(document))
    plots = 6 if _cells(document, "e2e") else 5
    fig, axes = plt.subplots(plots, 1, figsize=(max(10.0, 0.75 * cells + 4), 4.8 * plots))
    _bars(axes[0], document, "produce", "mb_per_s", "produce throughput (median, dots = repeats)",
          "MB/s")
    _bars(axes[1], document, "consume", "mb_per_s", "consume throughput (median, dots = repeats)",
          "MB/s")
    _latency(axes[2], document)
    _cpu(axes[3], document)
    _ratios(axes[4], document)
    if plots == 6:
        _e2e(axes[5], document)
    fig.suptitle(f"{_label(document, 'A')}  vs  {_label(document, 'B')}   "
                 f"({document['settings']['repeats']} repeats, fresh broker per run)",
                 fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def html_page(document: dict[str, Any], png: Path) -> str:
    image = base64.b64encode(png.read_bytes()).decode("ascii")
    head = "<tr><th>cell</th><th>phase</th><th>metric</th><th>A</th><th>B</th><th>A/B</th></tr>"
    body = []
    for row in document["summary"]:
        ratio = row["ratio"]
        style = ""
        if ratio is not None and row["metric"] == "records_per_s":
            style = ' style="background:#fdd"' if ratio < 0.95 else (
                ' style="background:#dfd"' if ratio > 1.05 else "")
        cells = [row["cell"], row["phase"], row["metric"], _num(row["a"]), _num(row["b"]),
                 _num(ratio, 3)]
        body.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    regressions = "".join(f"<li>{html.escape(r)}</li>" for r in document.get("regressions", []))
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>kbroker bench: {html.escape(_label(document, 'A'))} vs {html.escape(_label(document, 'B'))}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:nth-child(-n+3){{text-align:left}}</style>
</head><body>
<h1>{html.escape(_label(document, 'A'))} vs {html.escape(_label(document, 'B'))}</h1>
<p>A: <code>{html.escape(document['a']['command'])}</code><br>
B: <code>{html.escape(document['b']['command'])}</code></p>
<p>Medians over {document['settings']['repeats']} repeats, a fresh broker per run.
MB = 2<sup>20</sup> bytes, GB = 2<sup>30</sup> bytes. A/B ratio spread (records/s):
<code>{html.escape(json.dumps(document.get('ratio_spread', {})))}</code></p>
{f'<h2>Regressions</h2><ul>{regressions}</ul>' if regressions else ''}
<img src="data:image/png;base64,{image}" style="max-width:100%">
<h2>Table</h2><table>{head}{''.join(body)}</table>
</body></html>
"""


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10000 else f"{value:.{digits}f}"


def write(document: dict[str, Any], stem: Path) -> list[Path]:
    """Write `<stem>.png` and `<stem>.html`; return their paths."""
    png = draw_png(document, stem.with_suffix(".png"))
    page = stem.with_suffix(".html")
    page.write_text(html_page(document, png))
    return [png, page]


if __name__ == "__main__":
    source = Path(sys.argv[1])
    for written in write(json.loads(source.read_text()), source.with_suffix("")):
        print(written)
