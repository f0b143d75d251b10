"""The bounded fuzz of CI (issue 8, item 6): scripts/fuzz/fuzz_opt.py
(mutations of the lit corpus through tilemega-opt, alone, with a RUN line's
passes and with the whole pipeline) and scripts/fuzz/fuzz_lang.py (random
valid `T.*` kernels through tilemega.compile) each run for a fixed budget
with a fixed seed; any crash, hang, assertion or ptxas rejection fails here,
and the saved reproducer is named in the message. Longer runs on demand:

    python scripts/fuzz/fuzz_opt.py  --budget-seconds 600 --seed 7
    python scripts/fuzz/fuzz_lang.py --budget-seconds 600 --seed 7

The budgets (TILEMEGA_FUZZ_SECONDS, default 35 s per fuzzer) keep the pair
near a minute of CI, whose clean build and tests must stay under 15 minutes
on two cores (14.3 minutes with 50 s budgets).
"""

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUDGET = float(os.environ.get("TILEMEGA_FUZZ_SECONDS", "35"))
SEED = 11


@pytest.mark.parametrize("script", ["fuzz_opt.py", "fuzz_lang.py"])
def test_bounded_fuzz_finds_no_failure(tmp_path, script):
    if script == "fuzz_opt.py" and shutil.which("tilemega-opt") is None:
        pytest.fail("tilemega-opt is not on PATH (scripts/tilemega.sh test puts build/bin there)")
    out = tmp_path / "failures"
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "fuzz", script), "--seed", str(SEED),
           "--budget-seconds", str(BUDGET), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUDGET + 240)
    print(proc.stdout[-3000:])
    saved = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert proc.returncode == 0, (f"{' '.join(cmd)} exited {proc.returncode}; failures saved: "
                                  f"{saved}\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
