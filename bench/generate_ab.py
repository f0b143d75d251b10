"""A/B of two generation artifacts of the Llama-3.2-1B configuration in one
process: ms/token of each (prompt 512 + 128 greedy tokens, as
bench/generate.py times its engine row: (generate(128) - generate(1)) / 127,
median of 5, the two artifacts alternated), and whether their tokens agree.
For experiments on the persistent kernel; bench/generate.py stays the run
on record.

    PYTHONPATH=python python3 bench/generate_ab.py A.json B.json PREFILL.json

Writes $OUT/generate_ab.json."""
import json, os, sys
sys.path.insert(0, "test/pytest")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_generation_gpu as tg
from generate import timed
from tilemega.mega.engine import Engine

PROMPT = list(range(1, 513))
NEW = 128


def main():
    a, b, prefill = sys.argv[1:4]
    model = tg.hf_model("llama")
    engines = {p: Engine.from_model(model, max_seq_len=4096, artifact=p, prefill=prefill)
               for p in (a, b)}
    tokens = {p: e.generate(PROMPT, max_new_tokens=NEW, eos_token_id=[])
              for p, e in engines.items()}
    runs = {p: ([], []) for p in engines}
    for _ in range(5):
        for p, e in engines.items():
            runs[p][0].append(timed(lambda: e.generate(PROMPT, max_new_tokens=1,
                                                       eos_token_id=[]))[0])
            runs[p][1].append(timed(lambda: e.generate(PROMPT, max_new_tokens=NEW,
                                                       eos_token_id=[]))[0])
    out = {"tokens_equal": tokens[a] == tokens[b],
           "first_difference": next((i for i, (x, y) in enumerate(zip(tokens[a], tokens[b]))
                                     if x != y), None)}
    for p, (ones, alls) in runs.items():
        one, whole = sorted(ones)[2], sorted(alls)[2]
        out[os.path.basename(p)] = {"ms_per_token": (whole - one) / (NEW - 1), "ttft_ms": one,
                                    "generate_128_ms": sorted(alls)}
    print(json.dumps(out), flush=True)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "generate_ab.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()
