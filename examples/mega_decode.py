"""Builds the mega-kernel artifacts: the Llama-3.2-1B-shaped decode step
(16 layers) and the 4-operator MLP chain as persistent kernels, the same
bodies launched one per operator, graphs of empty tasks, and the small
artifacts of test/pytest/test_mega_gpu.py (build_test_artifacts).

    python examples/mega_decode.py out                # here (needs the compiler)
    python examples/mega_decode.py --tests-only out   # only the test artifacts
    python bench/decode.py --artifacts out            # on the GPU machine
    python -m pytest test/pytest/test_mega_gpu.py     # there too (TILEMEGA_ARTIFACTS=out)
"""

import sys
import warnings
import time
from dataclasses import replace

from tilemega import mega
from tilemega.mega import bodies
from tilemega.mega.artifacts import (compile_empty, compile_graph,
                                     compile_per_operator)

WORKERS = 131  # + 1 scheduler CTA = 132 SMs of an H100/H200

# The small decode step of the GPU tests: 2 layers, 4 query heads a kv head
# (the attention body needs head_dim a multiple of 64 / (heads / kv_heads)
# warps' columns), 128 keys in 2 splits of 64.
TEST_DECODE = dict(layers=2, hidden=256, intermediate=512, heads=8, kv_heads=2,
                   head_dim=64, kv_len=128)
TEST_WORKERS = 8
# More CTAs than an H200 keeps resident (132 SMs x at most 8 CTAs of 256 threads).
TEST_TOO_WIDE = 2047


def build_test_artifacts(out):
    """The artifacts only test/pytest/test_mega_gpu.py uses (names test_mega_*):

    test_mega_small_{aot,auto,jit}  the small decode step with each queue
                                    policy, with a timeline
    test_mega_watchdog{,_jit}       a small MLP chain, watchdog 200 ms (the test
                                    raises an event's trigger so a wait hangs)
    test_mega_too_wide              2047 workers of empty tasks: a grid no GPU
                                    keeps resident (the runtime must refuse it)
    test_mega_misplaced_kv          the small decode step writing each layer's
                                    new k/v one row early (misplaced_kv_graph):
                                    the cache-row check must fail it
    """
    import tilemega
    from tilemega.mega.artifacts import empty_graph_mlir

    cfg = mega.LlamaConfig(**TEST_DECODE)
    paths = [compile_graph(mega.decode_graph(cfg, workers=TEST_WORKERS, attention_splits=2),
                           out, name=f"test_mega_small_{policy}", mega_policy=policy,
                           mega_timeline=True)
             for policy in ("aot", "auto", "jit")]
    for policy, suffix in (("aot", ""), ("jit", "_jit")):
        paths.append(compile_graph(mega.mlp_graph(hidden=256, intermediate=512,
                                                  workers=TEST_WORKERS),
                                   out, name=f"test_mega_watchdog{suffix}", mega_policy=policy,
                                   mega_watchdog_ms=200))
    # A grid no GPU keeps resident, built only to be refused: that the
    # CTAs-an-SM hint spills its registers (a CompileWarning) is moot.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tilemega.CompileWarning)
        wide = tilemega.compile(empty_graph_mlir(TEST_TOO_WIDE, TEST_TOO_WIDE), chip="sm_90a",
                                name="test_mega_too_wide", mega_policy="aot",
                                mega_max_ctas=2 * TEST_TOO_WIDE)
    paths.append(wide.save(out))
    paths.append(compile_graph(misplaced_kv_graph(cfg, workers=TEST_WORKERS, attention_splits=2),
                               out, name="test_mega_misplaced_kv", mega_policy="aot"))
    return paths


def misplaced_kv_graph(cfg, **options):
    """mega.decode_graph(cfg, rope_in_attention=False, fused_glu=False,
    **options) made wrong on purpose: every layer's rope_kv_append writes
    the new token's k and v at position kv_len - 2 instead of kv_len - 1,
    and attention still reads all kv_len positions. The output moves by
    little (one key of kv_len is stale, one is replaced), so only a check of
    the written cache rows and of the positions a step must not touch shows
    it (run_mega.check_graph must fail it). The layers keep RoPE and the
    cache row a task of their own (the default puts them in the attention),
    so that exactly the row written changes, and the 7-task layer's MLP
    (the artifact as checked since 2026-12-06)."""
    graph = mega.decode_graph(cfg, rope_in_attention=False, fused_glu=False, **options)
    wrong = bodies.rope_kv_append(cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.kv_len,
                                  cfg.kv_len - 2, threads=graph.threads, emit=False)
    right = bodies.rope_kv_append(cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.kv_len,
                                  cfg.kv_len - 1, threads=graph.threads, emit=False)
    moved = 0
    for i, task in enumerate(graph.tasks):
        if task.body.name == right.name:
            graph.tasks[i] = replace(task, body=wrong)
            moved += 1
    if moved != cfg.layers:
        raise ValueError(f"misplaced_kv_graph: found {moved} {right.name} tasks, expected one "
                         f"a layer ({cfg.layers}): decode_graph changed")
    return graph


def build_all(out, layers=16, timeline=False, tests=True):
    cfg = mega.LlamaConfig(layers=layers)
    step = mega.decode_graph(cfg, workers=WORKERS)
    # The MLP chain as the issue states it: four operators, four tasks.
    mlp = mega.mlp_graph(workers=WORKERS, fuse=False)
    paths = [
        # Attention's cost is fixed at one KV length here, so the AOT-only
        # schedule is the main one; the JIT variant exercises the scheduler.
        # Two CTAs an SM (263 workers), as the generation graph runs: 0.902
        # against 0.961 ms with one (H100, docs/benchmarks.md); the one-CTA
        # build stays as a variant, the others below keep one CTA an SM.
        compile_graph(mega.decode_graph(cfg, ctas_per_sm=2), out, name="mega_decode",
                      mega_policy="aot", mega_timeline=timeline),
        compile_graph(step, out, name="mega_decode_1cta", mega_policy="aot"),
        compile_graph(step, out, name="mega_decode_jit", mega_policy="auto"),
        # L2 prefetch of the next entry's weights while waiting: measured
        # slower on the H200 (docs/benchmarks.md), so off by default.
        compile_graph(step, out, name="mega_decode_prefetch128k", mega_policy="aot",
                      mega_prefetch_bytes=131072),
        compile_graph(step, out, name="mega_decode_prefetch256k", mega_policy="aot",
                      mega_prefetch_bytes=262144),
        compile_graph(mlp, out, name="mega_mlp", mega_timeline=timeline),
        # The MLP as the generation graph runs it: the activation in the
        # gate/up projection, two CTAs an SM (50.5 against 53.3 us for
        # gemv_rmsnorm + gemv_silu at one CTA an SM, H100, docs/benchmarks.md).
        compile_graph(mega.mlp_graph(fused_glu=True, ctas_per_sm=2), out,
                      name="mega_mlp_fused"),
        compile_graph(mega.decode_graph(cfg, workers=WORKERS, fuse=False), out,
                      name="mega_decode_unfused", mega_policy="aot"),
        compile_graph(step, out, name="mega_decode_timeline", mega_policy="aot",
                      mega_timeline=True),
        compile_per_operator(step, out, "ops_decode"),
        compile_per_operator(mlp, out, "ops_mlp"),
    ]
    for tasks in (WORKERS, 8 * WORKERS, 32 * WORKERS):
        paths.append(compile_empty(tasks, out, workers=WORKERS))
        paths.append(compile_empty(tasks, out, workers=WORKERS, waited=True))
    if tests:
        paths += build_test_artifacts(out)
    return paths


if __name__ == "__main__":
    start = time.time()
    args = [a for a in sys.argv[1:] if a != "--tests-only"]
    build = build_test_artifacts if "--tests-only" in sys.argv[1:] else build_all
    for path in build(args[0] if args else "out"):
        print(path)
    print(f"built in {time.time() - start:.1f} s")
