"""Host time of a generation's launch: the engine's captured launch (a
LaunchGraph: one cuGraphLaunch) against the direct cooperative launch,
inside generate, for the Llama-3.2-1B and Qwen2 generation artifacts; the
tokens of both paths must agree (and the streamed ones with them); the
replay once more after a synchronisation (the prefill's kernels done). Writes
$OUT/probe2.json (docs/results/generate_launch.json holds the run on
record)."""
import json, os, sys, time
sys.path.insert(0, "test/pytest"); sys.path.insert(0, "examples")
import torch
import test_generation_gpu as tg
from tilemega.mega.engine import Engine

out = {}
for kind, name, S in (("llama", "gen_llama1b", 4096), ("qwen2", "gen_qwen2", 2048)):
    model = tg.hf_model(kind)
    e = Engine.from_model(model, max_seq_len=S, artifact=f"out/{name}.json",
                          prefill=f"out/prefill_{name}.json")
    del model
    r = {"captured": e._graph is not None, "capture_error": e.launch_capture_error}
    prompt = list(range(1, 512))
    graph = e._graph
    for label, g in (("graph", graph), ("direct", None)):
        e._graph = g
        toks = e.generate(prompt, max_new_tokens=16, eos_token_id=[])
        host = []
        for _ in range(9):
            e.generate(prompt, max_new_tokens=4, eos_token_id=[])
            host.append(round(e.last_launch_host_s * 1e6, 1))
        streamed = list(e.stream(prompt, max_new_tokens=16, eos_token_id=[]))
        r[label] = {"host_us": sorted(host), "median": sorted(host)[4],
                    "tokens": toks, "streamed_equal": streamed == toks}
    # The same replay after a synchronisation (the prompt's prefill kernels
    # done): whether the launch waits for room in the queue behind them.
    e._graph = graph
    limit = e._set_limit

    def synced(*a):
        limit(*a)
        torch.cuda.synchronize()

    e._set_limit = synced
    host = []
    for _ in range(9):
        e.generate(prompt, max_new_tokens=4, eos_token_id=[])
        host.append(round(e.last_launch_host_s * 1e6, 1))
    e._set_limit = limit
    r["graph_after_sync"] = {"host_us": sorted(host), "median": sorted(host)[4]}
    r["tokens_equal"] = r["graph"]["tokens"] == r["direct"]["tokens"]
    out[name] = r
    print(name, {k: (v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != "tokens"}) for k, v in r.items()})
    del e
    torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ["OUT"], "probe2.json"), "w"), indent=1)
