"""`python -m tilemega.runtime.mega_sim ART.json [--runs N] [--workers W]`: the report.

Exit status 0 when the schedule is deadlock-free, 1 when it is not (the error
names the tasks and events), 2 for an unreadable artifact.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from .. import mega_meta as mm
from .check import ScheduleError, check_deadlock_free, format_report


def load_meta(path: str, kernel: Optional[str] = None) -> dict:
    """The `mega` dict from an artifact JSON (its kernel with one, or `kernel`),
    or from a JSON file holding a bare `mega` dict. Needs no PTX and no GPU."""
    with open(path, "rb") as f:
        doc = json.loads(f.read().decode("utf-8"))
    if isinstance(doc, dict) and "aot" in doc:
        return mm.validate(doc, source=path)
    kernels = doc.get("kernels") if isinstance(doc, dict) else None
    found = [k for k in kernels or [] if isinstance(k, dict) and "mega" in k
             and (kernel is None or k.get("name") == kernel)]
    if len(found) != 1:
        names = [k.get("name") for k in kernels or [] if isinstance(k, dict) and "mega" in k]
        raise ValueError(f"{path}: expected one mega-kernel"
                         f"{' named ' + repr(kernel) if kernel else ''}, found {names}")
    meta = dict(found[0]["mega"])
    meta.setdefault("graph", found[0].get("name", "?"))
    return mm.validate(meta, f"kernels[{kernels.index(found[0])}].mega", path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilemega.runtime.mega_sim",
                                     description="Simulate a mega-kernel schedule on the CPU "
                                                 "and check that it cannot deadlock.")
    parser.add_argument("artifact", help="artifact JSON (or a JSON file holding a mega dict)")
    parser.add_argument("--kernel", help="which mega-kernel, when the artifact has several")
    parser.add_argument("--runs", type=int, default=200, help="randomised runs (default 200)")
    parser.add_argument("--workers", type=int, help="simulate with this many workers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeline", metavar="PNG", help="draw the nominal run's timeline")
    args = parser.parse_args(argv)
    try:
        meta = load_meta(args.artifact, args.kernel)
        report = check_deadlock_free(meta, runs=args.runs, seed=args.seed, workers=args.workers)
    except ScheduleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    if args.timeline:
        from .. import mega_timeline
        try:
            mega_timeline.render(report.nominal.rows(), meta, args.timeline)
        except ImportError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"timeline: {args.timeline}")
    return 0
