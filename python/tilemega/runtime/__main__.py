"""Command line: inspect an artifact, or load it on the GPU.

    python -m tilemega.runtime info ART.json    # metadata only, no GPU needed
    python -m tilemega.runtime load ART.json [--device N]
                                                # load the module, print per-kernel
                                                # registers / shared / local memory
"""

from __future__ import annotations

import argparse
import os
import sys

from . import load_artifact


def _size(path):
    return f"{os.path.getsize(path)} bytes" if path and os.path.isfile(path) else "missing"


def info(art, out=None):
    out = out or sys.stdout
    s = art.spec
    print(f"artifact {art.name}  (format v{s.version}, chip {art.chip or '?'})", file=out)
    print(f"  json:  {art.path}", file=out)
    print(f"  ptx:   {art.ptx_path} ({_size(art.ptx_path)})", file=out)
    print(f"  cubin: {art.cubin_path + ' (' + _size(art.cubin_path) + ')' if art.cubin_path else 'none'}",
          file=out)
    if s.toolchain:
        print("  toolchain: " + ", ".join(f"{k} {v}" for k, v in s.toolchain.items()), file=out)
    for k in s.kernels:
        grid = (f"resident grid of at most {k.grid[0]} (as many as fit)" if k.resident
                else f"grid {list(k.grid)}")
        cluster = f" clusters of {k.cluster}" if k.cluster > 1 else ""
        print(f"  kernel {k.name}: {grid}{cluster} block {list(k.block)} "
              f"dynamic_shared_bytes {k.dynamic_shared_bytes}", file=out)
        width = max((len(p.name) for p in k.params + k.graph_args), default=0)
        for i, p in enumerate(k.params):
            print("    " + _describe(i, p, width), file=out)
        if k.graph_args:
            print("    graph arguments (mega_args[i]):", file=out)
        for i, p in enumerate(k.graph_args):
            print("      " + _describe(i, p, width) + (f"  {p.role}" if p.role else ""),
                  file=out)


def _describe(i, p, width) -> str:
    line = f"{i}: {p.name:<{width}}  {p.kind:<6} {p.dtype}"
    if p.kind == "tensor":
        line += f" shape {list(p.shape)} strides {list(p.strides)}"
    return line


def load(art, device, out=None):
    out = out or sys.stdout
    from . import driver
    source = art.load(device)
    print(f"{art.name}: module loaded on device {device} from {source}", file=out)
    with driver.device_context(device):
        for k in art.spec.kernels:
            fn = art._function(device, k.name, k.dynamic_shared_bytes)
            attrs = ", ".join(f"{key} {value}" for key, value in driver.function_attributes(fn).items())
            print(f"  {k.name}: {attrs}", file=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilemega.runtime")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="print kernels, params, grid/block (no GPU needed)")
    p_info.add_argument("artifact")
    p_load = sub.add_parser("load", help="load the module on a GPU and print kernel attributes")
    p_load.add_argument("artifact")
    p_load.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        art = load_artifact(args.artifact)
        if args.command == "info":
            info(art)
        else:
            load(art, args.device)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
