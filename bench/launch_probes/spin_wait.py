"""Launch host time inside generate: blocking stream sync vs spinning on an
event for the previous generation's end (hypothesis: a long blocking wait
leaves the thread cold for the next launch)."""
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
orig_launch = e._launch_generation


class Spin:
    def __init__(self, s):
        self.s = s
        self.ev = torch.cuda.Event()
        self.ev.record(s)

    def synchronize(self):
        while not self.ev.query():
            pass

    def __getattr__(self, k):
        return getattr(self.s, k)


def spin_launch(chunks=0):
    orig_launch(chunks)
    e._launched_on = Spin(e._launched_on)


def run(n=6):
    out = {1: [], 128: []}
    for _ in range(n):
        for new in (1, 128):
            e.generate(PROMPT, max_new_tokens=new, eos_token_id=[])
            out[new].append(round(e.last_launch_host_s * 1e6, 1))
    return out


res = {}
for rnd in range(2):
    e._launch_generation = orig_launch
    res[f"block_{rnd}"] = run()
    e._launch_generation = spin_launch
    res[f"spin_{rnd}"] = run()
for k, v in res.items():
    print(k, "1-token:", sorted(v[1]), "128-token:", sorted(v[128]))
json.dump(res, open(os.path.join(os.environ["OUT"], "spin_probe.json"), "w"), indent=1)
