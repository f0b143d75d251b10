"""One decode step of the generation graph written in plain torch: the
"torch CUDA graph of one step" peer of bench/generate.py.

It reads and writes the engine's own tensors (tilemega.mega.checkpoint
names: embed, l{i}.wqkv, ..., the caches [kv_heads, max_seq_len,
head_dim], tokens and the state gen), keeps the position on the device
like our kernel does (generation_state.py), and so can be captured into a
CUDA graph once and replayed per token. Attention reads the whole cache
with a mask of the keys after the position - what a static cache does in
a graph whose shapes cannot change. The pick is greedy; the state advances
as generation_state.advance says (without EOS: the benchmark generates a
fixed number of tokens).
"""

import math

from tilemega.mega import generation_state as gs


def make_step(cfg, t):
    """A function of no arguments doing one step on tensors `t` (torch,
    CUDA), capturable into a CUDA graph (no host reads)."""
    import torch
    import torch.nn.functional as F

    D, S = cfg.head_dim, cfg.max_seq_len
    Hq, Hkv = cfg.heads, cfg.kv_heads
    G = Hq // Hkv
    keys = torch.arange(S, device="cuda")
    head = t["embed"] if cfg.tie_embeddings else t["lm_head"]
    one = torch.ones(1, dtype=torch.int64, device="cuda")

    def rmsnorm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + cfg.eps)).to(x.dtype) * w

    def rope(x, cos, sin):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)

    def step():
        pos = t["gen"][gs.POS:gs.POS + 1].long()
        token = t["tokens"].index_select(0, pos).long()
        x = t["embed"].index_select(0, token)                        # [1, H]
        cos = t["rope_cos"].index_select(0, pos)                     # [1, D/2]
        sin = t["rope_sin"].index_select(0, pos)
        masked = (keys > pos).view(1, 1, 1, S)
        for layer in range(cfg.layers):
            p = f"l{layer}."
            qkv = F.linear(rmsnorm(x, t[p + "attn_norm"]), t[p + "wqkv"],
                           t.get(p + "bqkv"))
            q, k, v = qkv.split([Hq * D, Hkv * D, Hkv * D], -1)
            q = rope(q.view(Hq, D), cos, sin)
            k = rope(k.view(Hkv, D), cos, sin)
            t[p + "k_cache"].index_copy_(1, pos, k.view(Hkv, 1, D))
            t[p + "v_cache"].index_copy_(1, pos, v.view(Hkv, 1, D))
            scores = torch.matmul(q.view(1, Hkv, G, D),
                                  t[p + "k_cache"].view(1, Hkv, S, D).transpose(-1, -2))
            scores = (scores.float() / math.sqrt(D)).masked_fill(masked, float("-inf"))
            attn = torch.matmul(scores.softmax(-1).to(x.dtype),
                                t[p + "v_cache"].view(1, Hkv, S, D))
            x = x + F.linear(attn.reshape(1, Hq * D), t[p + "wo"])
            gate, up = F.linear(rmsnorm(x, t[p + "mlp_norm"]), t[p + "wgu"]).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, t[p + "wd"])
        logits = F.linear(rmsnorm(x, t["final_norm"]), head)
        t["logits"].copy_(logits.view(-1))
        pick = logits.float().argmax(-1).to(torch.int32)             # [1]
        # generation_state.advance without EOS: append at pos + 1 when it
        # is past the prompt and before the end, then move on.
        nxt = pos + one
        end = t["gen"][gs.END:gs.END + 1].long()
        given = t["gen"][gs.GIVEN:gs.GIVEN + 1].long()
        room = nxt < end
        slot = torch.minimum(nxt, end - one)
        emits = room & (nxt >= given)
        old = t["tokens"].index_select(0, slot)
        t["tokens"].index_copy_(0, slot, torch.where(emits, pick, old))
        t["gen"][gs.POS:gs.POS + 1].copy_(torch.where(room, nxt, pos).to(torch.int32))
        t["gen"][gs.GENERATED:gs.GENERATED + 1].add_(emits.to(torch.int32))
        t["gen"][gs.LAST:gs.LAST + 1].copy_(pick)

    return step
