"""Builds the mega-kernel artifacts: the Llama-3.2-1B-shaped decode step
(16 layers) and the 4-operator MLP chain as persistent kernels, the same
bodies launched one per operator, and graphs of empty tasks.

    python examples/mega_decode.py out        # here (needs the compiler)
    python bench/decode.py --artifacts out    # on the GPU machine
"""

import sys
import time

from tilemega import mega
from tilemega.mega.artifacts import (compile_empty, compile_graph,
                                     compile_per_operator)

WORKERS = 131  # + 1 scheduler CTA = 132 SMs of an H100/H200


def build_all(out, layers=16, timeline=False):
    cfg = mega.LlamaConfig(layers=layers)
    step = mega.decode_graph(cfg, workers=WORKERS)
    # The MLP chain as the issue states it: four operators, four tasks.
    mlp = mega.mlp_graph(workers=WORKERS, fuse=False)
    paths = [
        # Attention's cost is fixed at one KV length here, so the AOT-only
        # schedule is the main one; the JIT variant exercises the scheduler.
        compile_graph(step, out, name="mega_decode", mega_policy="aot",
                      mega_timeline=timeline),
        compile_graph(step, out, name="mega_decode_jit", mega_policy="auto"),
        # L2 prefetch of the next entry's weights while waiting: measured
        # slower on the H200 (docs/benchmarks.md), so off by default.
        compile_graph(step, out, name="mega_decode_prefetch", mega_policy="aot",
                      mega_prefetch_bytes=131072),
        compile_graph(mlp, out, name="mega_mlp", mega_timeline=timeline),
        compile_graph(mega.mlp_graph(workers=WORKERS), out, name="mega_mlp_fused"),
        compile_graph(mega.decode_graph(cfg, workers=WORKERS, fuse=False), out,
                      name="mega_decode_unfused", mega_policy="aot"),
        compile_graph(step, out, name="mega_decode_timeline", mega_policy="aot",
                      mega_timeline=True),
        compile_per_operator(step, out, "ops_decode"),
        compile_per_operator(mlp, out, "ops_mlp"),
    ]
    for tasks in (WORKERS, 8 * WORKERS, 32 * WORKERS):
        paths.append(compile_empty(tasks, out, workers=WORKERS))
    return paths


if __name__ == "__main__":
    start = time.time()
    for path in build_all(sys.argv[1] if len(sys.argv) > 1 else "out"):
        print(path)
    print(f"built in {time.time() - start:.1f} s")
