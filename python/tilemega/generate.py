"""Command line generation: `python -m tilemega.generate --model DIR --prompt "..."`.

    python -m tilemega.generate --model llama-dir --prompt "The capital of France is"
    python -m tilemega.generate --model llama-dir --prompt-ids 128000,791,6864 \\
        --max-new-tokens 64 --artifact out/gen_llama1b.json

Prints the tokens as they arrive (text through the checkpoint's tokenizer
when `tokenizers` or `transformers` is installed and the folder has one;
ids otherwise), then time to first token, ms/token and tokens/s. One
kernel launch generates everything (tilemega.mega.Engine); greedy, or
sampled with --temperature (and --seed, which reproduces a run). Without --artifact the graph is compiled
here (needs the compiler; cached on disk). Exit status 2 on bad arguments,
1 on a failed generation.
"""

import argparse
import os
import sys
import time


def _ids(text):
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids, got {text!r}")
    if not ids:
        raise argparse.ArgumentTypeError("no token ids given")
    return ids


def _eos(text):
    return [] if text.strip().lower() == "none" else _ids(text)


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _temperature(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if value != 0 and not 1e-3 <= value <= 1e3:
        raise argparse.ArgumentTypeError(f"0 (greedy) or in [1e-3, 1e3], got {value}")
    return value


def _seed(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}")
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^64), got {value}")
    return value


def tokenizer_of(folder):
    """A (encode, decode) pair for the checkpoint's tokenizer, or None."""
    path = os.path.join(folder, "tokenizer.json")
    try:
        from tokenizers import Tokenizer
        if os.path.exists(path):
            tok = Tokenizer.from_file(path)
            return (lambda s: tok.encode(s).ids), (lambda ids: tok.decode(ids))
    except ImportError:
        pass
    try:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        return (lambda s: tok(s)["input_ids"]), (lambda ids: tok.decode(ids))
    except Exception:   # no transformers, or no tokenizer files in the folder
        return None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tilemega.generate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint folder (config.json, "
                        "*.safetensors)")
    prompt = parser.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="text (needs the checkpoint's tokenizer)")
    prompt.add_argument("--prompt-ids", type=_ids, help="comma-separated token ids")
    parser.add_argument("--max-new-tokens", type=_positive, default=64)
    parser.add_argument("--max-seq-len", type=_positive, default=4096)
    parser.add_argument("--artifact", help="a prebuilt generation artifact (.json)")
    parser.add_argument("--prefill", help="a prebuilt prefill artifact (.json); without it "
                        "the prefill kernels are compiled here when the compiler is installed")
    parser.add_argument("--no-prefill", action="store_true",
                        help="walk the prompt with the decode steps instead")
    parser.add_argument("--eos-id", type=_eos, default=None,
                        help="stop at these comma-separated ids, or 'none' (default: the "
                             "checkpoint's eos_token_id)")
    parser.add_argument("--temperature", type=_temperature, default=0.0,
                        help="0 (default): greedy; > 0: sample from softmax(logits / T)")
    parser.add_argument("--top-k", type=int, default=None,
                        help="sample from the k largest logits (0: all)")
    parser.add_argument("--top-p", type=float, default=None,
                        help="and of those from the smallest set of mass >= p")
    parser.add_argument("--seed", type=_seed, default=0, help="sampling seed (64-bit)")
    parser.add_argument("--ctas-per-sm", type=_positive, default=None,
                        help="CTAs of the generation kernel an SM when it is compiled "
                             "here (default 2 on one GPU, where they fit; 1 over ranks)")
    parser.add_argument("--world", type=_positive, default=1,
                        help="GPUs to split the model over (tensor parallel, one process; "
                             "the decode steps walk the prompt)")
    parser.add_argument("--devices", type=_ids, default=None,
                        help="comma-separated GPUs of the ranks (default 0 .. world - 1)")
    args = parser.parse_args(argv)
    from .mega.engine import Engine

    try:
        Engine._sampling(args.temperature, args.top_k, args.top_p)
    except ValueError as e:
        parser.error(str(e))
    if not os.path.isdir(args.model):
        parser.error(f"--model {args.model}: not a folder")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        parser.error(f"--model {args.model}: no config.json in it")
    for flag in ("artifact", "prefill"):
        value = getattr(args, flag)
        if value is not None and not os.path.isfile(value):
            parser.error(f"--{flag} {value}: no such file")
    if args.prefill and args.no_prefill:
        parser.error("--prefill and --no-prefill exclude each other")
    if args.ctas_per_sm is not None:
        if args.artifact:
            parser.error("--ctas-per-sm is a compile option: --artifact is compiled already")
        if args.world > 1:
            parser.error("--ctas-per-sm: the graphs of several ranks run one CTA an SM")
        from .mega.graph import check_ctas_per_sm
        try:
            check_ctas_per_sm(args.ctas_per_sm)
        except ValueError as e:
            parser.error(f"--ctas-per-sm: {e}")
    if args.world > 1:
        from .mega import tensor_parallel as tp

        if args.prefill:
            parser.error("--prefill: over several GPUs the decode steps walk the prompt "
                         "(no prefill kernels over ranks yet)")
        try:
            tp.check_sampling(args.temperature, args.top_k or 0,
                              1.0 if args.top_p is None else args.top_p)
        except ValueError as e:
            parser.error(f"--world {args.world}: {e}")
    if args.devices is not None and len(args.devices) != args.world:
        parser.error(f"--devices: {len(args.devices)} GPUs for --world {args.world}")
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    from .mega.engine import Engine

    codec = tokenizer_of(args.model)
    if args.prompt is not None:
        if codec is None:
            parser.error(f"--prompt needs a tokenizer: {args.model} has no tokenizer.json "
                         "that `tokenizers` or `transformers` can read (use --prompt-ids)")
        ids = codec[0](args.prompt)
    else:
        ids = args.prompt_ids
    def progress(message):
        print(f"[tilemega] {message}", file=sys.stderr, flush=True)

    if args.world > 1:
        return _generate_over_ranks(args, ids, codec, progress)

    try:
        engine = Engine.from_pretrained(args.model, max_seq_len=args.max_seq_len,
                                        artifact=args.artifact, eos_token_id=args.eos_id,
                                        progress=progress, ctas_per_sm=args.ctas_per_sm,
                                        prefill=False if args.no_prefill else args.prefill)
        start = time.perf_counter()
        first, out = None, []
        for token in engine.stream(ids, max_new_tokens=args.max_new_tokens,
                                   temperature=args.temperature, top_k=args.top_k,
                                   top_p=args.top_p, seed=args.seed):
            if first is None:
                first = time.perf_counter() - start
            out.append(token)
            print(codec[1]([token]) if codec else f"{token} ", end="", flush=True)
        total = time.perf_counter() - start
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print()
    if out:
        # A streamed token arrives once the next one is counted (or at the
        # end), so the first arrival is one step late: ms/token is measured
        # from it over the rest.
        rest = (total - first) / max(1, len(out) - 1) * 1e3
        print(f"[tilemega] {len(out)} tokens in one launch "
              f"({engine.last_launch_host_s * 1e6:.0f} us of host time); first token after "
              f"{first * 1e3:.1f} ms ({len(ids)} prompt tokens); {rest:.3f} ms/token after it, "
              f"{len(out) / total:.1f} tokens/s overall", file=sys.stderr)
    return 0


def _generate_over_ranks(args, ids, codec, progress):
    """--world > 1: TensorParallelEngine, one launch of every rank; the
    tokens are printed when it ends (no streaming over ranks yet)."""
    from .mega.tp_engine import TensorParallelEngine

    try:
        engine = TensorParallelEngine.from_pretrained(
            args.model, world=args.world, devices=args.devices, max_seq_len=args.max_seq_len,
            artifact=args.artifact, eos_token_id=args.eos_id, progress=progress)
        start = time.perf_counter()
        out = engine.generate(ids, max_new_tokens=args.max_new_tokens,
                              temperature=args.temperature, top_k=args.top_k,
                              top_p=args.top_p, seed=args.seed)
        total = time.perf_counter() - start
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(codec[1](out) if codec else " ".join(str(t) for t in out))
    steps = len(ids) - 1 + len(out)
    print(f"[tilemega] {len(out)} tokens over {args.world} GPUs in one launch of each; "
          f"{total / max(1, steps) * 1e3:.3f} ms per step ({len(ids)} prompt positions "
          "walked by the decode steps)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
