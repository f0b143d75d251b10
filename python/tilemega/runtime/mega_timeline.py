"""Summaries and pictures of a mega-kernel timeline, measured or simulated.

Input: one row per entry, (start_ns, end_ns, cta, sm) (`MegaKernel.timeline()`
or `SimResult.rows()`), plus the `mega` dict for task names and bodies. A row
that is all zeros (never written: the entry did not run, or the kernel was
compiled without a timeline) or has cta < 0 is counted as missing.

    s = summarize(mk.timeline(), mk.meta); print(format_summary(s))
    render(mk.timeline(), mk.meta, "step.png")         # needs matplotlib
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from . import mega_meta as mm
from .mega_sim import format_ns

LEGEND = 20      # task bodies listed by name (tab20 has 20 distinct colours)


@dataclass
class WorkerStats:
    cta: int
    entries: int
    busy_ns: float
    idle_ns: float                       # span - busy, including head and tail
    gaps_ns: float                       # idle between two of its entries (bubbles)
    largest_gap_ns: float
    largest_gap_between: Optional[Tuple[int, int]]   # the entries around the largest bubble
    utilisation: float


@dataclass
class TimelineSummary:
    graph: str
    origin_ns: float                     # earliest start; times below are relative to it
    span_ns: float
    recorded: int
    missing: int
    busy_by_kind: Dict[str, float]       # task body -> summed entry durations
    workers: List[WorkerStats] = field(default_factory=list)


def _rows(rows, meta) -> List[Tuple[float, float, int, int]]:
    rows = rows.tolist() if hasattr(rows, "tolist") else list(rows)
    n = len(meta["entries"]["task"])
    if len(rows) != n:
        raise ValueError(f"timeline: expected {n} rows (one per entry), got {len(rows)}")
    return [(float(r[0]), float(r[1]), int(r[2]), int(r[3])) for r in rows]


def _recorded(row) -> bool:
    start, end, cta, sm = row
    return cta >= 0 and end >= start and any(row)


def summarize(rows, meta) -> TimelineSummary:
    rows = _rows(rows, meta)
    done = [(e, r) for e, r in enumerate(rows) if _recorded(r)]
    origin = min((r[0] for _, r in done), default=0.0)
    span = max((r[1] for _, r in done), default=origin) - origin
    by_kind: Dict[str, float] = {}
    per_cta: Dict[int, List[Tuple[float, float, int]]] = {}
    for e, (start, end, cta, _) in done:
        kind = mm.task_kind(meta, e)
        by_kind[kind] = by_kind.get(kind, 0.0) + (end - start)
        per_cta.setdefault(cta, []).append((start - origin, end - origin, e))
    ctas = range(max([int(meta["workers"])] + [c + 1 for c in per_cta]))
    stats = []
    for cta in ctas:
        spans = sorted(per_cta.get(cta, []))
        busy = sum(end - start for start, end, _ in spans)
        gaps, largest, between = 0.0, 0.0, None
        for (_, prev_end, a), (start, _, b) in zip(spans, spans[1:]):
            gap = start - prev_end
            if gap > 0:
                gaps += gap
                if gap > largest:
                    largest, between = gap, (a, b)
        stats.append(WorkerStats(cta, len(spans), busy, span - busy, gaps, largest, between,
                                 busy / span if span > 0 else 0.0))
    return TimelineSummary(mm.graph_name(meta), origin, span, len(done), len(rows) - len(done),
                           dict(sorted(by_kind.items(), key=lambda kv: -kv[1])), stats)


def format_summary(s: TimelineSummary, meta=None, worst: int = 5) -> str:
    """Text report; with `meta` the largest bubbles name the tasks around them."""
    lines = [f"mega-kernel '{s.graph}' timeline: span {format_ns(s.span_ns)}, "
             f"{s.recorded} entries recorded" + (f", {s.missing} missing" if s.missing else "")]
    total = sum(s.busy_by_kind.values())
    lines.append("busy time by task body:")
    for kind, ns in list(s.busy_by_kind.items())[:LEGEND]:
        lines.append(f"  {kind:<32} {format_ns(ns):>10}  {ns / total if total else 0:6.1%}")
    rest = list(s.busy_by_kind.values())[LEGEND:]
    if rest:
        label = f"({len(rest)} more bodies)"
        lines.append(f"  {label:<32} {format_ns(sum(rest)):>10}  {sum(rest) / total:6.1%}")
    util = [w.utilisation for w in s.workers]
    if util:
        lines.append(f"utilisation: min {min(util):.1%} / mean {sum(util) / len(util):.1%} / "
                     f"max {max(util):.1%} over {len(util)} CTAs")
        lines.append(f"bubbles (idle between two entries of a CTA): total "
                     f"{format_ns(sum(w.gaps_ns for w in s.workers))}, idle incl. head and tail "
                     f"{format_ns(sum(w.idle_ns for w in s.workers))}")
    for w in sorted(s.workers, key=lambda w: -w.largest_gap_ns)[:worst]:
        if w.largest_gap_ns <= 0:
            break
        around = ""
        if meta is not None and w.largest_gap_between:
            a, b = w.largest_gap_between
            around = f" between {mm.short_label(meta, a)} and {mm.short_label(meta, b)}"
        lines.append(f"  CTA {w.cta}: largest bubble {format_ns(w.largest_gap_ns)}{around}; "
                     f"bubbles {format_ns(w.gaps_ns)}, utilisation {w.utilisation:.1%}")
    return "\n".join(lines)


def render(rows, meta, path, title: Optional[str] = None) -> str:
    """Draw CTA (y) by time (x), one colour per task body, into the PNG `path`."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PolyCollection
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
        from matplotlib import colormaps
    except ImportError:
        raise ImportError("drawing a timeline needs matplotlib (pip install matplotlib); "
                          "summarize() and format_summary() work without it") from None
    rows = _rows(rows, meta)
    s = summarize(rows, meta)
    kinds = list(s.busy_by_kind)
    palette = colormaps["tab20"]
    colour = {k: palette(i % 20) for i, k in enumerate(kinds)}
    boxes: Dict[str, list] = {k: [] for k in kinds}
    for e, row in enumerate(rows):
        if not _recorded(row):
            continue
        x0, x1 = (row[0] - s.origin_ns) / 1e3, (row[1] - s.origin_ns) / 1e3   # microseconds
        y0, y1 = row[2] - 0.4, row[2] + 0.4
        boxes[mm.task_kind(meta, e)].append([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
    ctas = len(s.workers)
    shown = kinds[:LEGEND]        # beyond that the palette repeats anyway
    legend_rows = -(-len(shown) // 4)
    fig = Figure(figsize=(12, min(40.0, max(3.0, 1.5 + 0.12 * ctas)) + 0.25 * legend_rows))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for k in kinds:
        ax.add_collection(PolyCollection(boxes[k], facecolors=[colour[k]], edgecolors="none"))
    ax.set_xlim(0, max(s.span_ns / 1e3, 1e-3))
    ax.set_ylim(-1, max(ctas, 1))
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_ylabel("CTA")
    ax.set_title(title or f"{s.graph}: {format_ns(s.span_ns)}")
    if shown:
        ax.legend(handles=[Patch(color=colour[k], label=k) for k in shown], ncol=4,
                  loc="upper center", bbox_to_anchor=(0.5, -0.6 / (0.75 * fig.get_figheight())),
                  fontsize="small", frameon=False)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return str(path)
