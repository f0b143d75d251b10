"""Decode attention with grouped-query heads (flash-decoding), IR builder.

One query token attends over a KV cache: q is heads x head_dim (32 x 64),
k and v are kv_heads x seq x head_dim (8 x 1024 x 64), all bf16; each group
of heads / kv_heads = 4 query heads shares one KV head (GQA), and

    o[h] = softmax(q[h] . k[h // 4]^T / sqrt(64)) @ v[h // 4]      (bf16)

**Split kernel** (`NAME_split`, grid kv_heads x splits): each block takes one
KV head, its 4 query heads as a 4 x 64 tile, and one of `splits` equal ranges
of the sequence. It walks its range in chunks of block_n keys with a
`tile.pipelined` loop (the K and V chunks go global -> shared with cp.async,
`stages` deep) and keeps flash attention's online softmax:

    S = Q K^T                  tile.gemm transpose_b, f32 accumulator (SIMT:
                               4 rows are below the 16-row tensor-core tile)
    m_cur = rowmax(S)          tile.reduce max into a [4] fragment
    m' = max(m, m_cur * c)     c = log2(e) / sqrt(d): scores in base 2
    alpha = exp2(m - m'),  l *= alpha,  m = m'       (tile.parallel over [4])
    P = exp2(S * c - m'),  acc *= alpha              (tile.parallel over [4, n])
    l += rowsum(P)             tile.reduce sum (no clear: adds to l)
    acc += P @ V               P -> shared as bf16, tile.gemm

then stores its normalised partial output acc / l (f32) and the base-2
log-sum-exp m + log2(l) of each row into the workspace o_part
[splits, heads, head_dim] and lse [splits, heads].

**Combine kernel** (`NAME_combine`, one block per `combine_rows` heads)
merges the splits: with w_s = exp2(lse_s - max_s lse_s),
o = sum_s w_s o_part_s / sum_s w_s. The per-split weights are broadcast into a
[splits, rows, head_dim] fragment so that every reduction and division runs
over tiles of one layout.

With splits = 1 there is one kernel, `NAME`, that writes o directly (the whole
sequence in one block per KV head: seq / block_n steps of the online softmax).
The defaults (16 splits of 64 keys, chunks of 32) give 8 x 16 = 128 blocks,
about one per SM of an H200, each overlapping its second chunk's copy with
the first chunk's math.

tile.copy boxes have the rank of both buffers, so the kernels view k, v and
o_part as 2-d with memref.collapse_shape ((kv_heads * seq) x d rows).

Layouts: S (4 x block_n) and acc (4 x head_dim) are annotated with the same
blocked layout (one warp per query row, lane l holds columns l, l + 32, ...),
so the row statistics m, l, alpha are the same slice of it whether a parallel
over S or over acc reads them (layout inference has no conversions). The K
tile is swizzled (`#tile.swizzle<5, 1, log2(d) - 1>`: each 4-byte word of row r
XORed with r % 32) so that the 32 lanes of the S gemm, which read 32
different K rows at the same column, hit 32 different banks.

`build(name=..., **config)` returns the module (parameters: DEFAULTS);
`run(artifact, q, k, v, o)` launches its kernels (allocating the workspace);
`reference(q, k, v, torch)` is the float64 torch result. The compiler is
imported in build() only, so the rest loads on a GPU machine with just the
runtime. `python examples/decode_attention.py OUT_DIR` compiles the defaults.
"""

import math as _math
import sys

from example_config import with_defaults

DEFAULTS = dict(heads=32, kv_heads=8, seq=1024, head_dim=64, block_n=32,
                splits=16, threads=128, stages=2, combine_rows=1,
                combine_threads=128)


def config(**overrides):
    """DEFAULTS updated with `overrides` (unknown keys are an error), checked."""
    cfg = with_defaults(DEFAULTS, overrides, "decode_attention")
    H, HKV, N, D = cfg["heads"], cfg["kv_heads"], cfg["seq"], cfg["head_dim"]
    bn, splits, warps = cfg["block_n"], cfg["splits"], cfg["threads"] // 32
    if H % HKV:
        raise ValueError(f"heads {H} is not a multiple of kv_heads {HKV}")
    group = H // HKV
    if N % splits or (N // splits) % bn:
        raise ValueError(f"seq {N} must split into {splits} ranges of whole "
                         f"{bn}-key chunks")
    if bn % 32 or D % 32 or D < 64 or D & (D - 1):
        raise ValueError("block_n must be a multiple of 32 and head_dim a power "
                         "of two >= 64 (one lane per column, K swizzle)")
    if cfg["threads"] % 32 or group % warps:
        raise ValueError(f"the {group} query rows of a group must spread evenly "
                         f"over the {warps} warps")
    if H % cfg["combine_rows"]:
        raise ValueError("heads must be a multiple of combine_rows")
    return cfg


def kernel_names(name, splits):
    """The functions of the module `build(name, splits=...)` returns."""
    return [name] if splits == 1 else [f"{name}_split", f"{name}_combine"]


def _attention_kernel(cfg, name):
    """The single kernel (splits == 1) or the split kernel."""
    from tilemega.dialects import arith, func, math, memref, tile
    from tilemega.ir import (Attribute, BF16Type, DictAttr, F32Type, FloatAttr,
                             IndexType, InsertionPoint, MemRefType, StringAttr)

    H, HKV, N, D = cfg["heads"], cfg["kv_heads"], cfg["seq"], cfg["head_dim"]
    BN, SPLITS, G = cfg["block_n"], cfg["splits"], H // HKV
    warps = cfg["threads"] // 32
    f32, bf16, index = F32Type.get(), BF16Type.get(), IndexType.get()
    shared = Attribute.parse("#gpu.address_space<workgroup>")
    fragment = Attribute.parse("#tile.fragment")
    rows_layout = Attribute.parse(
        f"#tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [1, 32], "
        f"warpsPerBlock = [{warps}, 1], order = [1, 0]>")
    k_swizzle = Attribute.parse(
        f"#tile.swizzle<bits = 5, base = 1, shift = {D.bit_length() - 2}>")
    # exp(x / sqrt(d)) = exp2(x * c): the row maxima and sums are in base 2.
    c = _math.log2(_math.e) / _math.sqrt(D)

    def fconst(x):
        return arith.constant(f32, FloatAttr.get(f32, x))

    def iconst(x):
        return arith.constant(index, x)

    q_type = MemRefType.get([H, D], bf16)
    kv_type = MemRefType.get([HKV, N, D], bf16)
    if SPLITS == 1:
        out_types, out_names = [MemRefType.get([H, D], bf16)], ["o"]
    else:
        out_types = [MemRefType.get([SPLITS, H, D], f32),
                     MemRefType.get([SPLITS, H], f32)]
        out_names = ["o_part", "lse"]

    fn = func.FuncOp(name, ([q_type, kv_type, kv_type] + out_types, []))
    fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)})
                    for n in ["q", "k", "v"] + out_names]
    with InsertionPoint(fn.add_entry_block()):
        Q, K, V, *outs = fn.arguments
        grid = [HKV] if SPLITS == 1 else [HKV, SPLITS]
        kern = tile.kernel(grid=grid, threads=cfg["threads"])
        with InsertionPoint(kern.body.blocks[0]):
            h, *rest = kern.body.blocks[0].arguments
            split = rest[0] if rest else None
            # tile.copy boxes have the buffer's rank: view k and v as
            # (kv_heads * seq) x d.
            K2 = memref.collapse_shape(MemRefType.get([HKV * N, D], bf16), K, [[0, 1], [2]])
            V2 = memref.collapse_shape(MemRefType.get([HKV * N, D], bf16), V, [[0, 1], [2]])
            q_s = tile.alloc_shared(MemRefType.get([G, D], bf16, memory_space=shared))
            k_s = tile.alloc_shared(MemRefType.get([BN, D], bf16, memory_space=shared),
                                    swizzle=k_swizzle)
            v_s = tile.alloc_shared(MemRefType.get([BN, D], bf16, memory_space=shared))
            p_s = tile.alloc_shared(MemRefType.get([G, BN], bf16, memory_space=shared))
            s = tile.alloc_fragment(MemRefType.get([G, BN], f32, memory_space=fragment),
                                    layout=rows_layout)
            acc = tile.alloc_fragment(MemRefType.get([G, D], f32, memory_space=fragment),
                                      layout=rows_layout)
            row_type = MemRefType.get([G], f32, memory_space=fragment)
            m = tile.alloc_fragment(row_type)       # running row max (base 2)
            l = tile.alloc_fragment(row_type)       # running row sum
            m_cur = tile.alloc_fragment(row_type)   # this chunk's raw row max
            alpha = tile.alloc_fragment(row_type)   # rescale of l and acc

            q_row = arith.muli(h, iconst(G))
            keys = N // SPLITS
            first_key = arith.muli(h, iconst(N))
            if split is not None:
                first_key = arith.addi(first_key, arith.muli(split, iconst(keys)))
            tile.copy(Q, q_s, src_offsets=[q_row, 0])
            tile.fill(m, fconst(float("-inf")))
            tile.clear(l)
            tile.clear(acc)
            loop = tile.pipelined(iconst(0), iconst(keys // BN), iconst(1),
                                  cfg["stages"])
            with InsertionPoint(loop.body.blocks[0]):
                (t,) = loop.body.blocks[0].arguments
                n0 = arith.addi(first_key, arith.muli(t, iconst(BN)))
                tile.copy(K2, k_s, src_offsets=[n0, 0])
                tile.copy(V2, v_s, src_offsets=[n0, 0])
                tile.gemm(q_s, k_s, s, transpose_b=True, clear_accum=True)
                tile.reduce(tile.ReduceKind.max, s, 1, m_cur, clear=True)
                p = tile.parallel([G])
                with InsertionPoint(p.body.blocks[0]):
                    (i,) = p.body.blocks[0].arguments
                    m_old = memref.load(m, [i])
                    m_new = arith.maximumf(m_old, arith.mulf(memref.load(m_cur, [i]), fconst(c)))
                    a = math.exp2(arith.subf(m_old, m_new))  # 0 while m_old = -inf
                    memref.store(a, alpha, [i])
                    memref.store(arith.mulf(memref.load(l, [i]), a), l, [i])
                    memref.store(m_new, m, [i])
                p = tile.parallel([G, BN])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    x = arith.subf(arith.mulf(memref.load(s, [i, j]), fconst(c)),
                                   memref.load(m, [i]))
                    memref.store(math.exp2(x), s, [i, j])
                p = tile.parallel([G, D])
                with InsertionPoint(p.body.blocks[0]):
                    i, j = p.body.blocks[0].arguments
                    memref.store(arith.mulf(memref.load(acc, [i, j]), memref.load(alpha, [i])),
                                 acc, [i, j])
                tile.reduce(tile.ReduceKind.sum, s, 1, l)
                tile.copy(s, p_s)
                tile.gemm(p_s, v_s, acc)
            p = tile.parallel([G, D])
            with InsertionPoint(p.body.blocks[0]):
                i, j = p.body.blocks[0].arguments
                memref.store(arith.divf(memref.load(acc, [i, j]), memref.load(l, [i])),
                             acc, [i, j])
            if split is None:
                tile.copy(acc, outs[0], dst_offsets=[q_row, 0], sizes=[G, D])
            else:
                o_part, lse = outs
                o_rows = memref.collapse_shape(MemRefType.get([SPLITS * H, D], f32),
                                               o_part, [[0, 1], [2]])
                tile.copy(acc, o_rows, dst_offsets=[arith.addi(arith.muli(split, iconst(H)), q_row), 0],
                          sizes=[G, D])
                # Every lane of row i's warp holds m[i], l[i]: they all store
                # the same value.
                p = tile.parallel([G])
                with InsertionPoint(p.body.blocks[0]):
                    (i,) = p.body.blocks[0].arguments
                    v = arith.addf(memref.load(m, [i]), math.log2(memref.load(l, [i])))
                    memref.store(v, lse, [split, arith.addi(q_row, i)])
        func.ReturnOp([])


def _combine_kernel(cfg, name):
    from tilemega.dialects import arith, func, math, memref, tile
    from tilemega.ir import (Attribute, BF16Type, DictAttr, F32Type, IndexType,
                             InsertionPoint, MemRefType, StringAttr)

    H, D, SPLITS, R = cfg["heads"], cfg["head_dim"], cfg["splits"], cfg["combine_rows"]
    f32, bf16, index = F32Type.get(), BF16Type.get(), IndexType.get()
    fragment = Attribute.parse("#tile.fragment")
    part_type = MemRefType.get([SPLITS, H, D], f32)
    lse_type = MemRefType.get([SPLITS, H], f32)
    o_type = MemRefType.get([H, D], bf16)
    tile_type = MemRefType.get([SPLITS, R, D], f32, memory_space=fragment)
    row_type = MemRefType.get([R, D], f32, memory_space=fragment)

    fn = func.FuncOp(name, ([part_type, lse_type, o_type], []))
    fn.arg_attrs = [DictAttr.get({"tile.name": StringAttr.get(n)})
                    for n in ("o_part", "lse", "o")]
    with InsertionPoint(fn.add_entry_block()):
        part, lse, O = fn.arguments
        kern = tile.kernel(grid=[H // R], threads=cfg["combine_threads"])
        with InsertionPoint(kern.body.blocks[0]):
            (b,) = kern.body.blocks[0].arguments
            r0 = arith.muli(b, arith.constant(index, R))
            x = tile.alloc_fragment(tile_type)   # partial outputs
            w = tile.alloc_fragment(tile_type)   # lse, then the split weights
            mx = tile.alloc_fragment(row_type)
            den = tile.alloc_fragment(row_type)
            num = tile.alloc_fragment(row_type)
            tile.copy(part, x, src_offsets=[0, r0, 0])
            p = tile.parallel([SPLITS, R, D])
            with InsertionPoint(p.body.blocks[0]):
                sp, i, d = p.body.blocks[0].arguments
                memref.store(memref.load(lse, [sp, arith.addi(r0, i)]), w, [sp, i, d])
            tile.reduce(tile.ReduceKind.max, w, 0, mx, clear=True)
            p = tile.parallel([SPLITS, R, D])
            with InsertionPoint(p.body.blocks[0]):
                sp, i, d = p.body.blocks[0].arguments
                wt = math.exp2(arith.subf(memref.load(w, [sp, i, d]), memref.load(mx, [i, d])))
                memref.store(wt, w, [sp, i, d])
                memref.store(arith.mulf(memref.load(x, [sp, i, d]), wt), x, [sp, i, d])
            tile.reduce(tile.ReduceKind.sum, w, 0, den, clear=True)
            tile.reduce(tile.ReduceKind.sum, x, 0, num, clear=True)
            p = tile.parallel([R, D])
            with InsertionPoint(p.body.blocks[0]):
                i, d = p.body.blocks[0].arguments
                memref.store(arith.divf(memref.load(num, [i, d]), memref.load(den, [i, d])),
                             num, [i, d])
            tile.copy(num, O, dst_offsets=[r0, 0], sizes=[R, D])
        func.ReturnOp([])


def build(name="decode_attention", **overrides):
    """The module (`tilemega.ir.Module`) of the kernels kernel_names(name, splits)."""
    from tilemega.ir import InsertionPoint, Module

    cfg = config(**overrides)
    names = kernel_names(name, cfg["splits"])
    module = Module.create()
    with InsertionPoint(module.body):
        _attention_kernel(cfg, names[0])
        if cfg["splits"] > 1:
            _combine_kernel(cfg, names[1])
    return module


def run(artifact, q, k, v, o, workspace=None, stream=None):
    """Launches the artifact's kernels: o = attention(q, k, v) (torch tensors).

    `workspace` is (o_part, lse) as workspace(q, splits) makes them; made
    here when None (pass it in to keep allocation out of timed loops)."""
    names = list(artifact.kernels)
    if len(names) == 1:
        artifact.kernels[names[0]](q, k, v, o, stream=stream)
        return
    split = next(n for n in names if n.endswith("_split"))
    combine = next(n for n in names if n.endswith("_combine"))
    if workspace is None:
        splits = artifact.kernels[split].spec.params[3].shape[0]
        workspace = make_workspace(q, splits)
    o_part, lse = workspace
    artifact.kernels[split](q, k, v, o_part, lse, stream=stream)
    artifact.kernels[combine](o_part, lse, o, stream=stream)


def make_workspace(q, splits):
    """(o_part [splits, heads, head_dim], lse [splits, heads]), float32, on q's device."""
    import torch

    heads, d = q.shape
    return (torch.empty(splits, heads, d, device=q.device, dtype=torch.float32),
            torch.empty(splits, heads, device=q.device, dtype=torch.float32))


def reference(q, k, v, torch):
    """float64 torch result: q [heads, d], k and v [kv_heads, seq, d]."""
    group = q.shape[0] // k.shape[0]
    kr = k.double().repeat_interleave(group, dim=0)    # head h uses k[h // group]
    vr = v.double().repeat_interleave(group, dim=0)
    out = torch.nn.functional.scaled_dot_product_attention(
        q.double()[:, None, :], kr, vr, scale=1.0 / _math.sqrt(q.shape[1]))
    return out[:, 0, :]


if __name__ == "__main__":
    import tilemega
    from tilemega.ir import Context, Location

    with Context(), Location.unknown():
        result = tilemega.compile(build(), chip="sm_90a", name="decode_attention")
    print(result.save(sys.argv[1] if len(sys.argv) > 1 else "out"))
