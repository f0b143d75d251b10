"""A tensor-core GEMM, built with the Python IR builder.

C = A @ B in f16 or bf16, accumulated in f32 (or f16 for f16 inputs): A is
M x K (K x M with `transpose_a`), B is K x N (N x K with `transpose_b`), C is
M x N. Each block computes a BLOCK_M x BLOCK_N tile of C: a `tile.pipelined`
loop over K copies the A and B tiles global -> shared (`tile-pipeline` makes
these cp.async copies, `num_stages` deep) and accumulates `tile.gemm` into a
fragment, which layout inference gives the mma.sync accumulator layout (and
the shared tiles an ldmatrix swizzle); the fragment is copied to C converting
to the input type. Tiles that overhang M, N or K are masked (zero-filled loads,
dropped stores), so the sizes need not be multiples of the block.

`build(name=..., **config)` returns the module (parameters: DEFAULTS);
run_examples.py EXAMPLES lists the configurations it compiles and
examples_gpu/gemm.py checks; `python examples/gemm.py OUT_DIR` compiles the
defaults. The compiler is imported in `build()` only, so `config()` and
`reference()` load on a GPU machine that has just the runtime.
"""

import sys

from example_config import with_defaults

DEFAULTS = dict(M=512, N=512, K=512, block_m=128, block_n=128, block_k=32,
                threads=128, num_stages=4, dtype="f16", acc="f32",
                transpose_a=False, transpose_b=False, group_m=0,
                epilogue=None)

# Fused epilogues: C = act(A @ B + bias[None, :]) with bias a length-N vector
# in the input type, applied to the f32 accumulator before the store.
EPILOGUES = (None, "bias_relu", "bias_gelu")

def config(**overrides):
    """DEFAULTS updated with `overrides` (unknown keys are an error)."""
    cfg = with_defaults(DEFAULTS, overrides, "gemm")
    if cfg["dtype"] not in ("f16", "bf16"):
        raise ValueError(f"dtype must be 'f16' or 'bf16', got {cfg['dtype']!r}")
    if cfg["acc"] not in ("f32", "f16"):
        raise ValueError(f"acc must be 'f32' or 'f16', got {cfg['acc']!r}")
    if cfg["epilogue"] not in EPILOGUES:
        raise ValueError(f"epilogue must be one of {EPILOGUES}, got {cfg['epilogue']!r}")
    return cfg


def _cdiv(a, b):
    return (a + b - 1) // b


def build(name="gemm", **overrides):
    """The module of one gemm kernel (`tilemega.ir.Module`) named `name`."""
    from tilemega.dialects import arith, func, math, memref, tile
    from tilemega.ir import (Attribute, BF16Type, DictAttr, F16Type, F32Type,
                             FloatAttr, IndexType, InsertionPoint, MemRefType,
                             Module, StringAttr)

    cfg = config(**overrides)
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    bm, bn, bk = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    ta, tb = cfg["transpose_a"], cfg["transpose_b"]
    elem = F16Type.get() if cfg["dtype"] == "f16" else BF16Type.get()
    acc_type = F32Type.get() if cfg["acc"] == "f32" else F16Type.get()
    index = IndexType.get()
    shared = Attribute.parse("#gpu.address_space<workgroup>")
    fragment = Attribute.parse("#tile.fragment")

    a_type = MemRefType.get([K, M] if ta else [M, K], elem)
    b_type = MemRefType.get([N, K] if tb else [K, N], elem)
    c_type = MemRefType.get([M, N], elem)
    a_tile = [bk, bm] if ta else [bm, bk]
    b_tile = [bn, bk] if tb else [bk, bn]

    module = Module.create()
    with InsertionPoint(module.body):
        epilogue = cfg["epilogue"]
        arg_types = [a_type, b_type, c_type]
        arg_names = ["A", "B", "C"]
        if epilogue:
            arg_types.append(MemRefType.get([N], elem))
            arg_names.append("bias")
        fn = func.FuncOp(name, (arg_types, []))
        fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)})
                        for n in arg_names]
        with InsertionPoint(fn.add_entry_block()):
            A, B, C = fn.arguments[:3]
            grid_m, grid_n = _cdiv(M, bm), _cdiv(N, bn)
            group = cfg["group_m"]
            if group:
                # Grouped order: consecutive blocks walk `group` row tiles
                # of one column band before the next band, so the A and B
                # tiles of the blocks resident at once stay in L2.
                if grid_m % group:
                    raise ValueError(f"group_m={group} must divide the {grid_m} row tiles")
                k = tile.kernel(grid=[grid_m * grid_n], threads=cfg["threads"])
            else:
                k = tile.kernel(grid=[grid_m, grid_n], threads=cfg["threads"])
            with InsertionPoint(k.body.blocks[0]):
                if group:
                    (pid,) = k.body.blocks[0].arguments
                    per_group = arith.constant(index, group * grid_n)
                    in_group = arith.remui(pid, per_group)
                    first = arith.muli(arith.divui(pid, per_group),
                                       arith.constant(index, group))
                    bx = arith.addi(first, arith.remui(in_group, arith.constant(index, group)))
                    by = arith.divui(in_group, arith.constant(index, group))
                else:
                    bx, by = k.body.blocks[0].arguments
                row = arith.muli(bx, arith.constant(index, bm))
                col = arith.muli(by, arith.constant(index, bn))
                a_s = tile.alloc_shared(MemRefType.get(a_tile, elem,
                                                       memory_space=shared))
                b_s = tile.alloc_shared(MemRefType.get(b_tile, elem,
                                                       memory_space=shared))
                acc = tile.alloc_fragment(MemRefType.get([bm, bn], acc_type,
                                                         memory_space=fragment))
                tile.clear(acc)
                loop = tile.pipelined(arith.constant(index, 0),
                                      arith.constant(index, _cdiv(K, bk)),
                                      arith.constant(index, 1),
                                      cfg["num_stages"])
                with InsertionPoint(loop.body.blocks[0]):
                    kk = arith.muli(loop.body.blocks[0].arguments[0],
                                    arith.constant(index, bk))
                    tile.copy(A, a_s, src_offsets=[kk, row] if ta else [row, kk])
                    tile.copy(B, b_s, src_offsets=[col, kk] if tb else [kk, col])
                    tile.gemm(a_s, b_s, acc,
                              transpose_a=True if ta else None,
                              transpose_b=True if tb else None)
                if epilogue:
                    _fused_epilogue(epilogue, acc, fn.arguments[3], col, N,
                                    bm, bn, acc_type)
                tile.copy(acc, C, dst_offsets=[row, col], sizes=[bm, bn])
            func.ReturnOp([])
    return module


def _fused_epilogue(kind, acc, bias, col, n, bm, bn, acc_type):
    """acc = act(acc + bias[col + j]) in registers, before the store: one
    tile.parallel over the accumulator, so each thread works on the mma
    fragment elements it holds. Bias indices past N are clamped (those
    columns are masked at the store)."""
    from tilemega.dialects import arith, math, memref, tile
    from tilemega.ir import F32Type, FloatAttr, IndexType

    f32 = F32Type.get()
    index = IndexType.get()

    def const(x):
        return arith.constant(f32, FloatAttr.get(f32, x))

    p = tile.parallel([bm, bn])
    from tilemega.ir import InsertionPoint
    with InsertionPoint(p.body.blocks[0]):
        i, j = p.body.blocks[0].arguments
        column = arith.minui(arith.addi(col, j), arith.constant(index, n - 1))
        v = arith.extf(f32, memref.load(acc, [i, j])) if acc_type != f32 else memref.load(acc, [i, j])
        v = arith.addf(v, arith.extf(f32, memref.load(bias, [column])))
        if kind == "bias_relu":
            v = arith.maximumf(v, const(0.0))
        else:  # tanh-approximated GELU, as torch's approximate="tanh"
            inner = arith.mulf(const(0.7978845608028654),
                               arith.addf(v, arith.mulf(const(0.044715),
                                                        arith.mulf(v, arith.mulf(v, v)))))
            v = arith.mulf(arith.mulf(const(0.5), v),
                           arith.addf(const(1.0), math.tanh(inner)))
        if acc_type != f32:
            v = arith.truncf(acc_type, v)
        memref.store(v, acc, [i, j])


def reference(a, b, transpose_a=False, transpose_b=False):
    """float64 reference of C = op(A) @ op(B) (torch tensors)."""
    a = a.double().t() if transpose_a else a.double()
    b = b.double().t() if transpose_b else b.double()
    return a @ b


if __name__ == "__main__":
    import tilemega
    from tilemega.ir import Context, Location

    with Context(), Location.unknown():
        result = tilemega.compile(build(), chip="sm_90a")
    print(result.save(sys.argv[1] if len(sys.argv) > 1 else "out"))
