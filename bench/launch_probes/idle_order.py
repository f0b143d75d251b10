"""Launch host time inside generate by what ran before it: the previous
generation's length (1 or 128 tokens) and an idle sleep of the same length
as a 128-token generation."""
import json, os, sys, time
sys.path.insert(0, "test/pytest")
import torch
import test_generation_gpu as tg
from tilemega.mega.engine import Engine

W = sys.argv[1]
model = tg.hf_model("llama")
e = Engine.from_model(model, max_seq_len=4096, artifact=f"{W}/gen_llama1b.json",
                      prefill=f"{W}/prefill_gen_llama1b.json")
PROMPT = list(range(1, 513))


def gen(n):
    e.generate(PROMPT, max_new_tokens=n, eos_token_id=[])
    return round(e.last_launch_host_s * 1e6, 1)


gen(1); gen(128)
res = {k: [] for k in ("1_after_128", "1_after_1", "128_after_128", "128_after_1",
                       "1_after_sleep130ms", "1_after_sleep10ms", "1_after_busy130ms")}
for _ in range(6):
    gen(128); res["1_after_128"].append(gen(1))
    gen(1); res["1_after_1"].append(gen(1))
    gen(128); res["128_after_128"].append(gen(128))
    gen(1); res["128_after_1"].append(gen(128))
    gen(1); time.sleep(0.13); res["1_after_sleep130ms"].append(gen(1))
    gen(1); time.sleep(0.01); res["1_after_sleep10ms"].append(gen(1))
    gen(1); t = time.perf_counter()
    while time.perf_counter() - t < 0.13:
        pass
    res["1_after_busy130ms"].append(gen(1))
for k, v in res.items():
    print(f"{k:22s} median {sorted(v)[len(v) // 2]:6.1f}  {sorted(v)}")
json.dump(res, open(os.path.join(os.environ["OUT"], "order_probe.json"), "w"), indent=1)
