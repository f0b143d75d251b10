"""The catalogue of every artifact we ship: the example kernels
(run_examples.EXAMPLES), the benchmark GEMMs (bench/build_artifacts.names()),
the mega graphs (mega_decode.build_all) and the generation graphs
(generation.CONFIGS) and the graphs of several ranks (mega_peers.GRAPHS;
generation_tp.CHECKED, a generation graph's ranks on one GPU, has its kind
and check here but is not compiled by compile_all yet).
One list, read by the main job
that builds them, by `gpu_check.py` that judges them on the GPU and by the
CI test that binds those verdicts to the PTX they judged
(test/pytest/test_gpu_results.py).

    python examples/shipped.py OUT_DIR     # compile everything into OUT_DIR

Compiling needs the built compiler package; listing needs nothing.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _path in (HERE, os.path.join(ROOT, "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# Kinds of artifact, each with its own GPU check in gpu_check.py.
EXAMPLE, BENCH, MEGA, OPS, EMPTY, GENERATION, PEERS, RANKS = (
    "example", "bench", "mega", "ops", "empty", "generation", "peers", "ranks")


def example_names():
    import run_examples
    return [name for name, _, _ in run_examples.EXAMPLES]


def bench_names():
    import build_artifacts
    return build_artifacts.names()


def compile_examples(out):
    """{artifact name: json path} of the example kernels."""
    import run_examples
    return run_examples.compile_all(out)


def compile_bench(out):
    import build_artifacts

    return {name: build_artifacts.compile_one(name).save(out)
            for name in build_artifacts.names()}


def compile_mega(out):
    """{artifact name: json path} of every mega artifact build_all writes
    (persistent kernels, per-operator artifacts, empty graphs, test graphs)."""
    import mega_decode

    paths = {}
    for path in mega_decode.build_all(out):
        if path.endswith(".launches.json"):   # the per-operator artifact's launch list
            name = os.path.basename(path)[:-len(".launches.json")]
            paths[name] = os.path.join(out, name + ".json")
        else:
            paths[os.path.basename(path)[:-len(".json")]] = path
    return paths


def generation_names():
    import generation
    return generation.names()


def compile_generation(out):
    """{artifact name: json path} of the generation graphs and their
    per-operator artifacts (generation.py)."""
    import generation
    return {os.path.basename(p)[:-len(".json")]: p for p in generation.build_all(out)}


def peers_names():
    import mega_peers
    return list(mega_peers.GRAPHS)


def compile_peers(out):
    """{artifact name: json path} of the graphs of several ranks (mega_peers.py)."""
    import mega_peers
    return {os.path.basename(p)[:-len(".json")]: p for p in mega_peers.build_all(out)}


def ranks_names():
    import generation_tp
    return list(generation_tp.CHECKED)


def compile_ranks(out):
    """{artifact name: json path} of the checked tensor-parallel generation
    graphs (generation_tp.py; the 8B-shaped ones are the benchmark's)."""
    import generation_tp
    return {os.path.basename(p)[:-len(".json")]: p
            for p in generation_tp.build_all(out, generation_tp.CHECKED)}


def kind_of(name, meta):
    """The kind of artifact `name` from its metadata (a parsed JSON dict)."""
    if name in peers_names():
        return PEERS
    if name in ranks_names():
        return RANKS
    if name in generation_names():
        return GENERATION
    if name in example_names():
        return EXAMPLE
    if name in bench_names():
        return BENCH
    if name.startswith("ops_"):
        return OPS
    if name.startswith("mega_empty_") or name == "test_mega_too_wide":
        return EMPTY
    if any("mega" in k for k in meta.get("kernels", [])):
        return MEGA
    raise ValueError(f"{name}: not a shipped artifact (examples/shipped.py)")


def _timed_part(part_name, out):
    """One compile_* part, run in a worker process: (artifacts, seconds)."""
    start = time.time()
    got = globals()[part_name](out)
    return got, time.time() - start


def compile_all(out, jobs=None):
    """Compile every shipped artifact into `out`; {name: json path}. The
    parts run in `jobs` processes (TILEMEGA_JOBS, else the CPUs, at most
    one a part): they write different files, and CI's 2 cores halve the
    few minutes the whole catalogue takes."""
    parts = ["compile_examples", "compile_bench", "compile_mega", "compile_generation",
             "compile_peers", "compile_ranks"]
    jobs = min(len(parts), jobs or int(os.environ.get("TILEMEGA_JOBS", 0) or 0)
               or os.cpu_count() or 1)
    if jobs > 1:
        import concurrent.futures
        import multiprocessing

        # spawn: the MLIR context of this process is not fork-safe.
        with concurrent.futures.ProcessPoolExecutor(
                jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            done = list(pool.map(_timed_part, parts, [out] * len(parts)))
    else:
        done = [_timed_part(part, out) for part in parts]
    paths = {}
    for part, (got, seconds) in zip(parts, done):
        clash = set(got) & set(paths)
        if clash:
            raise ValueError(f"artifact names used twice: {sorted(clash)}")
        paths.update(got)
        print(f"{part}: {len(got)} artifacts in {seconds:.1f} s")
    return paths


if __name__ == "__main__":
    for name, path in sorted(compile_all(sys.argv[1] if len(sys.argv) > 1 else "out").items()):
        print(f"{name}: {path}")
