"""Task bodies of the generation graph, written in `T.*` (tilemega.language).

These read the decode position at run time from the generation state `gen`
(generation_state.py), so one artifact serves every position below the
cache length S:

  embed_token       x = embedding[tokens[pos]]
  rope_kv_at        RoPE of q and k from the cos/sin tables' row pos; the new
                    k and v go to cache row pos
  attention_at      flash-decoding partials over keys 0..pos (the last chunk
                    masked), any GQA group (padded to the warps)
  rope_attention_at both in one task: each unit loads its group's heads in
                    one round trip and rotates its q heads itself while
                    the cached keys 0..pos-1 load, the last
                    split adds key pos from shared memory, and the group's
                    units write its cache row pos
  attention_merge   the partials of the splits, as attention_combine (or,
                    merge_in_split, by each group's last split:
                    merge_by_last_split, T.block_atomic_add)
  argmax_partial    per chunk of the scores (the logits, or logit / T +
                    Gumbel noise when sampling): the largest, its first index
  pick_advance      the first index of the largest score; advances `gen` and
                    appends to `tokens` (generation_state.advance)

Each factory returns a bodies.Body (bodies.t_body) with its footprint.
Footprints of runtime-dependent ranges (the cache row at pos, the state)
cover the whole tensor: dependencies are then conservative, never missing.
"""

import math as _math

import tilemega.language as T

from . import generation_state as gs
from .bodies import Access, Body, _check, _rotate_half, online_softmax_step, t_body


def embed_token(V, H, S, *, threads=256, emit=True) -> Body:
    """x = table[tokens[gen[POS]]]: args (table [V, H], tokens [S] i32,
    gen [GEN_WORDS] i32, x [H]); one unit. The row goes through shared
    memory (any H; a fragment would need H to spread over the threads)."""
    _check(H % 8 == 0, f"embed_token: hidden {H} must be a multiple of 8 (16-byte rows)")
    W = gs.GEN_WORDS

    def embed(table: T.Tensor((V, H), "bfloat16"), tokens: T.Tensor((S,), "int32"),
              gen: T.Tensor((W,), "int32"), x: T.Tensor((H,), "bfloat16")):
        with T.Kernel(1, threads=threads) as u:
            token = tokens[gen[gs.POS]]
            row = T.alloc_shared((1, H), "bfloat16")
            T.copy(table[token, 0], row)
            T.copy(row, x.view(1, H)[0, 0])

    foot = (Access("read", 0, 0, 0, V * H), Access("read", 1, 0, 0, S),
            Access("read", 2, 0, 0, W), Access("write", 3, 0, 0, H))
    return t_body(f"embed_{V}x{H}_s{S}", embed, 1, foot, threads, emit)


def rope_kv_at(Hq, Hkv, D, S, *, threads=256, emit=True) -> Body:
    """RoPE at position p = gen[POS] and the cache write, one unit per kv
    head g: args (qkv [(Hq+2Hkv)*D], cos [S, D/2] f32, sin [S, D/2] f32,
    gen, q_out [Hq*D], k_cache [Hkv, S, D], v_cache [Hkv, S, D]).

    Unit g rotates the G = Hq/Hkv query heads of group g into q_out and k
    head g into k_cache[g, p], and copies v head g to v_cache[g, p]; the
    rotation is Llama's rotate-half with the tables' row p:
    out[j] = x[j] cos[p, i] -+ x[j +- D/2] sin[p, i], i = j mod D/2 (f32,
    rounded once to bf16), the numbers of bodies.rope_kv_append."""
    _check(D % 2 == 0 and D % 8 == 0, f"rope_kv_at: head_dim {D} must be a multiple of 8")
    _check(Hq % Hkv == 0, f"rope_kv_at: heads {Hq} not a multiple of kv_heads {Hkv}")
    G, half, total, W = Hq // Hkv, D // 2, (Hq + 2 * Hkv) * D, gs.GEN_WORDS

    def rope_kv(qkv: T.Tensor((total,), "bfloat16"), cos: T.Tensor((S, half), "float32"),
                sin: T.Tensor((S, half), "float32"), gen: T.Tensor((W,), "int32"),
                q_out: T.Tensor((Hq * D,), "bfloat16"),
                k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                v_cache: T.Tensor((Hkv, S, D), "bfloat16")):
        with T.Kernel(Hkv, threads=threads) as g:
            p = gen[gs.POS]
            heads = qkv.view(Hq + 2 * Hkv, D)
            # Rows 0..G-1: the group's q heads, row G: its k head. A head is
            # less than one element per thread: through shared memory.
            x_s = T.alloc_shared((G + 1, D), "bfloat16")
            o_s = T.alloc_shared((G + 1, D), "bfloat16")
            v_s = T.alloc_shared((1, D), "bfloat16")
            T.copy(heads[g * G:g * G + G, 0:D], x_s[0:G, 0:D])
            T.copy(heads[Hq + g:Hq + g + 1, 0:D], x_s[G:G + 1, 0:D])
            T.copy(heads[Hq + Hkv + g, 0], v_s)
            rotate_half(x_s, o_s, cos, sin, p)
            row = g * S + p                                  # cache row [g, p]
            T.copy(o_s[0:G, 0:D], q_out.view(Hq, D)[g * G, 0])
            T.copy(o_s[G:G + 1, 0:D], k_cache.view(Hkv * S, D)[row, 0])
            T.copy(v_s, v_cache.view(Hkv * S, D)[row, 0])

    # The cache row depends on p: each unit's access covers its kv head's
    # whole cache (stride S*D), and every unit reads the tables.
    foot = (Access("read", 0, G * D, 0, G * D),                 # q heads of group g
            Access("read", 0, D, Hq * D, D),                    # k head g
            Access("read", 0, D, (Hq + Hkv) * D, D),            # v head g
            Access("read", 1, 0, 0, S * half), Access("read", 2, 0, 0, S * half),
            Access("read", 3, 0, 0, W),
            Access("write", 4, G * D, 0, G * D),
            Access("write", 5, S * D, 0, S * D),
            Access("write", 6, S * D, 0, S * D))
    return t_body(f"rope_kv_at_{Hq}x{Hkv}x{D}_s{S}", rope_kv, Hkv, foot, threads, emit)


def rotate_half(x_s, o_s, cos, sin, p):
    """o_s = RoPE of the heads (rows) of x_s [rows, D] at position p,
    Llama's rotate-half with the tables' row p: o[j] = x[j] cos[p, i] -+
    x[j +- D/2] sin[p, i], i = j mod D/2, in f32 rounded once to bf16 (the
    numbers of bodies.rope_kv_append)."""
    rows, D = x_s.shape
    for h, j in T.Parallel(rows, D):
        o_s[h, j] = T.cast(_rotate_half(lambda jj: x_s[h, jj], j, _TableRow(cos, p),
                                        _TableRow(sin, p), D), "bfloat16")


class _TableRow:
    """Row p of a [S, D/2] table, indexed as the one-row tables
    bodies._rotate_half takes."""

    def __init__(self, table, p):
        self.table, self.p = table, p

    def __getitem__(self, i):
        return self.table[self.p, i]


#: mma.sync's M: under tensor_cores a kv group's query rows are padded to
#: one tile of it.
MMA_ROWS = 16


def padded_group(G, D, threads, tensor_cores=False):
    """(Gp, row_warps, col_threads): the G query rows of a kv group padded to
    Gp rows that spread over the warps (Gp a divisor or a multiple of the
    warp count) with the warps' column threads no more than D (one lane a
    column of the accumulator): G = 7 on 8 warps gives 8 rows, G = 1 with
    D = 64 gives 4. The padding rows compute and are never stored.
    tensor_cores: one mma.sync tile of MMA_ROWS rows (G <= MMA_ROWS), the
    warps side by side along the columns (col_threads: the columns one row
    of warps covers, 8 each)."""
    warps = threads // 32
    if tensor_cores:
        _check(G <= MMA_ROWS, f"attention_at: {G} query heads a kv head do not fit the "
               f"{MMA_ROWS} rows of one mma.sync tile (tensor_cores=False runs them on CUDA "
               "cores)")
        return MMA_ROWS, 1, 8 * warps
    Gp = max(G, -(-warps * 32 // D))
    while not (warps % Gp == 0 or Gp % warps == 0):
        Gp += 1
    row_warps = min(Gp, warps)
    return Gp, row_warps, 32 * (warps // row_warps)


def partial_rows(G, D, threads):
    """Rows a unit's partials have (o_part, lse), whichever cores computed
    them: padded_group's on CUDA cores, so that attention_merge is one body
    for both (tensor cores compute MMA_ROWS rows and store these)."""
    return padded_group(G, D, threads)[0]


def attention_at_config(Hq, Hkv, D, S, splits, threads, key_block=None, tensor_cores=False):
    """(Gp, block_n, stages, layout) of attention_at; ValueError naming the
    parameter it cannot serve. block_n (keys a chunk) is key_block, or by
    default the accumulator's column threads (at least 32): a multiple of
    them, so that every thread holds whole columns of the chunk's scores.

    tensor_cores: the two products of a chunk (scores, probabilities times
    values) on mma.sync, the group's rows padded to one 16-row tile and the
    warps side by side along the keys and the head dimension (#tile.mma);
    otherwise every thread computes its scores and outputs on CUDA cores,
    reading each product's operands from shared memory one or two elements
    at a time (a #tile.blocked accumulator)."""
    _check(Hq % Hkv == 0, f"attention_at: heads {Hq} not a multiple of kv_heads {Hkv}")
    _check(D >= 32 and D & (D - 1) == 0,
           f"attention_at: head_dim {D} must be a power of two >= 32")
    _check(splits >= 1, f"attention_at: splits {splits} must be >= 1")
    Gp, row_warps, col_threads = padded_group(Hq // Hkv, D, threads, tensor_cores)
    _check(D % col_threads == 0,
           f"attention_at: head_dim {D} is not a multiple of the {col_threads} "
           + ("columns the warps' mma tiles cover" if tensor_cores else
              "threads a row of the accumulator spreads over"))
    # A chunk is the K of the second product: mma.sync takes K by 16.
    narrowest = max(col_threads, 16 if tensor_cores else 32)
    block_n = key_block or narrowest
    _check(block_n % narrowest == 0 and block_n <= 256,
           f"attention_at: key_block {block_n} must be a multiple of {narrowest} (the "
           + ("columns the warps' mma tiles cover" if tensor_cores else
              "threads a row of the scores spreads over") + ") and at most 256")
    _check(S % block_n == 0,
           f"attention_at: the cache length {S} must be a multiple of {block_n} (key chunks)")
    warps = threads // 32
    if tensor_cores:
        return Gp, block_n, 2, f"#tile.mma<warpsPerBlock = [1, {warps}]>"
    layout = (f"#tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [1, 32], "
              f"warpsPerBlock = [{row_warps}, {warps // row_warps}], order = [1, 0]>")
    return Gp, block_n, 2, layout


def tensor_cores_serve(Hq, Hkv, D, S, splits, threads, key_block=None):
    """Whether attention_at_config accepts tensor_cores=True for this shape
    (its own checks, so that the default that picks tensor cores and the
    refusal of an explicit request are one rule)."""
    try:
        attention_at_config(Hq, Hkv, D, S, splits, threads, key_block, tensor_cores=True)
    except ValueError:
        return False
    return True


def _split_partials(u, q_s, k_cache, v_cache, p, o_part, lse, Hq, Hkv, D, S, splits,
                    threads, current=None, key_block=None, tensor_cores=False):
    """Unit u's flash-decoding partial (attention_at) from the group's
    query rows in q_s [Gp, D] at position p (tensor_cores: as
    attention_at_config's).

    current None: keys 0..p, all from the caches (rope_kv_at stored row p
    before). current (kv_s, k_row, v_row): keys 0..p-1 from the caches, in a
    loop whose copies may start at the caller's T.prefetch_point(), and key
    p from shared memory (kv_s[k_row], kv_s[v_row]), which the last split adds
    after the loop; the caller stores row p afterwards."""
    Gp, BN, STAGES, layout = attention_at_config(Hq, Hkv, D, S, splits, threads, key_block,
                                                 tensor_cores)
    c = _math.log2(_math.e) / _math.sqrt(D)   # exp(x / sqrt(D)) = exp2(x * c)
    # CUDA cores read a column of keys across a warp's lanes: rows apart by
    # a power of two would share banks. ldmatrix reads 8-element rows (the
    # layout inference's swizzle keeps them whole).
    k_swizzle = None if tensor_cores else T.Swizzle(bits=5, base=1, shift=D.bit_length() - 2)
    P = partial_rows(Hq // Hkv, D, threads)
    rows = Hkv * splits * P
    g, s = u // splits, u % splits
    keys = p + 1 if current is None else p    # the keys read from the caches
    chunks = (keys + (BN - 1)) // BN
    per = (chunks + (splits - 1)) // splits
    first = T.min(s * per, chunks)
    last = T.min(first + per, chunks)
    K2, V2 = k_cache.view(Hkv * S, D), v_cache.view(Hkv * S, D)
    k_s = T.alloc_shared((BN, D), "bfloat16", swizzle=k_swizzle)
    v_s = T.alloc_shared((BN, D), "bfloat16")
    p_s = T.alloc_shared((Gp, BN), "bfloat16")
    sc = T.alloc_fragment((Gp, BN), "float32", layout=layout)
    acc = T.alloc_fragment((Gp, D), "float32", layout=layout)
    m = T.alloc_fragment((Gp,), "float32")
    l = T.alloc_fragment((Gp,), "float32")
    m_cur = T.alloc_fragment((Gp,), "float32")
    alpha = T.alloc_fragment((Gp,), "float32")
    T.fill(m, -T.infinity("float32"))
    T.clear(l)
    T.clear(acc)
    early = current is not None
    for t in T.Pipelined(first, last, num_stages=STAGES):
        T.copy(K2[g * S + t * BN, 0], k_s, early=early)
        T.copy(V2[g * S + t * BN, 0], v_s, early=early)
        T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
        for i, j in T.Parallel(Gp, BN):
            sc[i, j] = T.if_then_else(t * BN + j < keys, sc[i, j], -T.infinity("float32"))
        online_softmax_step(sc, v_s, p_s, acc, m, l, m_cur, alpha, c)
    if current is not None:
        _add_current_key(s == splits - 1, q_s, *current, acc, m, l, alpha, c, layout)
    # A split with no keys has l = 0: o = 0 and lse = -inf.
    for i, j in T.Parallel(Gp, D):
        acc[i, j] = T.if_then_else(l[i] > 0.0, acc[i, j] / l[i], 0.0)
    if P == Gp:
        T.copy(acc, o_part.view(rows, D)[u * P, 0])
        # Every thread holding row i has m[i] and l[i]; they store the same.
        for i in T.Parallel(Gp):
            lse[u * P + i] = T.if_then_else(l[i] > 0.0, m[i] + T.log2(l[i]),
                                            -T.infinity("float32"))
    else:
        # Tensor cores computed MMA_ROWS rows: the first P go out, through
        # shared memory (a fragment's rows cannot be cut).
        out_s = T.alloc_shared((Gp, D), "float32")
        lse_s = T.alloc_shared((Gp,), "float32")
        T.copy(acc, out_s)
        for i in T.Parallel(Gp):
            lse_s[i] = T.if_then_else(l[i] > 0.0, m[i] + T.log2(l[i]), -T.infinity("float32"))
        T.copy(out_s[0:P, 0:D], o_part.view(rows, D)[u * P, 0])
        for i in T.Parallel(P):
            lse[u * P + i] = lse_s[i]


def _add_current_key(owner, q_s, kv_s, k_row, v_row, acc, m, l, alpha, c, layout):
    """One more key, kv_s[k_row] / kv_s[v_row], into the online softmax (m, l,
    acc) of the rows of q_s, where `owner` holds (elsewhere a no-op): its
    score is the rows' dot product with it, in f32, and its probability
    weighs v in f32."""
    Gp, D = q_s.shape
    prod = T.alloc_fragment((Gp, D), "float32", layout=layout)
    score = T.alloc_fragment((Gp,), "float32")
    w = T.alloc_fragment((Gp,), "float32")
    for i, j in T.Parallel(Gp, D):
        prod[i, j] = T.cast(q_s[i, j], "float32") * T.cast(kv_s[k_row, j], "float32")
    T.reduce_sum(prod, score, dim=1)
    for i in T.Parallel(Gp):
        x = T.if_then_else(owner, score[i] * c, -T.infinity("float32"))
        m_new = T.max(m[i], x)
        alpha[i] = T.if_then_else(owner, T.exp2(m[i] - m_new), 1.0)
        w[i] = T.if_then_else(owner, T.exp2(x - m_new), 0.0)
        l[i] = l[i] * alpha[i] + w[i]
        m[i] = m_new
    for i, j in T.Parallel(Gp, D):
        acc[i, j] = acc[i, j] * alpha[i] + w[i] * T.cast(kv_s[v_row, j], "float32")


def attention_at(Hq, Hkv, D, S, splits, *, threads=256, key_block=None, merge_in_split=False,
                 tensor_cores=False, emit=True) -> Body:
    """Flash-decoding partials over the keys 0..p (p = gen[POS]) of one
    (kv head g, split s) per unit u = g*splits + s: args (q [Hq*D],
    k_cache [Hkv, S, D], v_cache, gen, o_part [Hkv*splits*Gp*D] f32,
    lse [Hkv*splits*Gp] f32).

    The p+1 keys are cut into chunks of block_n, and split s takes chunks
    [s*c, min((s+1)*c, chunks)), c = ceil(chunks / splits): the work of a
    unit follows the length (a split past the end stores o = 0 and
    lse = -inf, which the merge weighs 0). Keys of the last chunk past p are
    masked to -inf before the row maximum. Each unit stores its normalised
    partial output at o_part rows u*Gp + i and the base-2 log-sum-exp at
    lse[u*Gp + i] (rows i >= G pad the group; attention_merge skips them).
    The same online softmax as bodies.attention_split.

    merge_in_split: two more args, counts [Hkv] int32 (zero between
    launches: a scratch tensor) and o [Hq*D]; the last split of each group
    merges the group's partials into o (merge_by_last_split).
    tensor_cores: the chunks' products on mma.sync (attention_at_config)."""
    G = Hq // Hkv
    Gp, BN = attention_at_config(Hq, Hkv, D, S, splits, threads, key_block, tensor_cores)[:2]
    P = partial_rows(G, D, threads)
    W = gs.GEN_WORDS
    rows = Hkv * splits * P

    def unit(u, q, k_cache, v_cache, gen, o_part, lse):
        q_s = T.alloc_shared((Gp, D), "bfloat16")
        # Gp rows from the group's first head: padding rows read the next
        # group's heads (or, past the last head, the copy's zeros).
        T.copy(q.view(Hq, D)[(u // splits) * G, 0], q_s)
        _split_partials(u, q_s, k_cache, v_cache, gen[gs.POS], o_part, lse, Hq, Hkv,
                        D, S, splits, threads, key_block=key_block, tensor_cores=tensor_cores)

    def attention(q: T.Tensor((Hq * D,), "bfloat16"),
                  k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                  v_cache: T.Tensor((Hkv, S, D), "bfloat16"), gen: T.Tensor((W,), "int32"),
                  o_part: T.Tensor((rows * D,), "float32"), lse: T.Tensor((rows,), "float32")):
        with T.Kernel(Hkv * splits, threads=threads) as u:
            unit(u, q, k_cache, v_cache, gen, o_part, lse)

    def attention_merged(q: T.Tensor((Hq * D,), "bfloat16"),
                         k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                         v_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                         gen: T.Tensor((W,), "int32"),
                         o_part: T.Tensor((rows * D,), "float32"),
                         lse: T.Tensor((rows,), "float32"),
                         counts: T.Tensor((Hkv,), "int32"), o: T.Tensor((Hq * D,), "bfloat16")):
        with T.Kernel(Hkv * splits, threads=threads) as u:
            unit(u, q, k_cache, v_cache, gen, o_part, lse)
            merge_by_last_split(u // splits, counts, o_part, lse, o, Hq, Hkv, D, splits,
                                threads)

    # Group g's units read its Gp query rows (padding rows: the next heads,
    # up to the last), so a group starts once they are written.
    foot = tuple(Access("read", 0, 0, g * G * D, min(Gp, Hq - g * G) * D, g * splits,
                        (g + 1) * splits) for g in range(Hkv))
    foot += (Access("read", 1, 0, 0, Hkv * S * D), Access("read", 2, 0, 0, Hkv * S * D),
             Access("read", 3, 0, 0, W),
             Access("write", 4, P * D, 0, P * D), Access("write", 5, P, 0, P))
    if merge_in_split:
        foot += _merge_footprint(Hq, Hkv, D, splits, P, 4)
        return t_body(f"attn_merged_at_{Hq}x{Hkv}x{D}_s{S}_k{splits}"
                      + _block_suffix(key_block, BN) + _tc_suffix(tensor_cores), attention_merged, Hkv * splits, foot,
                      threads, emit)
    return t_body(f"attn_at_{Hq}x{Hkv}x{D}_s{S}_k{splits}" + _block_suffix(key_block, BN)
                  + _tc_suffix(tensor_cores),
                  attention, Hkv * splits, foot, threads, emit)


def rope_attention_at(Hq, Hkv, D, S, splits, *, threads=256, key_block=None,
                      merge_in_split=False, tensor_cores=False, pos=None, emit=True) -> Body:
    """rope_kv_at and attention_at in one task (one stage boundary fewer a
    layer): args (qkv [(Hq+2Hkv)*D], cos [S, D/2] f32, sin, k_cache
    [Hkv, S, D], v_cache, gen, o_part, lse), the partials of attention_at.

    Every unit of group g rotates the group's G query heads into shared
    memory (G heads of D: a few hundred products) instead of reading them
    from a q tensor; the heads and the tables' row load into registers in
    one round trip (load_heads). Its keys 0..p-1 come from the caches, in
    a loop whose first copies start at the T.prefetch_point() right after,
    so they load beside the heads and under the rotation (they need p
    alone); key p, rotated here, is
    added from shared memory by the last split (_add_current_key). After
    the partials every unit of group g writes the rotated k head and the v
    head to the caches' row p (the same values; read from the next step
    on). merge_in_split: as attention_at's (args counts and o after lse);
    tensor_cores: as attention_at's.

    pos (an int): the position fixed at compile time (the fixed decode
    step, models.decode_graph): no gen argument, cos and sin are the
    position's rows [D/2], and the units of group g write cache row pos of
    kv head g alone."""
    _check(D % 2 == 0 and D % 8 == 0, f"rope_attention_at: head_dim {D} must be a multiple "
           "of 8")
    G = Hq // Hkv
    Gp, BN = attention_at_config(Hq, Hkv, D, S, splits, threads, key_block, tensor_cores)[:2]
    P = partial_rows(G, D, threads)
    half, total, W = D // 2, (Hq + 2 * Hkv) * D, gs.GEN_WORDS
    rows = Hkv * splits * P
    # The heads' rows (G q, one k, at least one v) as a fragment of half
    # columns: a whole number of the threads' rows.
    per = max(1, threads // half)
    R = -(-(G + 2) // per) * per
    if pos is not None:
        _check(isinstance(pos, int) and 0 <= pos < S,
               f"rope_attention_at: pos {pos!r} is outside the cache of {S}")
        _check(not merge_in_split, "rope_attention_at: merge_in_split needs the position "
               "from gen (pos=None)")

    def unit(u, qkv, cos, sin, k_cache, v_cache, gen, o_part, lse):
        g = u // splits
        # At a fixed position the tables are that position's rows.
        p, row_of_p = (gen[gs.POS],) * 2 if pos is None else (pos, 0)
        # Rows 0..G-1: the group's q heads, row G: its k head (both
        # rotated), rows G+1..R-1: its v head.
        o_s = T.alloc_shared((R, D), "bfloat16")
        q_s = T.alloc_shared((Gp, D), "bfloat16")
        lo, hi, cs, sn = (T.alloc_fragment((R, half), "float32") for _ in range(4))
        load_heads(g, qkv, cos, sin, row_of_p, lo, hi, cs, sn)
        # The cached keys' first chunks load from here on, beside the heads
        # and the tables' row (their addresses need p alone).
        T.prefetch_point()
        rotate_heads(lo, hi, cs, sn, o_s)
        # The padding rows (i >= G) are zeros: computed, never stored.
        for i, j in T.Parallel(Gp, D):
            q_s[i, j] = T.if_then_else(i < G, o_s[T.min(i, G - 1), j],
                                       T.cast(0.0, "bfloat16"))
        _split_partials(u, q_s, k_cache, v_cache, p, o_part, lse, Hq, Hkv, D, S,
                        splits, threads, current=(o_s, G, G + 1), key_block=key_block,
                        tensor_cores=tensor_cores)
        row = g * S + p                                  # cache row [g, p]
        T.copy(o_s[G:G + 1, 0:D], k_cache.view(Hkv * S, D)[row, 0])
        T.copy(o_s[G + 1:G + 2, 0:D], v_cache.view(Hkv * S, D)[row, 0])

    def load_heads(g, qkv, cos, sin, row_of_p, lo, hi, cs, sn):
        """Group g's q, k and v heads (halves lo / hi) and the tables' row
        into registers: every load in flight at once (one round trip; copies
        into shared memory, one after the other, took one each)."""
        heads = qkv.view(Hq + 2 * Hkv, D)
        for h, i in T.Parallel(R, half):
            r = T.if_then_else(h < G, g * G + h, Hq + g + T.min(h - G, 1) * Hkv)
            lo[h, i] = T.cast(heads[r, i], "float32")
            hi[h, i] = T.cast(heads[r, i + half], "float32")
            cs[h, i] = cos[row_of_p, i]
            sn[h, i] = sin[row_of_p, i]

    def rotate_heads(lo, hi, cs, sn, o_s):
        """o_s = the q and k rows rotated, the v rows as they came: the
        numbers of bodies._rotate_half (each half a product with cos plus
        or minus one with sin, rounded once), for both elements of a pair
        from the registers that hold them."""
        for h, i in T.Parallel(R, half):
            rot = h <= G
            o_s[h, i] = T.cast(T.if_then_else(rot, lo[h, i] * cs[h, i] - hi[h, i] * sn[h, i],
                                              lo[h, i]), "bfloat16")
            o_s[h, i + half] = T.cast(
                T.if_then_else(rot, hi[h, i] * cs[h, i] + lo[h, i] * sn[h, i], hi[h, i]),
                "bfloat16")

    def attention(qkv: T.Tensor((total,), "bfloat16"), cos: T.Tensor((S, half), "float32"),
                  sin: T.Tensor((S, half), "float32"),
                  k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                  v_cache: T.Tensor((Hkv, S, D), "bfloat16"), gen: T.Tensor((W,), "int32"),
                  o_part: T.Tensor((rows * D,), "float32"), lse: T.Tensor((rows,), "float32")):
        with T.Kernel(Hkv * splits, threads=threads) as u:
            unit(u, qkv, cos, sin, k_cache, v_cache, gen, o_part, lse)

    def attention_fixed(qkv: T.Tensor((total,), "bfloat16"), cos: T.Tensor((half,), "float32"),
                        sin: T.Tensor((half,), "float32"),
                        k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                        v_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                        o_part: T.Tensor((rows * D,), "float32"),
                        lse: T.Tensor((rows,), "float32")):
        with T.Kernel(Hkv * splits, threads=threads) as u:
            unit(u, qkv, cos.view(1, half), sin.view(1, half), k_cache, v_cache, None,
                 o_part, lse)

    def attention_merged(qkv: T.Tensor((total,), "bfloat16"),
                         cos: T.Tensor((S, half), "float32"),
                         sin: T.Tensor((S, half), "float32"),
                         k_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                         v_cache: T.Tensor((Hkv, S, D), "bfloat16"),
                         gen: T.Tensor((W,), "int32"),
                         o_part: T.Tensor((rows * D,), "float32"),
                         lse: T.Tensor((rows,), "float32"),
                         counts: T.Tensor((Hkv,), "int32"), o: T.Tensor((Hq * D,), "bfloat16")):
        with T.Kernel(Hkv * splits, threads=threads) as u:
            unit(u, qkv, cos, sin, k_cache, v_cache, gen, o_part, lse)
            merge_by_last_split(u // splits, counts, o_part, lse, o, Hq, Hkv, D, splits,
                                threads)

    foot = _rope_attention_footprint(Hq, Hkv, D, S, splits, P, pos)
    if pos is not None:
        return t_body(f"rope_attn_{Hq}x{Hkv}x{D}_s{S}_k{splits}_p{pos}"
                      + _block_suffix(key_block, BN) + _tc_suffix(tensor_cores),
                      attention_fixed, Hkv * splits, foot, threads, emit)
    if merge_in_split:
        foot += _merge_footprint(Hq, Hkv, D, splits, P, 6)
        return t_body(f"rope_attn_merged_at_{Hq}x{Hkv}x{D}_s{S}_k{splits}"
                      + _block_suffix(key_block, BN) + _tc_suffix(tensor_cores), attention_merged, Hkv * splits, foot,
                      threads, emit)
    return t_body(f"rope_attn_at_{Hq}x{Hkv}x{D}_s{S}_k{splits}" + _block_suffix(key_block, BN)
                  + _tc_suffix(tensor_cores),
                  attention, Hkv * splits, foot, threads, emit)


def _rope_attention_footprint(Hq, Hkv, D, S, splits, P, pos):
    """rope_attention_at's accesses: units g*splits .. (g+1)*splits - 1 read
    group g's q, k and v heads of qkv (so a group starts once the units of
    the GEMV before that write its heads are done, not all of them) and
    write its cache rows - the whole of kv head g's cache when the row
    depends on gen[POS], row pos alone at a fixed position; every unit
    reads the tables (their one row at a fixed position), the state (none
    at a fixed position: no gen argument, the partials one argument
    earlier) and the caches."""
    G, half = Hq // Hkv, D // 2
    units = [(g * splits, (g + 1) * splits) for g in range(Hkv)]
    foot = tuple(Access("read", 0, 0, base, size, lo, hi)
                 for g, (lo, hi) in enumerate(units)
                 for base, size in ((g * G * D, G * D), ((Hq + g) * D, D),
                                    ((Hq + Hkv + g) * D, D)))
    table = S * half if pos is None else half
    foot += (Access("read", 1, 0, 0, table), Access("read", 2, 0, 0, table),
             Access("read", 3, 0, 0, Hkv * S * D), Access("read", 4, 0, 0, Hkv * S * D))
    if pos is None:
        foot += (Access("read", 5, 0, 0, gs.GEN_WORDS),)
    o_part = 6 if pos is None else 5
    foot += (Access("write", o_part, P * D, 0, P * D), Access("write", o_part + 1, P, 0, P))
    row, size = (0, S * D) if pos is None else (pos * D, D)
    return foot + tuple(Access("write", op, 0, g * S * D + row, size, lo, hi)
                        for op in (3, 4) for g, (lo, hi) in enumerate(units))


def _block_suffix(key_block, block_n):
    """A body name's mark of a chosen key chunk (none for the default)."""
    return f"_n{block_n}" if key_block else ""


def _tc_suffix(tensor_cores):
    """A body name's mark of the attention on tensor cores."""
    return "_tc" if tensor_cores else ""


def attention_merge(Hq, Hkv, D, splits, *, threads=256, emit=True) -> Body:
    """o = sum_s w_s o_part_s / sum_s w_s, w_s = exp2(lse_s - max_s lse_s),
    one unit per kv group g over attention_at's padded rows
    ((g*splits + s)*Gp + i): args (o_part, lse, o [Hq*D]); stores the G
    real rows of the group. A split that had no keys (lse = -inf, o = 0)
    weighs 0. The numbers of bodies.attention_combine; the same for
    partials computed on tensor cores (partial_rows)."""
    G = Hq // Hkv
    Gp = partial_rows(G, D, threads)
    rows = Hkv * splits * Gp

    def merge(o_part: T.Tensor((rows * D,), "float32"), lse: T.Tensor((rows,), "float32"),
              o: T.Tensor((Hq * D,), "bfloat16")):
        with T.Kernel(Hkv, threads=threads) as g:
            merge_group(g, o_part, lse, o, Hq, Hkv, D, splits, threads)

    foot = (Access("read", 0, splits * Gp * D, 0, splits * Gp * D),
            Access("read", 1, splits * Gp, 0, splits * Gp),
            Access("write", 2, G * D, 0, G * D))
    return t_body(f"attn_merge_{Hq}x{Hkv}x{D}_k{splits}", merge, Hkv, foot, threads, emit)


def merge_group(g, o_part, lse, o, Hq, Hkv, D, splits, threads):
    """Group g's rows of o from its splits' partials (attention_merge's
    arithmetic, also run by the group's last split: merge_in_split)."""
    from .bodies import _combine_layout

    G = Hq // Hkv
    Gp = partial_rows(G, D, threads)
    x, w, mx, den, num = merge_fragments(splits, Gp, D, _combine_layout(splits, Gp, D, threads))
    out = T.alloc_shared((Gp, D), "bfloat16")
    load_partials(g, o_part, lse, Hkv, D, splits, Gp, x, w)
    merge_loaded(x, w, mx, den, num, splits, Gp, D)
    T.copy(num, out)
    T.copy(out[0:G, 0:D], o.view(Hq, D)[g * G, 0])


def merge_fragments(splits, Gp, D, layout):
    """The fragments of one group's merge: the partials x and the lse,
    then weights, w [splits, Gp, D] (`layout`: bodies._combine_layout), and
    the max, denominator and numerator [Gp, D]."""
    return (T.alloc_fragment((splits, Gp, D), "float32", layout=layout),
            T.alloc_fragment((splits, Gp, D), "float32", layout=layout),
            T.alloc_fragment((Gp, D), "float32"), T.alloc_fragment((Gp, D), "float32"),
            T.alloc_fragment((Gp, D), "float32"))


def load_partials(g, o_part, lse, Hkv, D, splits, Gp, x, w):
    """Group g's partials into x and its lse, broadcast over D, into w (so
    that every reduction of merge_loaded runs over one layout)."""
    T.copy(o_part.view(Hkv * splits, Gp, D)[g * splits, 0, 0], x)
    for sp, i, d in T.Parallel(splits, Gp, D):
        w[sp, i, d] = lse[(g * splits + sp) * Gp + i]


def merge_loaded(x, w, mx, den, num, splits, Gp, D):
    """num = sum_s w_s x_s / sum_s w_s, w_s = exp2(lse_s - max_s lse_s),
    from what load_partials left in x and w (both overwritten): the
    merge's arithmetic, in one place for every body that merges."""
    T.reduce_max(w, mx, dim=0)
    for sp, i, d in T.Parallel(splits, Gp, D):
        w[sp, i, d] = T.exp2(w[sp, i, d] - mx[i, d])
        x[sp, i, d] = x[sp, i, d] * w[sp, i, d]
    T.reduce_sum(w, den, dim=0)
    T.reduce_sum(x, num, dim=0)
    for i, d in T.Parallel(Gp, D):
        num[i, d] = num[i, d] / den[i, d]


def merge_by_last_split(g, counts, o_part, lse, o, Hq, Hkv, D, splits, threads):
    """The end of a split of group g under merge_in_split: it counts itself
    in on counts[g] (T.block_atomic_add: a release of its partials, an
    acquire of the others'); the split that finds splits - 1 others there
    is the group's last, resets the count for the next layer or step and
    merges the group's partials into o. No merge task and no stage
    boundary: the output projection waits for the group's splits alone."""
    before = T.block_atomic_add(counts[g], 1)
    for _ in T.serial(T.if_then_else(before == splits - 1, 1, 0)):
        counts[g] = 0
        merge_group(g, o_part, lse, o, Hq, Hkv, D, splits, threads)


def _merge_footprint(Hq, Hkv, D, splits, Gp, first):
    """merge_in_split's accesses of group g's units, the arguments from
    `first` on (o_part, lse, counts, o): they read the group's partials
    (the last one reads them all), count on counts[g] and may write the
    group's rows of o."""
    G, rows = Hq // Hkv, splits * Gp
    units = [(g * splits, (g + 1) * splits) for g in range(Hkv)]
    return tuple(a for g, (lo, hi) in enumerate(units) for a in (
        Access("read", first, 0, g * rows * D, rows * D, lo, hi),
        Access("read", first + 1, 0, g * rows, rows, lo, hi),
        Access("write", first + 2, 0, g, 1, lo, hi),
        Access("write", first + 3, 0, g * G * D, G * D, lo, hi)))


def argmax_chunk(V, threads=256):
    """Logits per argmax_partial unit: 8 per thread (one 16-byte vector)."""
    return min(8 * threads, -(-V // threads) * threads)


def philox_word0(c0, c1, k0, k1):
    """Word 0 of Philox-4x32-10 (philox.py) for counter (c0, c1, 0, 0) and
    key (k0, k1), as T int64 expressions holding uint32 values: a 32x32-bit
    product fits 64 bits (wrapping in the sign bit only), its high and low
    words are shifts and masks."""
    from . import philox as ph

    mask = ph.MASK
    c = [c0, c1, 0, 0]
    for r in range(ph.ROUNDS):
        if r:
            k0, k1 = (k0 + ph.W0) & mask, (k1 + ph.W1) & mask
        p0, p1 = c[0] * ph.M0, c[2] * ph.M1
        hi0, lo0 = (p0 >> 32) & mask, p0 & mask
        hi1, lo1 = (p1 >> 32) & mask, p1 & mask
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c[0]


def gumbel_noise(token, pos, k0, k1):
    """-log(-log(u)) in float32, u from Philox word 0 as philox.uniform
    makes it (int64 T expressions in, float32 out)."""
    word = philox_word0(token, pos, k0, k1)
    u = (T.cast(word >> 9, "float32") + 0.5) * float(2.0 ** -23)
    return -T.log(-T.log(u))


# Sampling settings: sampling[INV_T] = 1 / temperature (0: greedy),
# sampling[TOP_K] = k (0: the whole vocabulary), sampling[TOP_P] = p.
SAMPLING_WORDS, INV_T, TOP_K, TOP_P = 3, 0, 1, 2
# The largest top-k the device keeps candidates for: each chunk of the
# logits hands its k largest to the pick, which takes the k largest of them.
MAX_TOP_K = 64
# Rounds of sample_filtered before it gives up; each round at least halves
# the expected mass left to search. Rounds after the pick is kept cost one
# read of a shared flag each.
FILTER_ROUNDS = 64
# Chunks of the logits and scores in flight in one sample_filtered round.
FILTER_STAGES = 6


def sampling_modes(inv_t, top_k, top_p):
    """(fast, noisy, whole) for the sampling words, as T expressions of the
    sampling tensor's words (the tasks) or as bools of numbers (the host):
    fast: top-k from the chunks' candidates (1 <= k <= MAX_TOP_K, with any
    top-p); noisy: Gumbel noise on every logit (sampling without those
    candidates); whole: of those, the settings that filter the whole
    vocabulary (top-p < 1 without top-k, or top-k over MAX_TOP_K with or
    without top-p), which sample_filtered serves. Every sampled setting is
    one of fast and noisy."""
    sampled = inv_t > 0.0
    fast = sampled & (top_k >= 1) & (top_k <= MAX_TOP_K)
    large_k = top_k > MAX_TOP_K
    noisy = sampled & ((top_k == 0) | large_k)
    whole = noisy & (large_k | (top_p < 1.0))
    return fast, noisy, whole


def noise_counter(gen):
    """(position, key low, key high) of the step's Gumbel noise: int64 T
    expressions of the state's POS and seed words (uint32 values)."""
    mask = 0xFFFFFFFF
    pos = T.cast(gen[gs.POS], "int64")
    k0 = T.cast(gen[gs.SEED_LO], "int64") & mask
    k1 = T.cast(gen[gs.SEED_HI], "int64") & mask
    return pos, k0, k1


def first_of_max(x, at, top, first, base):
    """top = the largest of the [1, n] fragment x, first = the lowest index
    base + j holding it (as an exact float; 2^24 where none), with `at` as
    scratch: torch.argmax's tie rule."""
    n = x.shape[1]
    T.reduce_max(x, top, dim=1)
    for i, j in T.Parallel(1, n):
        at[i, j] = T.if_then_else(x[i, j] == top[i], T.cast(base + j, "float32"),
                                  float(1 << 24))
    T.reduce_min(at, first, dim=1)


def argmax_partial(V, *, threads=256, emit=True) -> Body:
    """Per chunk u of the scores: the largest value and the first index that
    holds it (as an exact float: indices < 2^24), at best[2u], [2u+1]:
    args (logits [V] bf16, gen [GEN_WORDS] i32, sampling [SAMPLING_WORDS]
    f32, best [2*units] f32, cand [units*MAX_TOP_K*2] f32). The scores are
    the logits (greedy) or, when sampling[INV_T] = 1/T is > 0 and
    sampling[TOP_K] is 0, logit / T + the Gumbel noise of each token at
    gen[POS] under the seed words (generation_state.py): their argmax is a
    sample of softmax(logits / T). With top-k (sampling[TOP_K] = k >= 1)
    the chunk instead hands its k largest logits, largest first (ties: the
    lower index first), to cand[(u*MAX_TOP_K + r)*2], [.. + 1]: value and
    index. When the pick filters the whole vocabulary (filtered(): top-p
    without top-k, or top-k over MAX_TOP_K), the scores are the noisy ones
    and the chunk also writes them to scores [V] f32, and its largest raw
    logit and the first index holding it to cand[u*MAX_TOP_K*2], [.. + 1].
    The last chunk is masked past V. Ties pick the lowest index, as
    torch.argmax does."""
    chunk = argmax_chunk(V, threads)
    units = -(-V // chunk)
    _check(V < (1 << 24), f"argmax_partial: vocabulary {V} is over 2^24 (indices as floats)")
    W, K = gs.GEN_WORDS, MAX_TOP_K

    def partial(logits: T.Tensor((V,), "bfloat16"), gen: T.Tensor((W,), "int32"),
                sampling: T.Tensor((SAMPLING_WORDS,), "float32"),
                best: T.Tensor((2 * units,), "float32"),
                cand: T.Tensor((units * K * 2,), "float32"),
                scores: T.Tensor((V,), "float32")):
        def put_best(u, top, first, i):
            best[2 * u] = top[i]
            best[2 * u + 1] = first[i]

        def put_cand(slot, top, first, i):
            cand[slot * 2] = top[i]
            cand[slot * 2 + 1] = first[i]

        chunk_pick(logits, gen, sampling, V, chunk, units, threads, None, put_best, put_cand,
                   scores)

    foot = _logits_chunks(V, chunk, units) + (
        Access("read", 1, 0, 0, W), Access("read", 2, 0, 0, SAMPLING_WORDS),
        Access("write", 3, 2, 0, 2), Access("write", 4, 2 * K, 0, 2 * K))
    short = V - (units - 1) * chunk
    foot += ((Access("write", 5, chunk, 0, chunk, 0, units - 1),) if units > 1 else ()) + \
        (Access("write", 5, 0, (units - 1) * chunk, short, units - 1, units),)
    return t_body(f"argmax_partial_{V}_c{chunk}", partial, units, foot, threads, emit)


def _logits_chunks(V, chunk, units):
    """The footprint of reading chunk u of logits [V] (operand 0); the last
    chunk may be short."""
    whole = (Access("read", 0, chunk, 0, chunk, 0, units - 1),) if units > 1 else ()
    return whole + (Access("read", 0, 0, (units - 1) * chunk, V - (units - 1) * chunk,
                           units - 1, units),)


def chunk_pick(logits, gen, sampling, V, chunk, units, threads, base, put_best, put_cand,
               scores):
    """The body of argmax_partial over logits [V] (chunk u a unit): the
    chunk's top-k candidates (put_cand(u * MAX_TOP_K + r, top, first, i):
    the pair is top[i], first[i]), its noisy or raw largest score
    (put_best(u, top, first, i)) and, when `scores` is
    given, the whole-vocabulary path. `base` (None for 0, or a function
    returning a T expression inside the kernel) is the global index of logits[0]: the indices handed on and the noise's
    token ids are base + the local index (a rank's rows of the vocabulary)."""
    K = MAX_TOP_K
    with T.Kernel(units, threads=threads) as u:
        def at0():
            return u * chunk if base is None else base() + u * chunk

        x = T.alloc_fragment((1, chunk), "float32")
        at = T.alloc_fragment((1, chunk), "float32")
        top = T.alloc_fragment((1,), "float32")
        first = T.alloc_fragment((1,), "float32")
        T.copy(logits.view(1, V)[0, u * chunk], x)
        for i, j in T.Parallel(1, chunk):
            x[i, j] = T.if_then_else(u * chunk + j < V, x[i, j], -T.infinity("float32"))
        inv_t = sampling[INV_T]
        top_k = T.cast(sampling[TOP_K], "int32")
        fast, noisy, whole = sampling_modes(inv_t, top_k, sampling[TOP_P])
        # Top-k: the chunk's k largest, one extraction a round (a loop of
        # k trips; none unless top-k sampling with k <= MAX_TOP_K).
        for r in T.serial(T.if_then_else(fast, top_k, 0)):
            first_of_max(x, at, top, first, at0())
            for i in T.Parallel(1):
                put_cand(u * K + r, top, first, i)
            for i, j in T.Parallel(1, chunk):
                x[i, j] = T.if_then_else(T.cast(at0() + j, "float32") == first[i],
                                         -T.infinity("float32"), x[i, j])
        # The whole vocabulary filtered: the pick's reference logit
        # (the largest) and its fallback token (the first holding it).
        if scores is not None:
            for _ in T.serial(T.if_then_else(whole, 1, 0)):
                first_of_max(x, at, top, first, at0())
                for i in T.Parallel(1):
                    put_cand(u * K, top, first, i)
        # No candidates: the noise (greedy steps skip it: a loop of zero
        # or one trip).
        for _ in T.serial(T.if_then_else(noisy, 1, 0)):
            pos, k0, k1 = noise_counter(gen)
            for i, j in T.Parallel(1, chunk):
                token = T.cast(at0() + j, "int64")
                x[i, j] = x[i, j] * inv_t + gumbel_noise(token, pos, k0, k1)
        if scores is not None:
            for _ in T.serial(T.if_then_else(whole, 1, 0)):
                T.copy(x, scores.view(1, V)[0, u * chunk])
        first_of_max(x, at, top, first, at0())
        for i in T.Parallel(1):
            put_best(u, top, first, i)


def pick_advance(V, S, units, *, whole=True, threads=256, emit=True) -> Body:
    """The step's pick and the state's advance, one unit: args (best
    [2*units], cand [units*MAX_TOP_K*2] f32 of argmax_partial, sampling,
    tokens [S] i32, gen [GEN_WORDS] i32). The pick is the lowest index
    among the partials' equal maxima; with top-k sampling (sampling[TOP_K]
    = k >= 1) it is drawn from the k largest logits of the partials'
    candidates (sample_top_k), and when the whole vocabulary is filtered
    (sampling_modes) from logits [V] and the noisy scores [V] of the
    partials (sample_filtered); then gen and tokens change as
    generation_state.advance says. One thread writes the state (a parallel
    over shared tiles runs each element once). whole=False: no logits and
    scores arguments and no whole-vocabulary path (the pick of a graph of
    several ranks, whose candidates come from every rank: greedy,
    temperature and top-k; tensor_parallel.check_sampling refuses the
    rest)."""
    W, K = gs.GEN_WORDS, MAX_TOP_K
    n = -(-units // threads) * threads

    if whole:
        def pick(best: T.Tensor((2 * units,), "float32"),
                 cand: T.Tensor((units * K * 2,), "float32"),
                 sampling: T.Tensor((SAMPLING_WORDS,), "float32"),
                 tokens: T.Tensor((S,), "int32"), gen: T.Tensor((W,), "int32"),
                 logits: T.Tensor((V,), "bfloat16"), scores: T.Tensor((V,), "float32")):
            pick_body(best, cand, sampling, tokens, gen, logits, scores)
    else:
        def pick(best: T.Tensor((2 * units,), "float32"),
                 cand: T.Tensor((units * K * 2,), "float32"),
                 sampling: T.Tensor((SAMPLING_WORDS,), "float32"),
                 tokens: T.Tensor((S,), "int32"), gen: T.Tensor((W,), "int32")):
            pick_body(best, cand, sampling, tokens, gen, None, None)

    def pick_body(best, cand, sampling, tokens, gen, logits, scores):
        with T.Kernel(1, threads=threads) as u:
            top = T.alloc_fragment((1, n), "float32")
            at = T.alloc_fragment((1, n), "float32")
            most = T.alloc_fragment((1,), "float32")
            first = T.alloc_fragment((1,), "float32")
            pair = best.view(units, 2)
            for i, j in T.Parallel(1, n):
                top[i, j] = T.if_then_else(j < units, pair[T.min(j, units - 1), 0],
                                           -T.infinity("float32"))
            T.reduce_max(top, most, dim=1)
            for i, j in T.Parallel(1, n):
                at[i, j] = T.if_then_else(top[i, j] == most[i], pair[T.min(j, units - 1), 1],
                                          float(1 << 24))
            T.reduce_min(at, first, dim=1)
            state = T.alloc_shared((W,), "int32")
            new = T.alloc_shared((W,), "int32")
            pick_s = T.alloc_shared((1,), "int32")
            token_s = T.alloc_shared((1,), "int32")
            for i in T.Parallel(1):
                pick_s[0] = T.cast(first[i], "int32")   # every holder, the same value
            inv_t, top_k = sampling[INV_T], T.cast(sampling[TOP_K], "int32")
            fast, _, filtered = sampling_modes(inv_t, top_k, sampling[TOP_P])
            for _ in T.serial(T.if_then_else(fast, 1, 0)):
                sample_top_k(cand, units, threads, inv_t, top_k, sampling[TOP_P], gen, pick_s)
            if logits is not None:
                for _ in T.serial(T.if_then_else(filtered, 1, 0)):
                    sample_filtered(logits, scores, cand, units, threads, inv_t, top_k,
                                    sampling[TOP_P], pick_s)
            T.copy(gen, state)
            p, given, end = state[gs.POS], state[gs.GIVEN], state[gs.END]
            live = state[gs.DONE] == 0
            nxt = p + 1
            room = nxt < end
            emits = live & room & (nxt >= given)
            slot = T.min(T.max(nxt, 0), S - 1)
            # Parallels over shared tiles alone run each element on one
            # thread: one writer per word of the state and for the token.
            for k in T.Parallel(W):
                picked = pick_s[0]
                eos = picked == state[gs.EOS]
                for w in gs.EOS_MORE:
                    eos = eos | (picked == state[w])
                stop = live & ((nxt >= end) | (emits & (eos | (nxt == end - 1))))
                new[k] = T.if_then_else(
                    (k == gs.POS) & live & room, nxt, T.if_then_else(
                        (k == gs.DONE) & stop, 1, T.if_then_else(
                            (k == gs.GENERATED) & emits, state[k] + 1, T.if_then_else(
                                (k == gs.LAST) & live, picked, state[k]))))
            for k in T.Parallel(1):
                token_s[k] = T.if_then_else(emits, pick_s[k], tokens[slot])
            T.copy(token_s, tokens[slot])
            T.copy(new, gen)

    foot = (Access("read", 0, 0, 0, 2 * units), Access("read", 1, 0, 0, units * K * 2),
            Access("read", 2, 0, 0, SAMPLING_WORDS),
            Access("read", 3, 0, 0, S), Access("write", 3, 0, 0, S),
            Access("read", 4, 0, 0, W), Access("write", 4, 0, 0, W)) + \
        ((Access("read", 5, 0, 0, V), Access("read", 6, 0, 0, V)) if whole else ())
    name = f"pick_advance_{V}_s{S}_u{units}" + ("" if whole else "_topk")
    return t_body(name, pick, 1, foot, threads, emit)


def sample_top_k(cand, units, threads, inv_t, top_k, top_p, gen, pick_s):
    """Inside pick_advance: pick_s[0] = a sample of softmax(logits / T)
    restricted to the k largest logits (exactly k: ties by the lower index,
    as torch.topk) and, of those, to the smallest prefix of them, largest
    first, whose mass reaches top_p (transformers' TopPLogitsWarper: a
    token stays while the mass ranked above it is below top_p; the first
    always stays). The k largest come from the partials' candidates (each
    chunk's k largest); the draw is the Gumbel-max of the kept ones with
    the noise of their token ids (philox.py)."""
    K = MAX_TOP_K
    total = units * K
    NC = -(-total // threads) * threads
    flat = cand.view(total, 2)
    cv = T.alloc_fragment((1, NC), "float32")
    ci = T.alloc_fragment((1, NC), "float32")
    most = T.alloc_fragment((1,), "float32")
    low = T.alloc_fragment((1,), "float32")
    at = T.alloc_fragment((1, NC), "float32")
    for i, j in T.Parallel(1, NC):
        ok = (j < total) & (j % K < top_k)
        cv[i, j] = T.if_then_else(ok, flat[T.min(j, total - 1), 0], -T.infinity("float32"))
        ci[i, j] = T.if_then_else(ok, flat[T.min(j, total - 1), 1], float(1 << 24))
    sv = T.alloc_shared((K,), "float32")          # the k largest, largest first
    si = T.alloc_shared((K,), "float32")          # their token ids
    for r in T.Parallel(K):
        sv[r] = -T.infinity("float32")
        si[r] = 0.0
    for r in T.serial(top_k):
        T.reduce_max(cv, most, dim=1)
        for i, j in T.Parallel(1, NC):
            at[i, j] = T.if_then_else(cv[i, j] == most[i], ci[i, j], float(1 << 24))
        T.reduce_min(at, low, dim=1)
        for i in T.Parallel(1):
            sv[r] = most[i]
            si[r] = low[i]
        for i, j in T.Parallel(1, NC):
            cv[i, j] = T.if_then_else(ci[i, j] == low[i], -T.infinity("float32"), cv[i, j])
    # Their probabilities relative to the largest, and the mass ranked
    # above each: before[r] = sum of pr[s] for s < r.
    pr = T.alloc_shared((K,), "float32")
    for r in T.Parallel(K):
        pr[r] = T.if_then_else(r < top_k, T.exp((sv[r] - sv[0]) * inv_t), 0.0)
    cum = T.alloc_fragment((K, K), "float32")
    before = T.alloc_fragment((K,), "float32")
    for r, c in T.Parallel(K, K):
        cum[r, c] = T.if_then_else(c < r, pr[c], 0.0)
    T.reduce_sum(cum, before, dim=1)
    before_s = T.alloc_shared((K,), "float32")
    for r in T.Parallel(K):
        before_s[r] = before[r]
    # Rows of the k as [1, KW] fragments: at least one element a thread.
    KW = max(K, threads)
    row = T.alloc_fragment((1, KW), "float32")
    mass = T.alloc_fragment((1,), "float32")
    for i, r in T.Parallel(1, KW):
        row[i, r] = T.if_then_else(r < K, pr[T.min(r, K - 1)], 0.0)
    T.reduce_sum(row, mass, dim=1)
    pos, k0, k1 = noise_counter(gen)
    for i, r in T.Parallel(1, KW):
        c = T.min(r, K - 1)
        keep = (r < top_k) & ((r == 0) | (before_s[c] < top_p * mass[i]))
        noise = gumbel_noise(T.cast(si[c], "int64"), pos, k0, k1)
        row[i, r] = T.if_then_else(keep, sv[c] * inv_t + noise, -T.infinity("float32"))
    # Reductions of [1, KW] rows have their own results (the layouts of
    # [1, NC] ones differ).
    best = T.alloc_fragment((1,), "float32")
    first = T.alloc_fragment((1,), "float32")
    T.reduce_max(row, best, dim=1)
    rank = T.alloc_fragment((1, KW), "float32")
    for i, r in T.Parallel(1, KW):
        rank[i, r] = T.if_then_else(row[i, r] == best[i], T.cast(r, "float32"), float(KW))
    T.reduce_min(rank, first, dim=1)
    for i in T.Parallel(1):
        # first < top_k: rank 0 is always kept (clamped all the same).
        pick_s[0] = T.cast(si[T.min(T.cast(first[i], "int32"), K - 1)], "int32")


def filter_chunk(V, threads):
    """Logits a sample_filtered pass takes at a time: 8 per thread."""
    return min(8 * threads, -(-V // threads) * threads)


# Bits of the bfloat16 order key resolved per top_k_mass pass (4 keys a
# pass: 3 counts per logit), and the passes that resolve all 16.
KEY_DIGIT_BITS = 2
KEY_PASSES = 16 // KEY_DIGIT_BITS
# Chunks in flight in those passes: fewer than the rounds' (the mode is
# rare), so that the pick's shared memory stays within the 100 KiB carveout
# step it had (the whole persistent kernel's L1 shrinks past it).
KEY_STAGES = 3


def order_key(x):
    """A bfloat16 logit's 16 bits as an int32 in [0, 65536) that orders as
    the values do (sign-magnitude to offset binary; -0 just below +0)."""
    b = T.cast(T.reinterpret(x, "int16"), "int32")
    return T.if_then_else(b >= 0, b, b ^ 0x7FFF) + 32768


def top_k_mass(logits, top_k, inv_t, lmax, threads, mass_k_s):
    """Inside sample_filtered, for top-p within a top-k over MAX_TOP_K:
    mass_k_s[0] = the mass of the k largest logits, sum of exp((logit -
    lmax) / T) over them (ties at the k-th value by the lower index, which
    does not change the sum: tied logits have equal terms). The k-th
    largest order key (order_key) is found digit by digit from the top,
    KEY_DIGIT_BITS a pass over the vocabulary (a radix select: each pass
    counts the logits at or above 3 keys of the remaining range); a last
    pass sums the terms above it and those of its ties, and the k's mass
    is the first plus k - (count above) of the ties' mean. One pipelined
    loop serves every pass (one set of shared stages)."""
    V = logits.shape[0]
    CH = filter_chunk(V, threads)
    chunks = -(-V // CH)
    digits = 1 << KEY_DIGIT_BITS
    k = T.cast(top_k, "float32")
    base_s = T.alloc_shared((1,), "int32")       # the k-th key is in [base, base + range)
    above_s = T.alloc_shared((1,), "float32")    # logits with keys >= base + range
    for i in T.Parallel(1):
        base_s[0] = 0
        above_s[0] = 0.0
    x = T.alloc_shared((1, CH), "bfloat16")
    # Digit passes: counts at or above base + d * step, d = 1 .. 3. The last
    # pass: the terms above the k-th key, the ties' terms, the ties' count.
    accs = [T.alloc_fragment((1, CH), "float32") for _ in range(digits - 1)]
    sums = [T.alloc_fragment((1,), "float32") for _ in range(digits - 1)]
    for level in T.serial(KEY_PASSES + 1):
        # Read here, not in the Parallel(1) below that writes them: its
        # threads would read what another thread had just written there.
        base, above, mass_before = base_s[0], above_s[0], mass_k_s[0]
        lv = T.cast(level, "int32")
        last = lv == KEY_PASSES
        step = T.cast(1, "int32") << T.max(16 - KEY_DIGIT_BITS * (lv + 1), 0)
        for acc in accs:
            T.clear(acc)
        for c in T.Pipelined(chunks, num_stages=KEY_STAGES):
            T.copy(logits.view(1, V)[0, c * CH], x)
            for i, j in T.Parallel(1, CH):
                key = T.if_then_else(c * CH + j < V, order_key(x[i, j]), -1)
                e = T.exp((T.cast(x[i, j], "float32") - lmax) * inv_t)
                final = (T.if_then_else(key > base, e, 0.0), T.if_then_else(key == base, e, 0.0),
                         T.if_then_else(key == base, 1.0, 0.0))
                for d, acc in enumerate(accs):
                    digit_pass = T.if_then_else(key >= base + (d + 1) * step, 1.0, 0.0)
                    acc[i, j] = acc[i, j] + T.if_then_else(last, final[d], digit_pass)
        for acc, total in zip(accs, sums):
            T.reduce_sum(acc, total, dim=1)
        for i in T.Parallel(1):
            # The largest digit whose key has k or more logits at or above
            # it (digit 0: base itself, which has; digit 0 also means none
            # found yet); the count above the new range is the next digit's.
            digit = T.cast(0, "int32")
            upper = above
            for d in range(digits - 1, 0, -1):
                hit = sums[d - 1][i] >= k
                upper = T.if_then_else((digit != 0) | hit, upper, sums[d - 1][i])
                digit = T.if_then_else((digit == 0) & hit, d, digit)
            mass_k_s[0] = T.if_then_else(
                last, sums[0][i] + (k - above) * sums[1][i] / T.max(sums[2][i], 1.0),
                mass_before)
            above_s[0] = T.if_then_else(last, above, upper)
            base_s[0] = T.if_then_else(last, base, base + digit * step)


def sample_filtered(logits, scores, cand, units, threads, inv_t, top_k, top_p, pick_s):
    """Inside pick_advance, for top-p without top-k or top-k over MAX_TOP_K
    (sampling_modes' `whole`): pick_s[0] = the largest noisy score
    (argmax_partial's logit / T + Gumbel noise) among the kept tokens, the
    set sample_top_k keeps but ranked over the whole vocabulary (logits
    descending, ties by the lower index): a token stays while fewer than k
    rank above it and, with top_p < 1, the mass ranked above it is below
    top_p of the mass of the k (of the whole vocabulary without top-k; the
    k's from top_k_mass). That is a sample of the renormalised softmax
    of the kept set, the same draw as a sort would give, found without one:

    The kept set is a prefix of the ranking. pick_s[0] holds the largest
    score of all (the partials'); a pass over the vocabulary counts the
    tokens and the mass ranked above the candidate s and finds the largest
    score among them. If s is kept it is the pick; if not, nothing ranked
    below s is kept either, and the largest score ranked above s is the
    next candidate. Each round leaves, in expectation, at most half of the
    mass still searched, so ln(mass / kept mass) + 1 rounds are expected
    (about 8 for top-k 100 of a flat 128k vocabulary); after
    FILTER_ROUNDS rounds (odds below 1e-20 for any
    vocabulary under 2^24) the pick is the top-ranked token, which is
    always kept. The passes run on this one block: mass terms are
    exp((logit - largest) / T), the largest from the partials' raw maxima
    in cand[u*MAX_TOP_K*2], [.. + 1]."""
    K = MAX_TOP_K
    V = logits.shape[0]
    CH = filter_chunk(V, threads)
    passes = -(-V // CH)
    n = -(-units // threads) * threads
    big = float(1 << 24)
    ninf = -T.infinity("float32")
    # The largest logit and the first token holding it (the fallback).
    raw = T.alloc_fragment((1, n), "float32")
    at = T.alloc_fragment((1, n), "float32")
    most = T.alloc_fragment((1,), "float32")
    first = T.alloc_fragment((1,), "float32")
    for i, j in T.Parallel(1, n):
        raw[i, j] = T.if_then_else(j < units, cand[T.min(j, units - 1) * K * 2], ninf)
    T.reduce_max(raw, most, dim=1)
    for i, j in T.Parallel(1, n):
        at[i, j] = T.if_then_else((j < units) & (raw[i, j] == most[i]),
                                  cand[T.min(j, units - 1) * K * 2 + 1], big)
    T.reduce_min(at, first, dim=1)
    lmax_s = T.alloc_shared((1,), "float32")
    top0_s = T.alloc_shared((1,), "int32")
    done_s = T.alloc_shared((1,), "int32")
    for i in T.Parallel(1):
        lmax_s[0] = most[i]
        top0_s[0] = T.cast(first[i], "int32")
        done_s[0] = 0
    keep_k = T.cast(T.if_then_else(top_k > 0, top_k, V), "float32")
    # The mass top_p is a share of: the k's (top_k_mass) or, where 0, the
    # whole vocabulary's (summed by the rounds).
    mass_k_s = T.alloc_shared((1,), "float32")
    for i in T.Parallel(1):
        mass_k_s[0] = 0.0
    for _ in T.serial(T.if_then_else((top_k > 0) & (top_k < V) & (top_p < 1.0), 1, 0)):
        top_k_mass(logits, top_k, inv_t, lmax_s[0], threads, mass_k_s)
    x = T.alloc_shared((1, CH), "bfloat16")
    y = T.alloc_shared((1, CH), "float32")
    acc_mass = T.alloc_fragment((1, CH), "float32")    # every token's
    acc_above = T.alloc_fragment((1, CH), "float32")   # ranked above s: mass,
    acc_count = T.alloc_fragment((1, CH), "float32")   # count,
    acc_best = T.alloc_fragment((1, CH), "float32")    # largest score,
    acc_at = T.alloc_fragment((1, CH), "float32")      # its first token
    mass = T.alloc_fragment((1,), "float32")
    above = T.alloc_fragment((1,), "float32")
    count = T.alloc_fragment((1,), "float32")
    best = T.alloc_fragment((1,), "float32")
    best_at = T.alloc_fragment((1,), "float32")
    # One round a trip while the candidate is not kept; a trip after that
    # only reads the flag. Not a nest of two data-dependent trip counts:
    # ptxas 13.0 -O3 drops the middle loop's test of the flag in that shape
    # and runs every round (docs/toolchain.md).
    for _ in T.serial(FILTER_ROUNDS):
        for _ in T.serial(T.if_then_else(done_s[0] == 0, 1, 0)):
            s = pick_s[0]
            ls = T.cast(logits[s], "float32")
            lmax = lmax_s[0]
            for i, j in T.Parallel(1, CH):
                acc_mass[i, j] = 0.0
                acc_above[i, j] = 0.0
                acc_count[i, j] = 0.0
                acc_best[i, j] = ninf
                acc_at[i, j] = big
            # Per-thread sums over the chunks, reduced once after them;
            # the chunks stream through FILTER_STAGES shared buffers (one
            # block reads the whole vocabulary: the copies must overlap).
            for c in T.Pipelined(passes, num_stages=FILTER_STAGES):
                T.copy(logits.view(1, V)[0, c * CH], x)
                T.copy(scores.view(1, V)[0, c * CH], y)
                for i, j in T.Parallel(1, CH):
                    t = c * CH + j
                    ok = t < V
                    xv = T.cast(x[i, j], "float32")
                    e = T.if_then_else(ok, T.exp((xv - lmax) * inv_t), 0.0)
                    up = ok & ((xv > ls) | ((xv == ls) & (t < s)))
                    acc_mass[i, j] = acc_mass[i, j] + e
                    acc_above[i, j] = acc_above[i, j] + T.if_then_else(up, e, 0.0)
                    acc_count[i, j] = acc_count[i, j] + T.if_then_else(up, 1.0, 0.0)
                    # Earlier passes hold lower tokens: a strict > keeps
                    # the first of equal scores.
                    better = up & (y[i, j] > acc_best[i, j])
                    acc_at[i, j] = T.if_then_else(better, T.cast(t, "float32"),
                                                  acc_at[i, j])
                    acc_best[i, j] = T.if_then_else(better, y[i, j], acc_best[i, j])
            T.reduce_sum(acc_mass, mass, dim=1)
            T.reduce_sum(acc_above, above, dim=1)
            T.reduce_sum(acc_count, count, dim=1)
            T.reduce_max(acc_best, best, dim=1)
            for i, j in T.Parallel(1, CH):
                acc_at[i, j] = T.if_then_else(acc_best[i, j] == best[i], acc_at[i, j], big)
            T.reduce_min(acc_at, best_at, dim=1)
            for i in T.Parallel(1):
                share_of = T.if_then_else(mass_k_s[0] > 0.0, mass_k_s[0], mass[i])
                kept = (count[i] < keep_k) & ((top_p >= 1.0) | (above[i] < top_p * share_of))
                done_s[0] = T.cast(T.if_then_else(kept, 1, 0), "int32")
                # Rejected: s ranks below the whole kept set, which
                # ranks above it, so count > 0 and best_at is a token.
                pick_s[0] = T.if_then_else(kept, s, T.cast(T.min(best_at[i], float(V - 1)),
                                                         "int32"))
    for i in T.Parallel(1):
        pick_s[0] = T.if_then_else(done_s[0] == 1, pick_s[0], top0_s[0])
