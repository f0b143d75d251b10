"""Host time of a generation's launch: the engine's captured launch (a
LaunchGraph: one cuGraphLaunch) against the direct cooperative launch,
inside generate, for the Llama-3.2-1B and Qwen2 generation artifacts; the
tokens of both paths must agree (and the streamed ones with them); the
replay once more after a synchronisation (the prefill's kernels done).
Then, for the Llama artifact, the same replay after torch.compile
(max-autotune, CUDA graphs) has compiled and run a model in the process,
as bench/generate.py's peers do before our row: whether the launch's host
time depends on what else the process has done.

The control: a CUDA graph of one trivial torch kernel (a 1-element add),
captured and launched by the same driver.LaunchGraph path, is launched on
the engine's stream just before every timed generation launch, in the same
state (same stream, same dependencies, same queue behind the prefill): if
its host time swings as ours does, the swing is the driver's and the
machine's, not the mega-kernel's launch (what the H200 run showed: the
control, launched first, pays 14-36 us, our launch after it 7-13 us).
With --prefill-variants GEN PREFILL (artifact paths): only
prefill_variants() for the Llama engine, to $OUT/generate_launch_prefill.json.
Writes $OUT/generate_launch.json (docs/results/generate_launch_probe_h200.json
holds the H200 run with the control, generate_launch_probe.json an earlier
H100 run without it, generate_launch.json the first run, c3a44b5)."""
import json, os, sys, time
sys.path.insert(0, "test/pytest"); sys.path.insert(0, "examples")
import torch
import test_generation_gpu as tg
from tilemega.mega.engine import Engine

PROMPT = list(range(1, 512))


def control_graph(e):
    """A LaunchGraph of a trivial kernel (captured on the engine's capture
    stream, launched where the generation is)."""
    from tilemega.runtime.driver import LaunchGraph
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()

    def enqueue():
        with torch.cuda.stream(e._run):
            x.add_(1)

    g = LaunchGraph(e._run_handle, enqueue)
    g.keep = x
    torch.cuda.synchronize()
    return g


def launch_times(e, control, n=15):
    """Host time of the launch in each of n generations of 4 tokens, and of
    the control graph's launch just before it (us, sorted each)."""
    host, ctrl = [], []
    launch = e._launch_generation

    def with_control(chunks=0):
        # The state the launch finds (after_sync's synchronisation included).
        stream = torch.cuda.current_stream()
        e._set_limit(e.cfg.max_seq_len, stream)
        began = time.perf_counter()
        control.launch(int(stream.cuda_stream))
        ctrl.append(round((time.perf_counter() - began) * 1e6, 1))
        launch(chunks)

    e._launch_generation = with_control
    try:
        for _ in range(n):
            e.generate(PROMPT, max_new_tokens=4, eos_token_id=[])
            host.append(round(e.last_launch_host_s * 1e6, 1))
    finally:
        e._launch_generation = launch
    return sorted(host), sorted(ctrl)


def summary(times):
    host, ctrl = times
    return {"host_us": host, "median": host[len(host) // 2],
            "control_host_us": ctrl, "control_median": ctrl[len(ctrl) // 2]}


def measure(e):
    control = control_graph(e)
    r = {"captured": e._graph is not None, "capture_error": e.launch_capture_error}
    graph = e._graph
    # Since the engine launches on the caller's stream (no hand-over), the
    # control also shows what the launch costs when it is the first
    # submission after start()'s and the prefill's work.
    for label, g in (("graph", graph), ("direct", None)):
        e._graph = g
        toks = e.generate(PROMPT, max_new_tokens=16, eos_token_id=[])
        streamed = list(e.stream(PROMPT, max_new_tokens=16, eos_token_id=[]))
        r[label] = dict(summary(launch_times(e, control)), tokens=toks,
                        streamed_equal=streamed == toks)
    # The same replay after a synchronisation (the prompt's prefill kernels
    # done): the launch into an idle device.
    e._graph = graph
    limit = e._set_limit

    def synced(*a):
        limit(*a)
        torch.cuda.synchronize()

    e._set_limit = synced
    r["graph_after_sync"] = summary(launch_times(e, control))
    e._set_limit = limit
    r["tokens_equal"] = r["graph"]["tokens"] == r["direct"]["tokens"]
    return r


def compile_something():
    """A small MLP through torch.compile(mode="max-autotune") (inductor's
    autotuning and its CUDA graphs), run a few times: the process state
    bench/generate.py's transformers + torch.compile rows leave behind."""
    began = time.perf_counter()
    mlp = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.SiLU(),
                              torch.nn.Linear(8192, 2048)).cuda().to(torch.bfloat16)
    step = torch.compile(mlp, mode="max-autotune")
    x = torch.randn(1, 2048, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(5):
            step(x)
    torch.cuda.synchronize()
    return time.perf_counter() - began


def prefill_variants(e, n=21):
    """Host time (us, sorted) of the launch in n generations of 4 tokens
    after the 511-row prefill, per variant: `shared`, the staged copies,
    the prefill's chunks and the kernel in one graph (what generate() does);
    `copies_outside`, the same graph without the copies' memcpy nodes, the
    copies enqueued by the launch just before it (timed with it): whether
    memcpy nodes from host memory make the graph's launch dearer;
    `separate`, start()'s prefill graph, then the kernel's graph alone
    (generate() before 11f085a); `shared_after_query` with a cuStreamQuery
    (untimed) just before the launch: whether the cost is the launch's or
    that of the first driver call after the host's copies; `control`, a
    graph of one trivial kernel launched where the shared launch would be,
    and `shared_after_control`, the shared launch right after it: what
    this host's driver charges any graph launch at that point.
    `prepare_and_launch`: from generate()'s prompt checks to the shared
    launch's return. The tokens of all variants must agree."""
    stream = torch.cuda.current_stream()
    control = control_graph(e)
    variants = ("shared", "copies_outside", "shared_after_query", "separate",
                "shared_after_control")
    res = {k: [] for k in variants + ("control", "prepare_and_launch")}
    tokens = set()
    for _ in range(n):
        for variant in variants:
            began = time.perf_counter()
            if variant == "separate":
                words, chunks = e.start(PROMPT, 4, []), 0
            else:
                words, chunks = e._prepare(PROMPT, 4, [], False, None, None, None, 0)
            if variant == "shared_after_query":
                stream.query()
            if variant == "shared_after_control":
                at = time.perf_counter()
                control.launch(int(stream.cuda_stream))
                res["control"].append(round((time.perf_counter() - at) * 1e6, 1))
            e.copies_in_graph = variant != "copies_outside"
            try:
                e._launch_generation(chunks)
            finally:
                e.copies_in_graph = True
            if variant == "shared":
                res["prepare_and_launch"].append(round((time.perf_counter() - began) * 1e6, 1))
            res[variant].append(round(e.last_launch_host_s * 1e6, 1))
            torch.cuda.synchronize()
            e._check_kernel(len(PROMPT))
            tokens.add(tuple(e._read_tokens(len(PROMPT), len(PROMPT) + 4)))
    out = {k: {"host_us": sorted(v), "median": sorted(v)[len(v) // 2]} for k, v in res.items()}
    out["tokens_agree"] = len(tokens) == 1
    return out


def main():
    if "--prefill-variants" in sys.argv:
        model = tg.hf_model("llama")
        e = Engine.from_model(model, max_seq_len=4096, artifact=sys.argv[-2],
                              prefill=sys.argv[-1])
        e.generate(PROMPT, max_new_tokens=4, eos_token_id=[])
        r = prefill_variants(e)
        print(json.dumps({k: v.get("median", v) if isinstance(v, dict) else v
                          for k, v in r.items()}), flush=True)
        json.dump(r, open(os.path.join(os.environ.get("OUT", "."),
                                       "generate_launch_prefill.json"), "w"), indent=1)
        return
    out = {}
    engines = {}
    for kind, name, S in (("llama", "gen_llama1b", 4096), ("qwen2", "gen_qwen2", 2048)):
        model = tg.hf_model(kind)
        e = Engine.from_model(model, max_seq_len=S, artifact=f"out/{name}.json",
                              prefill=f"out/prefill_{name}.json")
        del model
        r = measure(e)
        out[name] = r
        print(name, {k: (v if not isinstance(v, dict) else
                         {kk: vv for kk, vv in v.items() if kk != "tokens"})
                     for k, v in r.items()}, flush=True)
        engines[name] = e
        torch.cuda.empty_cache()
    e = engines["gen_llama1b"]
    before = e.generate(PROMPT, max_new_tokens=16, eos_token_id=[])
    out["torch_compile_s"] = round(compile_something(), 1)
    after = {"graph": summary(launch_times(e, control_graph(e))),
             "tokens_equal": e.generate(PROMPT, max_new_tokens=16, eos_token_id=[]) == before}
    out["gen_llama1b_after_torch_compile"] = after
    print("after torch.compile", after, flush=True)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "generate_launch.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()
