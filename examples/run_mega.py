"""The mega-kernel part of the main job: builds the persistent kernels of
the MLP chain and the Llama-3.2-1B-shaped decode step (examples/mega_decode.py)
and, where a GPU is present, runs each once against the float64 reference.

    python examples/run_mega.py --out out              # build, run if a GPU is here
    python examples/run_mega.py --out out --run-only   # GPU machine, no compiler
"""

import argparse
import os
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # mega_decode

# (artifact, workload, tolerance on the relative L2 error vs float64)
RUNS = [("mega_mlp.json", "mlp", 2e-2), ("mega_decode.json", "decode", 3e-2),
        ("mega_decode_jit.json", "decode", 3e-2)]
LLAMA_1B = dict(layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8,
                head_dim=64, kv_len=1024, eps=1e-5, rope_theta=500000.0, dtype="bfloat16")


def run(out):
    import torch
    from tilemega.mega import reference as ref
    from tilemega.runtime.mega import load_mega

    cfg = SimpleNamespace(**LLAMA_1B)
    ok = True
    for name, workload, tolerance in RUNS:
        path = os.path.join(out, name)
        if not os.path.isfile(path):
            print(f"missing {path}: build it with examples/mega_decode.py")
            ok = False
            continue
        if workload == "mlp":
            w = ref.make_mlp_weights(cfg.hidden, cfg.intermediate, seed=0)
            expected = ref.mlp_reference_float64(w, cfg.eps)
        else:
            w = ref.make_weights(cfg, seed=0)
            expected = ref.reference_float64(cfg, w)
        mk = load_mega(path)
        tensors = {p.name: w[p.name] for p in mk.user_params if p.name in w}
        for p in mk.user_params:
            if p.name not in tensors:   # outputs
                tensors[p.name] = torch.zeros(p.shape, dtype=torch.bfloat16, device="cuda")
        mk.bind(tensors)
        mk.launch()
        mk.check()
        output = next(p.name for p in mk.user_params if p.role == "output")
        err = ref.compare(tensors[output], expected)["rel_l2"]
        verdict = "ok" if err < tolerance else "FAILED"
        ok &= err < tolerance
        print(f"ran {name} ({len(mk.meta['entries']['task'])} task instances on "
              f"{mk.meta['workers']} workers, one launch) on "
              f"{torch.cuda.get_device_name()}: relative L2 error {err:.3g} "
              f"({verdict}, tolerance {tolerance:g})")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out")
    parser.add_argument("--run-only", action="store_true")
    args = parser.parse_args()
    if not args.run_only:
        from mega_decode import build_all
        for path in build_all(args.out):
            print(f"built {path}")
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no CUDA device")
    except ImportError as exc:
        print(f"not running the mega-kernels: {exc}")
        return 0
    return 0 if run(args.out) else 1


if __name__ == "__main__":
    sys.exit(main())
