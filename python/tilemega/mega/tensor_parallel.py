"""Tensor parallelism over `world` GPUs of one node (issue 12): which part
of every tensor each rank holds (Megatron-style), what a rank computes, and
the float64 model of the sharded step that proves the split.

Per layer, with W = world, rank r, Hq / Hkv heads of D, intermediate I:

  wqkv [(Hq + 2 Hkv) D, H]  column-parallel by heads: rank r keeps the q heads
                            [r Hq/W, (r+1) Hq/W) and the k and v heads
                            [r Hkv/W, (r+1) Hkv/W), in the same [q | k | v]
                            order (bqkv alike): a GQA group never straddles
                            two ranks
  k_cache, v_cache          the rank's kv heads: [Hkv/W, S, D]
  wo [H, Hq D]              row-parallel: the columns of the rank's q heads;
                            its product is a partial sum of the attention
                            output -> all-reduce before the residual add
  wgu [2I, H]               the gate rows [r I/W, (r+1) I/W) and the same
                            up rows, in [gate | up] order
  wd [H, I]                 row-parallel: the columns of the rank's I/W
                            -> all-reduce before the residual add
  norms, rope tables        replicated; so is the residual stream x (every
                            rank holds it whole after each all-reduce)

The embedding is replicated (each rank looks its token up itself: no
collective before the first layer); the LM head is split by vocabulary rows
[r V/W, (r+1) V/W) (the embedding's rows when tied), each rank picking the
largest logit of its rows, and the pick over ranks is the largest value,
ties to the smallest global index (torch.argmax's rule). Greedy and
temperature sampling split the same way (Gumbel-max: the noise of global
index i is drawn from the same Philox counter on whichever rank holds it);
top-k and top-p need a selection across ranks that is not designed yet.

The all-reduce adds the ranks' partials in rank order on every rank, so
that x stays bitwise the same on all of them. Two all-reduces a layer of H
elements each (4 KB at hidden 2048): latency-bound, the case for one-shot
peer stores inside the persistent kernel rather than NCCL kernels.

    check_world(cfg, world)              ValueError naming the config field
    shard_config(cfg, world)             the shapes one rank holds
    shard(tensors, cfg, world, rank)     the rank's tensors (numpy or torch)
    step_float64(cfg, shards, world)     the sharded step in float64
    check_sampling(...)                  the sampling settings ranks can pick with
    peer_names(params, world)            which rank's inbox each `to` tensor is
    bind_ranks(params, shards, ...)      every rank's tensors of the rank graph

The rank graph is models.generation_graph(cfg, world=W): all ranks run the
same artifact, each bound to its shard, its rank word, its inboxes and the
other ranks' inboxes (bind_ranks). Its inboxes need no second buffer although
the graph repeats: rank p writes rank q's inbox of an all-reduce (or of the
pick) in step s + 1 only after it received q's pushes of an earlier exchange
of step s + 1, which q made after its step barrier, so after q's reader of
that inbox in step s finished (every exchange's reader precedes, through the
step's data dependencies, the next exchange's push, and the pick, the last
reader of a step, precedes the barrier).
"""

import math
import re
from dataclasses import replace

import numpy as np

from . import generation_reference as ref
from . import generation_state as gs

# One NVLink domain: more GPUs are several nodes (docs/mega.md).
MAX_WORLD = 8


def check_world(cfg, world, source="config"):
    """ValueError naming the field of `source` that `world` GPUs cannot split
    (before anything is compiled or launched); returns the per-rank config."""
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_WORLD:
        raise ValueError(f"world size {world!r}: 1 to {MAX_WORLD} GPUs of one node are "
                         "supported (more is several nodes)")

    def need(field, value, unit, why):
        if value % (unit * world):
            raise ValueError(f"{source}: {field} = {value} cannot be split over {world} GPUs: "
                             f"{why}")

    # Whole kv heads a rank, hence whole GQA groups (heads = group x kv_heads).
    need("num_key_value_heads", cfg.kv_heads, 1,
         "each rank keeps whole kv heads and their query heads (replicating kv heads is "
         "not supported)")
    need("intermediate_size", cfg.intermediate, 64,
         "each rank's share must be a multiple of 64 (the MLP bodies' rows)")
    need("vocab_size", cfg.vocab, 1, "the LM head is split by vocabulary rows evenly")
    return shard_config(cfg, world)


def shard_config(cfg, world):
    """The model one rank computes: its heads, kv heads, MLP columns and
    vocabulary rows (hidden, layers, head_dim and the cache length whole)."""
    return replace(cfg, heads=cfg.heads // world, kv_heads=cfg.kv_heads // world,
                   intermediate=cfg.intermediate // world, vocab=cfg.vocab // world)


def _rows(t, parts):
    """The concatenation of row ranges [(begin, end)] of t (numpy or torch),
    as a new contiguous tensor."""
    pieces = [t[b:e] for b, e in parts]
    if hasattr(t, "detach"):
        import torch

        return torch.cat(pieces).contiguous()
    return np.concatenate(pieces).copy()


def _columns(t, begin, end):
    part = t[:, begin:end]
    return part.contiguous() if hasattr(part, "contiguous") else part.copy()


def shard(tensors, cfg, world, rank):
    """{name: tensor} rank `rank` holds of the full model's `tensors`
    (names of generation_reference.tensor_specs; numpy arrays or torch
    tensors, copied). Per-layer tensors as the module describes; the
    replicated ones are the same objects (not copied); `head` is the
    rank's rows of the LM head (of the embedding when tied)."""
    local = check_world(cfg, world)
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in [0, {world})")
    Hq, Hkv, D, I = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate
    hq, hkv, i = local.heads, local.kv_heads, local.intermediate
    qkv_rows = [(rank * hq * D, (rank + 1) * hq * D),
                ((Hq + rank * hkv) * D, (Hq + (rank + 1) * hkv) * D),
                ((Hq + Hkv + rank * hkv) * D, (Hq + Hkv + (rank + 1) * hkv) * D)]
    out = {}
    for name, t in tensors.items():
        kind = name.split(".")[-1]
        if kind in ("wqkv", "bqkv"):
            out[name] = _rows(t, qkv_rows)
        elif kind in ("k_cache", "v_cache"):
            out[name] = _rows(t, [(rank * hkv, (rank + 1) * hkv)])
        elif kind == "wo":
            out[name] = _columns(t, rank * hq * D, (rank + 1) * hq * D)
        elif kind == "wgu":
            out[name] = _rows(t, [(rank * i, (rank + 1) * i), (I + rank * i, I + (rank + 1) * i)])
        elif kind == "wd":
            out[name] = _columns(t, rank * i, (rank + 1) * i)
        elif name == "lm_head":
            continue
        elif name == "logits":
            out[name] = _rows(t, [(rank * local.vocab, (rank + 1) * local.vocab)])
        else:
            out[name] = t
    head = tensors[ref.head_name(cfg)]
    out["head"] = _rows(head, [(rank * local.vocab, (rank + 1) * local.vocab)])
    return out


def all_reduce(partials):
    """The sum every rank computes: the ranks' partials added in rank order."""
    total = partials[0].copy()
    for p in partials[1:]:
        total += p
    return total


def pick(best):
    """The global greedy pick from each rank's (largest logit, its global
    index): the largest value, ties to the smallest index."""
    value = max(v for v, _ in best)
    return min(i for v, i in best if v == value)


def step_float64(cfg, shards, world, pos=None, token=None):
    """The step of generation_reference.step_float64 computed as the `world`
    ranks would from their `shards` (shard() of each rank), in float64: each
    rank's q/k/v heads, attention and MLP columns, the all-reduces of the
    output projections, each rank's LM-head rows and the pick over ranks.
    Returns {"logits" (the ranks' rows concatenated), "rows" ({cache name:
    [Hkv, D]}, the ranks' kv heads concatenated), "x", "pick"}."""
    local = shard_config(cfg, world)
    f64 = ref._f64
    first = shards[0]
    pos = ref._int(first["gen"][gs.POS]) if pos is None else int(pos)
    token = ref._int(first["tokens"][pos]) if token is None else int(token)
    hq, hkv, D, G = local.heads, local.kv_heads, cfg.head_dim, cfg.heads // cfg.kv_heads
    x = f64(first["embed"][token])
    cos, sin = f64(first["rope_cos"][pos]), f64(first["rope_sin"][pos])
    rows = {}
    for layer in range(cfg.layers):
        p = f"l{layer}."
        attn_partials, k_rows, v_rows = [], [], []
        for s in shards:
            qkv = f64(s[p + "wqkv"]) @ ref._rmsnorm(x, f64(s[p + "attn_norm"]), cfg.eps)
            if cfg.qkv_bias:
                qkv = qkv + f64(s[p + "bqkv"])
            q, k, v = np.split(qkv, [hq * D, (hq + hkv) * D])
            q = ref._rope(q.reshape(hq, D), cos, sin)
            k = ref._rope(k.reshape(hkv, D), cos, sin)
            v = v.reshape(hkv, D)
            kc = f64(s[p + "k_cache"][:, :pos + 1])
            vc = f64(s[p + "v_cache"][:, :pos + 1])
            kc[:, pos], vc[:, pos] = k, v
            k_rows.append(k)
            v_rows.append(v)
            scores = np.einsum("kgd,kld->kgl", q.reshape(hkv, G, D), kc) / math.sqrt(D)
            prob = np.exp(scores - scores.max(axis=-1, keepdims=True))
            prob /= prob.sum(axis=-1, keepdims=True)
            attn = np.einsum("kgl,kld->kgd", prob, vc).reshape(hq * D)
            attn_partials.append(f64(s[p + "wo"]) @ attn)
        rows[p + "k_cache"] = np.concatenate(k_rows)
        rows[p + "v_cache"] = np.concatenate(v_rows)
        x = x + all_reduce(attn_partials)
        mlp_partials = []
        for s in shards:
            gate, up = np.split(f64(s[p + "wgu"]) @ ref._rmsnorm(x, f64(s[p + "mlp_norm"]),
                                                                   cfg.eps), 2)
            mlp_partials.append(f64(s[p + "wd"]) @ (gate / (1.0 + np.exp(-gate)) * up))
        x = x + all_reduce(mlp_partials)
    xn = ref._rmsnorm(x, f64(first["final_norm"]), cfg.eps)
    logits = [f64(s["head"]) @ xn for s in shards]
    best = [(float(l.max()), r * local.vocab + int(np.argmax(l))) for r, l in enumerate(logits)]
    return {"logits": np.concatenate(logits), "rows": rows, "x": x, "pick": pick(best)}


def check_sampling(temperature=None, top_k=0, top_p=1.0):
    """ValueError naming the argument for sampling settings the ranks'
    pick does not serve (Graph.pick_next_ranks: greedy, temperature and
    top-k up to MAX_TOP_K, with or without top-p; not the settings that
    filter the whole vocabulary)."""
    from .generation_bodies import MAX_TOP_K, sampling_modes

    if not temperature:
        return
    _, _, whole = sampling_modes(1.0 / temperature, top_k, top_p)
    if whole:
        raise ValueError(f"top_k={top_k}, top_p={top_p}: a graph of several ranks samples "
                         f"greedily, with a temperature, or from the top-k up to {MAX_TOP_K} "
                         "(with any top_p); top_p without top_k, or a larger top_k, would "
                         "filter the whole vocabulary across ranks, which is not built")


_PEER = re.compile(r"^(.*)\.((?:[a-z]+_)?)to(\d+)$")


def peer_names(params, world):
    """{name: (rank q, inbox name)} for the parameters of a rank graph
    (names) that are rank q's inbox (Graph.all_reduce's `<base>.to<q>` is
    q's `<base>.inbox`, pick_next_ranks' `<base>.best_to<q>` q's
    `<base>.best_inbox`); ValueError for one whose inbox is missing."""
    names = set(params)
    out = {}
    for name in params:
        m = _PEER.match(name)
        if not m:
            continue
        inbox = f"{m.group(1)}.{m.group(2)}inbox"
        q = int(m.group(3))
        if inbox not in names or not 0 <= q < world:
            raise ValueError(f"parameter {name!r}: no inbox {inbox!r} of rank {q} among the "
                             f"graph's parameters for {world} ranks")
        out[name] = (q, inbox)
    return out


def bind_ranks(params, shards, world, zeros, own=("tokens", "gen")):
    """Every rank's tensors of a rank graph: params {name: (shape, dtype)}
    (the graph's bound parameters), shards (shard() of each rank), zeros
    (shape, dtype, rank) -> a new zero tensor on that rank's device. A rank
    gets its shard, its rank word ([rank], int32), its inboxes (zeros) and
    the other ranks' inboxes for the `to` parameters; `own` names the
    replicated tensors the graph writes (the state), copied for each rank
    (shard() hands all ranks the same object, fine for weights only)."""
    peers = peer_names(params, world)
    out = []
    for r, s in enumerate(shards):
        mine = {}
        for name, (shape, dtype) in params.items():
            if name == "rank":
                t = zeros((1,), "int32", r)
                t[0] = r
                mine[name] = t
            elif name in peers:
                continue
            elif name.endswith("inbox"):
                mine[name] = zeros(tuple(shape), dtype, r)
            elif name not in s:
                raise ValueError(f"rank {r}: the graph's parameter {name!r} is not in its "
                                 "shard")
            elif name in own:
                mine[name] = s[name].clone() if hasattr(s[name], "clone") else s[name].copy()
            else:
                mine[name] = s[name]
            if name in mine and tuple(mine[name].shape) != tuple(shape):
                raise ValueError(f"rank {r}: {name} is {list(mine[name].shape)}, the graph "
                                 f"takes {list(shape)}")
        out.append(mine)
    for r, mine in enumerate(out):
        for name, (q, inbox) in peers.items():
            mine[name] = out[q][inbox]
    return out
