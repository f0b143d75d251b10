#!/usr/bin/env python3
"""Fuzzing of the `T.*` frontend and the whole compiler with random valid kernels.

hypothesis draws kernel specs (lang_kernels.py: element-wise, reduction and
GEMM kernels with random shapes, tile sizes, dtypes, transposes, pipeline
stages and thread counts); each becomes a `@tilemega.jit` kernel that a
worker process compiles with `kernel.compile()` (chip sm_90a, ptxas
assembling the PTX when it is installed). Outcomes:

  ok        compiled, and ptxas accepted the PTX
  rejected  a clean refusal: TileLangError or CompileError (a diagnostic)
  crash     the worker process died (segfault, abort)
  hang      no answer within --timeout seconds
  assert    a CompileError carrying an assertion / LLVM fatal error
  ptxas     ptxas rejected PTX that we emitted
  internal  any other Python exception (a bug in our Python)

Failures are saved under --out as `kernel.py` (run it to reproduce) with
the worker's output; hypothesis then shrinks the failing spec, and the
smaller failing kernels are saved too. The run is deterministic for a seed
(up to where the budget cuts it).

    python scripts/fuzz/fuzz_lang.py --budget-seconds 600 --seed 7
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import tempfile
from typing import Dict, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fuzz_common import Budget, Failure, FailureStore, Report, failure_signature  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# Examples per hypothesis run; runs repeat with derived seeds until the budget
# is spent, so a long budget is never cut short by hypothesis stopping.
EXAMPLES_PER_ROUND = 40


# ---------------------------------------------------------------------------
# The worker: compiles one kernel per request, in its own process, so that a
# segfault or abort in the native compiler is an outcome, not our death.
# ---------------------------------------------------------------------------

def worker_main() -> int:
    import contextlib
    import traceback
    import warnings

    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # whatever the compiler prints must not corrupt replies
    warnings.simplefilter("ignore")
    import tilemega
    from tilemega.language import TileLangError

    for line in sys.stdin:
        source = json.loads(line)["source"]
        outcome, message = "ok", ""
        try:
            namespace = {"__name__": "fuzz_kernel"}
            with contextlib.redirect_stdout(sys.stderr):
                exec(compile(source, "<fuzz_kernel>", "exec"), namespace)
                namespace["kernel"].compile()
        except tilemega.CompileError as e:
            message = str(e)
            if "ptxas rejected" in message:
                outcome = "ptxas"
            elif any(m in message for m in ("Assertion", "LLVM ERROR", "UNREACHABLE")):
                outcome = "assert"
            else:
                outcome = "rejected"
        except TileLangError as e:
            outcome, message = "rejected", str(e)
        except Exception:  # noqa: BLE001  (any other exception is the finding)
            outcome, message = "internal", traceback.format_exc()
        reply.write(json.dumps({"outcome": outcome, "message": message[-4000:]}) + "\n")
    return 0


class Worker:
    """A compile server process, restarted after a crash or a hang."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.proc = None
        self.log = None

    def _start(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ)
        env.setdefault("TILEMEGA_CACHE_DIR", tempfile.mkdtemp(prefix="tilemega-fuzz-cache-"))
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env)

    def _stderr_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-6000:]

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def compile(self, source: str) -> Tuple[str, str]:
        if self.proc is None:
            self._start()
        self.proc.stdin.write(json.dumps({"source": source}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.stop()
            return "hang", f"no answer after {self.timeout:g} s"
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait()
            tail = self._stderr_tail()
            self.proc = None
            return "crash", f"worker exited with status {rc}\n{tail}"
        answer = json.loads(line)
        return answer["outcome"], answer["message"]


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------

def _first_line(message: str) -> str:
    """The gist of a rejection, for the summary's list of common ones."""
    for line in message.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()[:120]
    lines = [l for l in message.splitlines() if l.strip()]
    text = lines[0] if lines else message
    return text.split(": ", 1)[-1][:120]


def fuzz(seed: int, budget_seconds: float, out_dir: Optional[str] = None, *,
         timeout: float = 60.0, log=print) -> Report:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from lang_kernels import kernel_source, kernel_specs

    out_dir = out_dir or os.path.join(tempfile.gettempdir(), f"tilemega-fuzz-lang-{seed}")
    store = FailureStore(out_dir)
    report = Report("fuzz_lang", seed, budget_seconds)
    budget = Budget(budget_seconds)
    worker = Worker(timeout)
    results: Dict[str, Tuple[str, str]] = {}
    rejections = collections.Counter()

    def check(spec):
        source = kernel_source(spec)
        if source in results:
            outcome, message = results[source]
        elif budget.expired():
            return  # budget spent: let hypothesis finish the round cheaply
        else:
            outcome, message = worker.compile(source)
            results[source] = (outcome, message)
            report.inputs += 1
            report.count(spec["kind"], outcome)
            if outcome == "rejected":
                rejections[f"{spec['kind']}: {_first_line(message)}"] += 1
            elif outcome != "ok":
                signature = failure_signature(message)
                path = store.save(outcome, signature,
                                  {"kernel.py": source, "output.txt": message},
                                  {"seed": seed, "spec": spec})
                report.failures.append(Failure(outcome, repr(spec), path, signature))
                log(f"FAILURE {outcome}: {spec}: {signature}")
        if outcome not in ("ok", "rejected"):
            raise AssertionError(f"{outcome}: {spec}")

    round_ = 0
    try:
        while not budget.expired():
            run = settings(max_examples=EXAMPLES_PER_ROUND, deadline=None, database=None,
                           phases=[Phase.generate, Phase.shrink], print_blob=False,
                           suppress_health_check=list(HealthCheck))(
                hypothesis_seed(seed * 100003 + round_)(given(kernel_specs())(check)))
            try:
                run()
            except Exception:  # noqa: BLE001  (recorded in report.failures by check)
                pass
            round_ += 1
    finally:
        worker.stop()
    report.seconds = budget.elapsed()
    from tilemega.compiler import find_ptxas  # noqa: E402  (after the path is set)
    if not find_ptxas():
        report.notes.append("ptxas not found: PTX was not assembled")
    report.notes.append(f"{round_} hypothesis rounds of {EXAMPLES_PER_ROUND} examples; "
                        f"{len(results)} distinct kernels; timeout {timeout:g} s")
    for text, n in rejections.most_common(8):
        report.notes.append(f"rejected x{n}: {text}")
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-seconds", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds one compile may take (default 60)")
    parser.add_argument("--out", default=None, help="folder for failing kernels "
                        "(default: $TMPDIR/tilemega-fuzz-lang-SEED)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main()
    report = fuzz(args.seed, args.budget_seconds, args.out, timeout=args.timeout)
    print(report.summary())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
