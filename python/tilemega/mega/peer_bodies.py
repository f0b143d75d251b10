"""Task bodies of the collectives between ranks (graphs of several GPUs,
`Graph(ranks=R)`), written in `T.*`.

A one-shot all-reduce of x [n] over R ranks: every rank owns an inbox
[R, n]; `push_to_ranks` (one unit a chunk of C elements) writes the rank's
chunk of x into row `rank` of every rank's inbox, its own included, through
R tensors the runtime binds per rank to the ranks' inboxes (peer memory over
NVLink); once every rank's push is done (a peer event), `sum_inbox` adds
the R rows in rank order (f32, rounded once), so every rank computes the
same sum bit for bit.
"""

import tilemega.language as T

from .bodies import Access, _check, t_body


def chunk_elements(n, threads):
    """Elements of one unit: 8 bf16 (16 bytes) a thread, at most n."""
    C = min(n, 8 * threads)
    _check(n % C == 0, f"all-reduce of {n} elements: not a multiple of the {C}-element "
           f"chunks of {threads} threads")
    return C


def push_to_ranks(n, R, *, threads=256, emit=True):
    """args (x [n], rank [1] i32, to_0 .. to_{R-1} [R, n]): unit u copies
    x[u*C : (u+1)*C] to row rank[0] of every to_q."""
    C = chunk_elements(n, threads)

    def push(x, rank, *to):
        with T.Kernel(n // C, threads=threads) as u:
            r = rank[0]
            chunk = T.alloc_fragment((C,), "bfloat16")
            T.copy(x[u * C], chunk)
            for inbox in to:
                T.copy(chunk, inbox.view(R * n)[r * n + u * C])

    # R inbox parameters: the signature is built, not written out.
    push.__signature__ = _signature(
        [("x", T.Tensor((n,), "bfloat16")), ("rank", T.Tensor((1,), "int32"))]
        + [(f"to_{q}", T.Tensor((R, n), "bfloat16")) for q in range(R)])
    # Which row of the peers' inboxes depends on the rank: the whole inbox.
    foot = (Access("read", 0, C, 0, C), Access("read", 1, 0, 0, 1)) + tuple(
        Access("write", 2 + q, 0, 0, R * n) for q in range(R))
    return t_body(f"push_{n}_r{R}", push, n // C, foot, threads, emit)


def sum_inbox(n, R, *, residual=False, threads=256, emit=True):
    """args (inbox [R, n], out [n]): out = inbox[0] + ... + inbox[R-1], in
    rank order, f32 rounded once to bf16. residual: args (inbox, x [n], out)
    and out = x + inbox[0] + ... + inbox[R-1] (the residual add of a
    row-parallel projection, rounded once as the one-GPU projection's)."""
    C = chunk_elements(n, threads)
    if residual:
        def reduce(inbox: T.Tensor((R, n), "bfloat16"), x: T.Tensor((n,), "bfloat16"),
                   out: T.Tensor((n,), "bfloat16")):
            add_rows(inbox, x, out)
    else:
        def reduce(inbox: T.Tensor((R, n), "bfloat16"), out: T.Tensor((n,), "bfloat16")):
            add_rows(inbox, None, out)

    def add_rows(inbox, x, out):
        with T.Kernel(n // C, threads=threads) as u:
            row = T.alloc_fragment((C,), "bfloat16")
            acc = T.alloc_fragment((C,), "float32")
            total = T.alloc_fragment((C,), "bfloat16")
            T.clear(acc)
            if x is not None:
                T.copy(x[u * C], row)
                for i in T.Parallel(C):
                    acc[i] = acc[i] + T.cast(row[i], "float32")
            for q in range(R):
                T.copy(inbox.view(R * n)[q * n + u * C], row)
                for i in T.Parallel(C):
                    acc[i] = acc[i] + T.cast(row[i], "float32")
            for i in T.Parallel(C):
                total[i] = T.cast(acc[i], "bfloat16")
            T.copy(total, out[u * C])

    out_arg = 2 if residual else 1
    foot = tuple(Access("read", 0, C, q * n, C) for q in range(R)) + \
        ((Access("read", 1, C, 0, C),) if residual else ()) + \
        (Access("write", out_arg, C, 0, C),)
    name = f"sum_inbox_{'residual_' if residual else ''}{n}_r{R}"
    return t_body(name, reduce, n // C, foot, threads, emit)


def _signature(params):
    """An inspect.Signature of annotated positional parameters [(name, T.Tensor)]."""
    import inspect

    return inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                annotation=ann) for name, ann in params])


def argmax_partial_to_ranks(V, R, *, threads=256, emit=True):
    """generation_bodies.argmax_partial of a rank's rows of the vocabulary,
    handing its pairs to every rank: args (logits [V] bf16 (the rank's rows
    [rank V, (rank+1) V) of the whole vocabulary), gen, sampling, rank [1]
    i32, best_to_0 .. best_to_{R-1} [R*2*units] f32, cand_to_0 ..
    cand_to_{R-1} [R*units*MAX_TOP_K*2] f32 (rank q's inboxes, peer
    memory)). Chunk u writes its pairs where chunk rank*units + u of the
    whole vocabulary's argmax_partial would (indices global, the noise of
    global token ids), in every rank's inbox, so the inboxes are the
    partials of the whole vocabulary and every rank's pick_advance (its
    whole=False form, over R*units chunks) picks the same token. No
    whole-vocabulary path (top-p without top-k, top-k over MAX_TOP_K)."""
    from . import generation_bodies as gb
    from . import generation_state as gs

    chunk = gb.argmax_chunk(V, threads)
    units = -(-V // chunk)
    _check(R * V < (1 << 24), f"argmax_partial_to_ranks: vocabulary {R * V} is over 2^24 "
           "(indices as floats)")
    W, K = gs.GEN_WORDS, gb.MAX_TOP_K
    nb, nc = R * 2 * units, R * units * K * 2

    def partial(logits, gen, sampling, rank, *to):
        best_to, cand_to = to[:R], to[R:]

        def put_best(u, top, first, i):
            at = (rank[0] * units + u) * 2
            for inbox in best_to:
                inbox[at] = top[i]
                inbox[at + 1] = first[i]

        def put_cand(slot, top, first, i):
            at = (rank[0] * (units * K) + slot) * 2
            for inbox in cand_to:
                inbox[at] = top[i]
                inbox[at + 1] = first[i]

        gb.chunk_pick(logits, gen, sampling, V, chunk, units, threads, lambda: rank[0] * V,
                      put_best, put_cand, None)

    partial.__signature__ = _signature(
        [("logits", T.Tensor((V,), "bfloat16")), ("gen", T.Tensor((W,), "int32")),
         ("sampling", T.Tensor((gb.SAMPLING_WORDS,), "float32")),
         ("rank", T.Tensor((1,), "int32"))]
        + [(f"best_to_{q}", T.Tensor((nb,), "float32")) for q in range(R)]
        + [(f"cand_to_{q}", T.Tensor((nc,), "float32")) for q in range(R)])
    # Which slots of the peers' inboxes depends on the rank: the whole inbox.
    foot = gb._logits_chunks(V, chunk, units) + (
        Access("read", 1, 0, 0, W), Access("read", 2, 0, 0, gb.SAMPLING_WORDS),
        Access("read", 3, 0, 0, 1)) + \
        tuple(Access("write", 4 + q, 0, 0, nb) for q in range(R)) + \
        tuple(Access("write", 4 + R + q, 0, 0, nc) for q in range(R))
    return t_body(f"argmax_partial_{V}_c{chunk}_to_r{R}", partial, units, foot, threads, emit)
