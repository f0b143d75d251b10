"""Times the prompt's prefill of two builds of one prefill artifact, in one
process on the same tensors: a probe for issue 9's time to first token
(bench/generate.py times the whole generation).

    PYTHONPATH=python python3 bench/prefill/time_ab.py OLD.json NEW.json [ROWS ...]

Both artifacts are examples/generation.py's prefill of one config (their
file names say which). For each prompt length (default 37, 300, 511 rows:
one chunk partly used, two chunks, the 512-token prompt of
bench/generate.py), both builds fill the caches from the chunks' CUDA
graph; the two caches must agree (relative L2 of the k/v rows written,
< 0.01: the float64 check is examples/gpu_check.py's), then each is timed
(wall clock around a synchronised replay, median of 15, the builds
alternated). Writes $OUT/prefill_time_ab.json.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _path in (os.path.join(ROOT, "python"), os.path.join(ROOT, "examples"),
              os.path.join(ROOT, "bench")):
    sys.path.insert(0, _path)

import torch  # noqa: E402

import common  # noqa: E402
import generation  # noqa: E402
from tilemega.mega import generation_reference as ref  # noqa: E402
from tilemega.mega.prefill import Prefill  # noqa: E402


def main():
    old, new = sys.argv[1], sys.argv[2]
    rows = [int(r) for r in sys.argv[3:]] or [37, 300, 511]
    cfg = generation.config_of(old)
    tensors = ref.make_tensors(cfg, seed=0)
    builds = {"old": Prefill(cfg, tensors, old), "new": Prefill(cfg, tensors, new)}
    names = ref.cache_names(cfg)
    result = dict(run=common.run_info(), device=torch.cuda.get_device_name(),
                  old=old, new=new, rows={})
    for n in rows:
        caches = {}
        for tag, pre in builds.items():
            for name in names:
                tensors[name].zero_()
            pre.run(n)
            torch.cuda.synchronize()
            caches[tag] = {name: tensors[name].clone() for name in names}
        diff = max(common.rel_l2(caches["new"][m], caches["old"][m].double()) for m in names)
        times = {tag: [] for tag in builds}
        for _ in range(15):
            for tag, pre in builds.items():
                torch.cuda.synchronize()
                began = time.perf_counter()
                pre.run(n)
                torch.cuda.synchronize()
                times[tag].append((time.perf_counter() - began) * 1e3)
        med = {tag: sorted(v)[7] for tag, v in times.items()}
        result["rows"][n] = dict(ms=med, all_ms=times, caches_rel_l2=diff)
        print(f"{n:5} rows: old {med['old']:.3f} ms, new {med['new']:.3f} ms "
              f"({med['old'] / med['new']:.2f}x), caches differ by {diff:.3g}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "prefill_time_ab.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
