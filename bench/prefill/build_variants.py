"""Compiles the prefill GEMM candidates that bench/prefill/screen.py ranks
(needs the compiler; run here, carry DIR to the GPU machine):

    PYTHONPATH=build/python_packages:python python bench/prefill/build_variants.py DIR [TILE ...]
    PYTHONPATH=build/python_packages:python python bench/prefill/build_variants.py --row-kernels DIR

One artifact a (shape, tile) pair, named pl_<N>x<K>_c<C>[_res|_bias]__<tile>:
the Llama-3.2-1B prefill's four projections (qkv, o, gate/up, down) at
chunks of 256 and 512 rows, each in linear_tile's blocking ("default"), the
mma.sync tiles it replaced (BLOCK_K 32) and other wgmma tiles (BLOCK_K 64, a
warpgroup per 64 rows), with or without a producer warpgroup and C staged
through shared memory. With --row-kernels: the RMSNorm, RoPE and attention
kernels at 512 rows with other thread counts or stages, and the gate/up
GEMM with its SiLU-mul in other tiles (ROW_KERNELS), one artifact each, for
screen.py's kernel table.
"""
import os
import sys

# (N, K, residual): Llama-3.2-1B's qkv, o, gate/up and down projections.
SHAPES = [(3072, 2048, False), (2048, 2048, True), (16384, 2048, False), (2048, 8192, True)]
CHUNKS = [256, 512]
# tag -> LinearTile fields (BM, BN, BK, threads, stages, warp_specialize, stage_c);
# "default" is prefill_bodies.linear_tile's choice for the shape.
TILES = {
    "mma128x64x32s3": (128, 64, 32, 128, 3),        # the tiles before wgmma
    "wg128x64s4ws": (128, 64, 64, 256, 4, True),
    "wg128x128s4ws": (128, 128, 64, 256, 4, True),
    "wg128x128s4ws_c": (128, 128, 64, 256, 4, True, True),
    "wg128x256s3ws": (128, 256, 64, 256, 3, True),
    "wg128x256s3ws_c": (128, 256, 64, 256, 3, True, True),
    "wg128x64s6ws": (128, 64, 64, 256, 6, True),
    "wg64x64s6": (64, 64, 64, 128, 6),
    "wg64x64s6_c": (64, 64, 64, 128, 6, False, True),
    "wg64x64s6ws": (64, 64, 64, 128, 6, True),
    "wg64x64s8": (64, 64, 64, 128, 8),
    "wg64x64s8ws": (64, 64, 64, 128, 8, True),
    "wg64x128s6ws": (64, 128, 64, 128, 6, True),
}


# The row kernels' candidates (Llama-3.2-1B, 512 rows): tag -> (factory
# name in prefill_bodies, keyword arguments); one kernel an artifact, named
# as the shipped one, timed by screen.py's kernel table.
ROW_KERNELS = {
    "rmsnorm_t256": ("rmsnorm_rows", dict(threads=256)),
    "rmsnorm_t512": ("rmsnorm_rows", dict(threads=512)),
    "gus_128x128s3ws": ("gate_up_silu", dict(tile=(128, 128, 64, 256, 3, True))),
    "gus_128x128s4ws_c": ("gate_up_silu", dict(tile=(128, 128, 64, 256, 4, True, True))),
    "gus_128x64s4ws_c": ("gate_up_silu", dict(tile=(128, 64, 64, 256, 4, True, True))),
    "gus_64x64s4": ("gate_up_silu", dict(tile=(64, 64, 64, 128, 4))),
    "rope_t256": ("rope_rows_kv", dict(threads=256)),
    "attention_s3": ("attention_rows", dict(stages=3)),
}


def build_row_kernels(out, C=512):
    """ROW_KERNELS at chunks of C rows, one artifact each (pk_<tag>)."""
    import tilemega
    from tilemega.ir import Context, InsertionPoint, Location, Module
    from tilemega.mega import bodies
    from tilemega.mega import prefill_bodies as pb

    # Llama-3.2-1B: hidden 2048, 32 / 8 heads of 64, MLP 8192, cache 4096.
    shapes = dict(rmsnorm_rows=(2048, C, 1e-5), gate_up_silu=(8192, 2048, C),
                  rope_rows_kv=(32, 8, 64, 4096, C), attention_rows=(32, 8, 64, 4096, C))
    os.makedirs(out, exist_ok=True)
    for tag, (factory, kwargs) in ROW_KERNELS.items():
        if "tile" in kwargs:
            kwargs = dict(kwargs, tile=pb.LinearTile(*kwargs["tile"]))
        body = getattr(pb, factory)(*shapes[factory], **kwargs)
        with Context(), Location.unknown():
            module = Module.create()
            with InsertionPoint(module.body):
                bodies.emit(body)
            text = str(module)
        tilemega.compile(text, chip="sm_90a", name=f"pk_{tag}").save(out)
        print(f"pk_{tag}", flush=True)


def build(out, tags=None):
    """Every (shape, chunk, tile) candidate; with `tags`, only those tiles
    (and linear_tile's own, "default")."""
    import tilemega
    from tilemega.ir import Context, InsertionPoint, Location, Module
    from tilemega.mega import bodies
    from tilemega.mega import prefill_bodies as pb

    os.makedirs(out, exist_ok=True)
    for N, K, res in SHAPES:
        for C in CHUNKS:
            for tag, fields in [("default", None)] + list(TILES.items()):
                if tags and tag != "default" and tag not in tags:
                    continue
                tile = pb.LinearTile(*fields) if fields else None
                body = pb.linear(N, K, C, residual=res, tile=tile)
                with Context(), Location.unknown():
                    module = Module.create()
                    with InsertionPoint(module.body):
                        bodies.emit(body)
                    text = str(module)
                name = f"pl_{N}x{K}_c{C}{'_res' if res else ''}__{tag}"
                try:
                    tilemega.compile(text, chip="sm_90a", name=name).save(out)
                    print(name, flush=True)
                except Exception as e:          # a tile the shape cannot take
                    print(f"{name}: {str(e).splitlines()[0]}", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--row-kernels"]:
        build_row_kernels(sys.argv[2])
    else:
        build(sys.argv[1], sys.argv[2:])
