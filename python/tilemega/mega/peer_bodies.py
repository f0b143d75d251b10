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


def sum_inbox(n, R, *, threads=256, emit=True):
    """args (inbox [R, n], out [n]): out = inbox[0] + ... + inbox[R-1], in
    rank order, f32 rounded once to bf16."""
    C = chunk_elements(n, threads)

    def reduce(inbox: T.Tensor((R, n), "bfloat16"), out: T.Tensor((n,), "bfloat16")):
        with T.Kernel(n // C, threads=threads) as u:
            row = T.alloc_fragment((C,), "bfloat16")
            acc = T.alloc_fragment((C,), "float32")
            total = T.alloc_fragment((C,), "bfloat16")
            T.clear(acc)
            for q in range(R):
                T.copy(inbox.view(R * n)[q * n + u * C], row)
                for i in T.Parallel(C):
                    acc[i] = acc[i] + T.cast(row[i], "float32")
            for i in T.Parallel(C):
                total[i] = T.cast(acc[i], "bfloat16")
            T.copy(total, out[u * C])

    foot = tuple(Access("read", 0, C, q * n, C) for q in range(R)) + \
        (Access("write", 1, C, 0, C),)
    return t_body(f"sum_inbox_{n}_r{R}", reduce, n // C, foot, threads, emit)


def _signature(params):
    """An inspect.Signature of annotated positional parameters [(name, T.Tensor)]."""
    import inspect

    return inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                annotation=ann) for name, ann in params])
