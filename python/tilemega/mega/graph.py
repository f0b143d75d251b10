"""The Python graph builder: operators in program order -> mega IR.

    g = Graph("mlp", threads=256)   # workers: one per SM of the default chip
    x = g.input("x", [2048]); w = g.weight("norm_w", [2048])
    h = g.scratch("h", [2048]); ...
    g.rmsnorm(x, w, h); g.linear(W, h, y)    # or fused: g.linear(W, x, y, norm=w)
    module = g.build()   # body functions + one mega.graph (docs/mega.md)

Every op call checks shapes (ValueError naming the argument) and appends
one mega.task (two for attention) whose body comes from bodies.py; bodies
are emitted once per distinct name. The graph's region arguments are the
tensors in creation order; their names and roles go on the graph op as
`mega.arg_names` / `mega.arg_roles` (and stay in `Graph.tensors`).
"""

import math
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from . import bodies
from . import generation_bodies as gbodies
from . import merged_projection
from .bodies import Body, memref_type

ROLES = ("input", "weight", "scratch", "output", "cache")
DTYPES = ("bfloat16", "float16", "float32", "int32")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")

# A worker streams ~32 KB/us of HBM (4.2 TB/s over 132 SMs) after ~1.5 us
# before its first bytes land; used only to pick rows per GEMV unit.
_SM_BYTES_PER_US = 32e3
_UNIT_LATENCY_US = 1.5


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: Tuple[int, ...]
    dtype: str
    role: str
    index: int          # region argument number
    graph: "Graph"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def type(self) -> str:
        return memref_type(self.shape, self.dtype)

    def __repr__(self):
        return f"Tensor({self.name!r}, {list(self.shape)}, {self.dtype}, {self.role})"


@dataclass(frozen=True)
class AttentionPartials:
    """The unmerged output of an attention (attention_at / rope_attention_at
    with merge_in_projection): the splits' partial outputs and base-2
    log-sum-exps, which `Graph.linear` takes as its x and merges itself
    (merged_projection.gemv_merge)."""
    o_part: Tensor
    lse: Tensor
    heads: int
    kv_heads: int
    head_dim: int
    splits: int

    @property
    def size(self) -> int:
        return self.heads * self.head_dim


@dataclass(frozen=True)
class Task:
    name: str
    body: Body
    args: Tuple[Tensor, ...]
    variable: bool = False
    waits: Tuple[str, ...] = ()     # explicit events (peer events) it waits on
    signals: Tuple[str, ...] = ()   # and signals
    latency_bound: bool = False     # an SM of its own under workers_by_sm
    # Units an instance runs, fixed (None: mega-decompose's cost model picks).
    units_per_task: Optional[int] = None

    def mlir(self) -> str:
        ops = ", ".join(f"%arg{t.index}" for t in self.args)
        types = ", ".join(t.type for t in self.args)
        foot = ", ".join(a.mlir() for a in self.body.footprint)
        events = ""
        for key, names in (("waits", self.waits), ("signals", self.signals)):
            if names:
                events += f" {key} [" + ", ".join(f"@{e}" for e in names) + "]"
        text = (f"mega.task @{self.name} body @{self.body.name}({ops} : {types}) "
                f"count {self.body.units}{events} footprint [{foot}]")
        flags = [f for f, on in (("variable", self.variable),
                                 ("latency_bound", self.latency_bound)) if on]
        if self.units_per_task is not None:
            flags.append(f"units_per_task = {self.units_per_task} : i64")
        return text + (" {" + ", ".join(flags) + "}" if flags else "")


def gemv_rows_per_unit(N, K, workers):
    """Rows per GEMV unit: fewest waves of units over the workers, each unit
    paying one pipeline fill, so large units win as long as they still
    cover the workers (e.g. 3072 x 2048 on 132 workers: 24 rows, 128 units).
    Candidates divide N, at most 128 rows and 512 KB of W, and are a power
    of two or a multiple of 8: the unit's [rows, BLOCK_K] tile must spread
    evenly over the threads (an LM head of 1000 rows would otherwise get
    125-row units, which no layout spreads)."""
    best = None
    for rows in range(1, min(N, 128) + 1):
        if N % rows or rows * K * 2 > 512 * 1024:
            continue
        if rows & (rows - 1) and rows % 8:
            continue
        waves = -(-(N // rows) // workers)
        cost = waves * (_UNIT_LATENCY_US + rows * K * 2 / _SM_BYTES_PER_US)
        if best is None or cost < best[0]:
            best = (cost, rows)
    return best[1]


def elementwise_chunk(n, threads):
    """One 16-byte vector (8 bf16) per thread and operand, or less when n is
    smaller or not a multiple of it (then the largest power-of-two divisor
    that still gives every thread an element)."""
    chunk = 8 * threads
    while chunk > threads and n % chunk:
        chunk //= 2
    if n % chunk:
        raise ValueError(f"size {n} is not a multiple of threads {threads}")
    return chunk


def default_workers(scheduler_ctas=0, ctas_per_sm=1):
    """Worker CTAs that, with `scheduler_ctas` more, fill every SM of the
    default chip (its target description, tilemega.compiler.target_info),
    `ctas_per_sm` CTAs an SM."""
    from ..compiler import default_target_info
    return default_target_info()["sm_count"] * ctas_per_sm - scheduler_ctas


def check_ctas_per_sm(value):
    """ValueError unless `value` is a number of CTAs that may share an SM
    (1 to 8: beyond, 256-thread CTAs get under 32 registers a thread)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 8:
        raise ValueError(f"ctas_per_sm must be 1 to 8, got {value!r}")


class Graph:
    def __init__(self, name, workers=None, threads=256, schedulers=1, ranks=1, ctas_per_sm=1,
                 workers_by_sm=False):
        """workers: worker CTAs, ctas_per_sm an SM; None: every SM of the
        default chip (default_workers()). ranks: GPUs that run the graph
        together (one kernel each, synchronised by peer events:
        all_reduce). ctas_per_sm: CTAs sharing an SM (the compiler admits
        that many x the SMs and caps the registers to fit them).
        workers_by_sm: each CTA takes a worker index its SM stands for
        (mega.graph workers_by_sm), so the schedule knows which workers
        share an SM and gives latency-bound tasks SMs of their own."""
        if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= 8:
            raise ValueError(f"ranks must be 1 to 8 (the GPUs of one node), got {ranks!r}")
        check_ctas_per_sm(ctas_per_sm)
        if not _NAME.match(name) or "." in name:
            raise ValueError(f"graph name {name!r} must be an identifier")
        if workers is None:
            workers = default_workers(ctas_per_sm=ctas_per_sm)
        if workers < 1 or schedulers < 0:
            raise ValueError("workers must be >= 1 and schedulers >= 0")
        from ..compiler import default_target_info
        max_threads = default_target_info()["max_threads_per_block"]
        if threads % 32 or not 32 <= threads <= max_threads:
            raise ValueError(f"threads must be a multiple of 32 in [32, {max_threads}], "
                             f"got {threads}")
        self.name, self.workers, self.threads, self.schedulers = name, workers, threads, schedulers
        self.tensors: List[Tensor] = []
        self.tasks: List[Task] = []
        self._writer = {}       # tensor name -> the last task that wrote it
        self.stop = None        # (tensor, element, max_steps) of repeat_until
        self.ranks = ranks
        self.ctas_per_sm = ctas_per_sm
        self.workers_by_sm = bool(workers_by_sm)
        self.peer_events: Dict[str, int] = {}   # name -> trigger

    # --- tensors -------------------------------------------------------------

    def tensor(self, name, shape, dtype="bfloat16", role="scratch") -> Tensor:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"tensor name {name!r}: letters, digits, '_' and '.'")
        if any(t.name == name for t in self.tensors):
            raise ValueError(f"tensor {name!r} exists already")
        if role not in ROLES:
            raise ValueError(f"tensor {name!r}: role must be one of {ROLES}, got {role!r}")
        if dtype not in DTYPES:
            raise ValueError(f"tensor {name!r}: dtype must be one of {DTYPES}, got {dtype!r}")
        shape = tuple(shape)
        if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
            raise ValueError(f"tensor {name!r}: shape must be positive ints, got {list(shape)}")
        t = Tensor(name, shape, dtype, role, len(self.tensors), self)
        self.tensors.append(t)
        return t

    def input(self, name, shape, dtype="bfloat16"):
        return self.tensor(name, shape, dtype, "input")

    def weight(self, name, shape, dtype="bfloat16"):
        return self.tensor(name, shape, dtype, "weight")

    def scratch(self, name, shape, dtype="bfloat16"):
        return self.tensor(name, shape, dtype, "scratch")

    def output(self, name, shape, dtype="bfloat16"):
        return self.tensor(name, shape, dtype, "output")

    def cache(self, name, shape, dtype="bfloat16"):
        return self.tensor(name, shape, dtype, "cache")

    # --- operators -----------------------------------------------------------

    def _check_args(self, op, body: Body, params, start=0):
        """Each of params [(argument name, Tensor)] against the body's
        arguments from `start` on."""
        for (pname, t), (_, shape, dtype) in zip(params, body.args[start:]):
            if not isinstance(t, Tensor) or t.graph is not self:
                raise ValueError(f"{op}: {pname} is not a tensor of graph {self.name!r}")
            if t.shape != tuple(shape) or t.dtype != dtype:
                raise ValueError(f"{op}: {pname} ({t.name}) is {list(t.shape)} {t.dtype}, "
                                 f"expected {list(shape)} {dtype}")

    def all_reduce(self, x, out, residual=None, rank=None, name=None):
        """out = the sum of x over the graph's ranks (every rank gets the same
        bits), one-shot through peer memory (peer_bodies): a push task writes
        this rank's x into row `rank` of every rank's inbox, a peer event
        fires once every rank's push is done, a sum task adds the inbox's
        rows in rank order (after `residual`, when given: out = residual +
        the sum). Adds the tensors each rank binds: `<name>.rank` (int32
        [1], the rank; not when `rank`, such a tensor, is given),
        `<name>.inbox` ([ranks, n], this rank's) and `<name>.to<q>` (rank
        q's inbox, peer memory). In a graph that repeats, an inbox is
        written again only after its reader finished (tensor_parallel.py
        says why), so it needs no second buffer."""
        from . import peer_bodies

        R = self.ranks
        if R < 2:
            raise ValueError("all_reduce: the graph has one rank (Graph(..., ranks=R))")
        self._need("all_reduce", "x", x, rank=1)
        self._need("all_reduce", "out", out, rank=1)
        n = x.size
        base = name or "all_reduce"
        push = peer_bodies.push_to_ranks(n, R, threads=self.threads, emit=False)
        total = peer_bodies.sum_inbox(n, R, residual=residual is not None,
                                      threads=self.threads, emit=False)
        if rank is None:
            rank = self.tensor(f"{base}.rank", [1], "int32", role="input")
        else:
            self._need("all_reduce", "rank", rank, rank=1, dtype="int32")
        inbox = self.tensor(f"{base}.inbox", [R, n], x.dtype, role="cache")
        peers = [self.tensor(f"{base}.to{q}", [R, n], x.dtype, role="cache") for q in range(R)]
        event = f"{base.replace('.', '_')}_pushed"
        if event in self.peer_events:
            raise ValueError(f"all_reduce: {base!r} is used already")
        self.peer_events[event] = push.units
        self._task("all_reduce", f"{base}_push", push,
                   [("x", x), ("rank", rank)] + [(f"to_{q}", t) for q, t in enumerate(peers)],
                   signals=(event,))
        params = [("inbox", inbox)] + ([("x", residual)] if residual is not None else []) + \
            [("out", out)]
        return self._task("all_reduce", f"{base}_sum", total, params, waits=(event,))

    def _task(self, op, label, body: Body, params, variable=False, waits=(), signals=(),
              latency_bound=False, units_per_task=None):
        """Appends a task running `body` on params [(argument name, Tensor)]."""
        self._check_args(op, body, params)
        args = tuple(t for _, t in params)
        own = {args[a.operand].name for a in body.footprint if a.mode == "write"}
        for a in body.footprint:
            t = args[a.operand]
            # A task may read what its own units write (split partials its
            # last split merges: merge_in_split).
            if a.mode == "read" and t.role in ("scratch", "output") and \
                    t.name not in self._writer and t.name not in own:
                raise ValueError(f"{op}: {params[a.operand][0]} ({t.name}) is read "
                                 f"before any task writes it")
        writes = [a.operand for a in body.footprint if a.mode == "write"]
        for i in writes:
            if args[i].role in ("input", "weight"):
                raise ValueError(f"{op}: {params[i][0]} ({args[i].name}) has role "
                                 f"{args[i].role}, which no task may write")
        label = label or op
        if not _NAME.match(label):
            raise ValueError(f"{op}: task name {label!r}: letters, digits, '_' and '.'")
        label = label.replace(".", "_")  # l0.qkv -> t5_l0_qkv
        task = Task(f"t{len(self.tasks)}_{label}", body, args, variable, tuple(waits),
                    tuple(signals), latency_bound, units_per_task)
        self.tasks.append(task)
        self._writer.update((args[i].name, task) for i in writes)
        return task

    @staticmethod
    def _need(op, pname, t, rank=None, dtype=None):
        if not isinstance(t, Tensor):
            raise ValueError(f"{op}: {pname} must be a Tensor, got {type(t).__name__}")
        if rank is not None and len(t.shape) != rank:
            raise ValueError(f"{op}: {pname} ({t.name}) must have rank {rank}, "
                             f"got shape {list(t.shape)}")
        if dtype is not None and t.dtype != dtype:
            raise ValueError(f"{op}: {pname} ({t.name}) must be {dtype}, got {t.dtype}")

    def rmsnorm(self, x, w, y, eps=1e-5, name=None):
        """y = x * rsqrt(mean(x^2) + eps) * w over a vector."""
        self._need("rmsnorm", "x", x, rank=1)
        body = bodies.rmsnorm(x.size, eps, threads=self.threads, emit=False)
        return self._task("rmsnorm", name, body, [("x", x), ("w", w), ("y", y)])

    def linear(self, W, x, y, residual=None, norm=None, eps=1e-5, rows_per_unit=None,
               bias=None, stages=None, name=None):
        """y = W @ x (+ residual): W [N, K], x [K], y and residual [N].

        With norm (a [K] weight), y = W @ rmsnorm(x, norm, eps) (+ bias, an
        [N] weight) in one task (bodies.gemv_rmsnorm: the rmsnorm task and
        its stage boundary go away; no residual then). x may be an
        attention's AttentionPartials (merge_in_projection), which every
        unit merges first (merged_projection.gemv_merge; no norm or bias).
        stages: the most stages of W a unit keeps in flight (bodies.gemv's;
        None: bodies.GEMV_STAGES)."""
        self._need("linear", "W", W, rank=2)
        N, K = W.shape
        rows = rows_per_unit or gemv_rows_per_unit(N, K, self.workers)
        if isinstance(x, AttentionPartials):
            if stages is not None:
                raise ValueError("linear: stages is not supported for a merged projection")
            return self._linear_merged(W, x, y, residual, norm, bias, rows, name)
        params = [("W", W), ("x", x)]
        if bias is not None and norm is None:
            raise ValueError("linear: bias is supported with norm (the fused q/k/v "
                             "projection) only")
        if norm is not None:
            if residual is not None:
                raise ValueError("linear: norm and residual together are not supported")
            body = bodies.gemv_rmsnorm(N, K, rows, eps, bias is not None, stages=stages,
                                       threads=self.threads, emit=False)
            extra = [("bias", bias)] if bias is not None else []
            return self._task("linear", name, body,
                              params + [("norm", norm)] + extra + [("y", y)])
        body = bodies.gemv(N, K, rows, residual is not None,
                           whole_early=self.whole_early_for(x, rows, K), stages=stages,
                           threads=self.threads, emit=False)
        params += [("residual", residual)] if residual is not None else []
        return self._task("linear", name, body, params + [("y", y)])

    def whole_early_for(self, x, rows, K):
        """Whether a linear of x puts all of a unit's W into its prologue
        (bodies.gemv's whole_early): when x comes from a latency-bound task
        (the attention's merge or last split) and the unit fits. Its early
        loads then run beside a stage that leaves DRAM idle, and after its
        wait only x loads (the output projection: H100, 2026-12-07, -0.3 %
        a token, docs/mega.md); before a streaming stage they would compete
        with it (every unit of at most 64 KB whole measured no faster)."""
        writer = self._writer.get(x.name)
        return bool(writer is not None and writer.latency_bound
                    and rows * K * 2 <= bodies.WHOLE_EARLY_BYTES)

    def _linear_merged(self, W, parts, y, residual, norm, bias, rows, name):
        """linear of an attention's partials: each unit merges them
        (merged_projection.gemv_merge), no merge task before it."""
        if norm is not None or bias is not None:
            raise ValueError("linear: x is an attention's partials, which take no norm or "
                             "bias")
        N, K = W.shape
        if K != parts.size:
            raise ValueError(f"linear: W ({W.name}) has {K} columns, the attention's partials "
                             f"merge to {parts.size}")
        body = merged_projection.gemv_merge(N, parts.heads, parts.kv_heads, parts.head_dim,
                                            parts.splits, rows, residual is not None,
                                            threads=self.threads, emit=False)
        params = [("W", W), ("o_part", parts.o_part), ("lse", parts.lse)]
        params += [("residual", residual)] if residual is not None else []
        return self._task("linear", name, body, params + [("y", y)])

    def linear_glu(self, W, x, y, norm, eps=1e-5, rows_per_unit=None, stages=None,
                   name=None):
        """y = silu(W[:N] @ xn) * (W[N:] @ xn), xn = rmsnorm(x, norm, eps):
        W [2N, K], x and norm [K], y [N]; the gate/up projection with
        silu_mul in its epilogue (bodies.gemv_rmsnorm_glu), so the down
        projection after it is a plain `linear` of y. stages: as linear's."""
        self._need("linear_glu", "W", W, rank=2)
        N2, K = W.shape
        if N2 % 2:
            raise ValueError(f"linear_glu: W has {N2} rows, not [gate; up] of equal halves")
        N = N2 // 2
        # A unit reads R rows of each block: R rows of 2K, as the cost model
        # (and a tile's spread over the threads) sees it.
        rows = rows_per_unit or gemv_rows_per_unit(N, 2 * K, self.workers)
        body = bodies.gemv_rmsnorm_glu(N, K, rows, eps, stages=stages, threads=self.threads,
                                       emit=False)
        return self._task("linear_glu", name, body,
                          [("W", W), ("x", x), ("norm", norm), ("y", y)])

    def linear_silu(self, W, gu, y, residual=None, rows_per_unit=None, name=None):
        """y = W @ (silu(gu[:K]) * gu[K:]) (+ residual): W [N, K], gu [2K],
        y and residual [N]; silu_mul and the down projection as one task
        (bodies.gemv_silu)."""
        self._need("linear_silu", "W", W, rank=2)
        N, K = W.shape
        rows = rows_per_unit or gemv_rows_per_unit(N, K, self.workers)
        body = bodies.gemv_silu(N, K, rows, residual is not None, threads=self.threads,
                                emit=False)
        params = [("W", W), ("gu", gu)] + ([("residual", residual)] if residual is not None
                                           else [])
        return self._task("linear_silu", name, body, params + [("y", y)])

    def rope(self, qkv, cos, sin, q, k, name=None):
        """q, k = rotate-half RoPE of the q and k heads of qkv; head_dim is
        2 * cos.size, the head counts come from q's and k's sizes."""
        self._need("rope", "cos", cos, rank=1, dtype="float32")
        D = 2 * cos.size
        self._need("rope", "q", q, rank=1)
        self._need("rope", "k", k, rank=1)
        if q.size % D or k.size % D:
            raise ValueError(f"rope: q ({q.size}) and k ({k.size}) must be whole heads of {D}")
        body = bodies.rope(q.size // D, k.size // D, D, threads=self.threads, emit=False)
        return self._task("rope", name, body, [("qkv", qkv), ("cos", cos), ("sin", sin),
                                               ("q", q), ("k", k)])

    def kv_append(self, k, qkv, k_cache, v_cache, pos, name=None):
        """k_cache[:, pos] = k (rotated), v_cache[:, pos] = v heads of qkv."""
        self._need("kv_append", "k_cache", k_cache, rank=3)
        Hkv, S, D = k_cache.shape
        self._need("kv_append", "qkv", qkv, rank=1)
        heads = qkv.size // D - 2 * Hkv
        if qkv.size % D or heads < 1:
            raise ValueError(f"kv_append: qkv ({qkv.size}) is not (heads + 2 * {Hkv}) "
                             f"heads of {D}")
        body = bodies.kv_append(heads, Hkv, D, S, pos, threads=self.threads, emit=False)
        return self._task("kv_append", name, body, [("k", k), ("qkv", qkv),
                                                    ("k_cache", k_cache), ("v_cache", v_cache)])

    def rope_kv_append(self, qkv, cos, sin, q, k_cache, v_cache, pos, name=None):
        """rope then kv_append as one task, one unit per kv head: q = the
        rotated q heads of qkv, k_cache[:, pos] = its rotated k heads,
        v_cache[:, pos] = its v heads (bodies.rope_kv_append)."""
        self._need("rope_kv_append", "k_cache", k_cache, rank=3)
        Hkv, S, D = k_cache.shape
        self._need("rope_kv_append", "q", q, rank=1)
        if q.size % D:
            raise ValueError(f"rope_kv_append: q ({q.size}) is not whole heads of {D}")
        body = bodies.rope_kv_append(q.size // D, Hkv, D, S, pos, threads=self.threads,
                                     emit=False)
        return self._task("rope_kv_append", name, body,
                          [("qkv", qkv), ("cos", cos), ("sin", sin), ("q", q),
                           ("k_cache", k_cache), ("v_cache", v_cache)])

    def attention(self, q, k_cache, v_cache, o, kv_len=None, splits=8, name=None):
        """o = softmax(q k^T / sqrt(D)) v over the first kv_len keys (GQA),
        flash-decoding: a split task (variable cost) and a combine task,
        through two scratch tensors named after o."""
        self._need("attention", "k_cache", k_cache, rank=3)
        Hkv, S, D = k_cache.shape
        self._need("attention", "q", q, rank=1)
        kv_len = S if kv_len is None else kv_len
        if q.size % D:
            raise ValueError(f"attention: q ({q.size}) is not whole heads of {D}")
        Hq = q.size // D
        split = bodies.attention_split(Hq, Hkv, D, kv_len, S, splits,
                                       threads=self.threads, emit=False)
        combine = bodies.attention_combine(Hq, Hkv, D, splits, threads=self.threads, emit=False)
        # Checked before the scratch tensors exist: a failed call adds nothing.
        self._check_args("attention", split, [("q", q), ("k_cache", k_cache),
                                              ("v_cache", v_cache)])
        self._check_args("attention", combine, [("o", o)], start=2)
        o_part = self.scratch(f"{o.name}.o_part", [Hq * splits * D], "float32")
        lse = self.scratch(f"{o.name}.lse", [Hq * splits], "float32")
        base = name or "attn"
        self._task("attention", f"{base}_split", split,
                   [("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                    ("o_part", o_part), ("lse", lse)], variable=True, latency_bound=True)
        return self._task("attention", f"{base}_combine", combine,
                          [("o_part", o_part), ("lse", lse), ("o", o)], latency_bound=True)

    # --- generation (runtime position: generation_bodies, generation_state) ---

    def embed_token(self, table, tokens, gen, x, name=None):
        """x = table[tokens[gen[POS]]]."""
        self._need("embed_token", "table", table, rank=2)
        self._need("embed_token", "tokens", tokens, rank=1, dtype="int32")
        V, H = table.shape
        body = gbodies.embed_token(V, H, tokens.size, threads=self.threads, emit=False)
        return self._task("embed_token", name, body,
                          [("table", table), ("tokens", tokens), ("gen", gen), ("x", x)])

    def rope_kv_at(self, qkv, cos, sin, gen, q, k_cache, v_cache, name=None):
        """RoPE of qkv's q and k heads with the tables' row gen[POS]; q gets
        the rotated q heads, the caches' row gen[POS] the rotated k and the
        v heads (generation_bodies.rope_kv_at)."""
        self._need("rope_kv_at", "k_cache", k_cache, rank=3)
        self._need("rope_kv_at", "q", q, rank=1)
        Hkv, S, D = k_cache.shape
        if q.size % D:
            raise ValueError(f"rope_kv_at: q ({q.size}) is not whole heads of {D}")
        body = gbodies.rope_kv_at(q.size // D, Hkv, D, S, threads=self.threads, emit=False)
        return self._task("rope_kv_at", name, body,
                          [("qkv", qkv), ("cos", cos), ("sin", sin), ("gen", gen), ("q", q),
                           ("k_cache", k_cache), ("v_cache", v_cache)])

    def attention_at(self, q, k_cache, v_cache, gen, o, splits=8, jit=False, name=None,
                     key_block=None, merge_in_split=False, tensor_cores=False,
                     merge_in_projection=False):
        """o = softmax(q k^T / sqrt(D)) v over the keys 0..gen[POS] (GQA):
        flash-decoding partials and their merge, through two scratch
        tensors named after o.

        The partials' cost grows with the position, but every split of one
        step covers the same keys give or take one chunk, so a static (AOT)
        assignment is balanced; jit=True marks them variable (the JIT queue
        under the `auto` policy), which costs the scheduler's extra hop:
        on the H200 the Llama-3.2-1B generation step took 1045 us with
        them on the JIT queue and 990 us on the AOT queues.

        merge_in_split: no merge task; each group's last split merges
        (generation_bodies.merge_by_last_split), counting on a scratch
        int32 tensor named after o (o.name + ".arrivals", one word a kv
        head, zero between launches). tensor_cores: each chunk's two
        products on mma.sync (generation_bodies.attention_at_config); None:
        wherever the shape allows (generation_bodies.tensor_cores_serve, the
        same check that refuses True).

        merge_in_projection: no merge task and no o (None): returns the
        partials (AttentionPartials, scratch tensors named after `name`),
        which the projection after it takes as its x and merges in every
        unit (Graph.linear, merged_projection.gemv_merge)."""
        self._need("attention_at", "k_cache", k_cache, rank=3)
        self._need("attention_at", "q", q, rank=1)
        Hkv, S, D = k_cache.shape
        if q.size % D:
            raise ValueError(f"attention_at: q ({q.size}) is not whole heads of {D}")
        Hq = q.size // D
        if tensor_cores is None:
            tensor_cores = gbodies.tensor_cores_serve(Hq, Hkv, D, S, splits, self.threads,
                                                      key_block)
        split = gbodies.attention_at(Hq, Hkv, D, S, splits, threads=self.threads,
                                     key_block=key_block, merge_in_split=merge_in_split,
                                     tensor_cores=tensor_cores, emit=False)
        merge = gbodies.attention_merge(Hq, Hkv, D, splits, threads=self.threads, emit=False)
        inputs = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("gen", gen)]
        self._check_args("attention_at", split, inputs)
        return self._split_and_merge("attention_at", split, merge, inputs, o, jit, name,
                                     merge_in_split, merge_in_projection, (Hq, Hkv, D, splits))

    def rope_attention_at(self, qkv, cos, sin, gen, k_cache, v_cache, o, splits=8, jit=False,
                          name=None, key_block=None, merge_in_split=False,
                          tensor_cores=False, pos=None, merge_in_projection=False):
        """rope_kv_at then attention_at with the rotation inside the
        attention's partials (generation_bodies.rope_attention_at): every
        split rotates its group's q heads itself and the group's splits
        write the cache row gen[POS]; no q tensor, one task fewer.
        merge_in_split, tensor_cores: as attention_at's. pos (an int): the
        position fixed at compile time instead of gen[POS] (gen None; cos
        and sin that position's rows [D/2]; the fixed decode step).
        merge_in_projection: as attention_at's (o None; the heads are
        qkv's less two kv heads' worth)."""
        self._need("rope_attention_at", "k_cache", k_cache, rank=3)
        self._need("rope_attention_at", "qkv", qkv, rank=1)
        Hkv, S, D = k_cache.shape
        if merge_in_projection:
            if qkv.size % D or qkv.size // D <= 2 * Hkv:
                raise ValueError(f"rope_attention_at: qkv ({qkv.size}) is not q, k and v "
                                 f"heads of {D} with {Hkv} kv heads")
            Hq = qkv.size // D - 2 * Hkv
        else:
            self._need("rope_attention_at", "o", o, rank=1)
            if o.size % D:
                raise ValueError(f"rope_attention_at: o ({o.size}) is not whole heads of {D}")
            Hq = o.size // D
        if (pos is None) != (gen is not None):
            raise ValueError("rope_attention_at: give the position either as gen (the "
                             "generation state) or as pos (an int), not both or neither")
        if tensor_cores is None:
            tensor_cores = gbodies.tensor_cores_serve(Hq, Hkv, D, S, splits, self.threads,
                                                      key_block)
        split = gbodies.rope_attention_at(Hq, Hkv, D, S, splits, threads=self.threads,
                                          key_block=key_block, merge_in_split=merge_in_split,
                                          tensor_cores=tensor_cores, pos=pos, emit=False)
        merge = gbodies.attention_merge(Hq, Hkv, D, splits, threads=self.threads, emit=False)
        inputs = [("qkv", qkv), ("cos", cos), ("sin", sin), ("k_cache", k_cache),
                  ("v_cache", v_cache)] + ([("gen", gen)] if pos is None else [])
        self._check_args("rope_attention_at", split, inputs)
        return self._split_and_merge("rope_attention_at", split, merge, inputs, o, jit, name,
                                     merge_in_split, merge_in_projection, (Hq, Hkv, D, splits))

    def _split_and_merge(self, what, split, merge, inputs, o, jit, name, merge_in_split=False,
                         merge_in_projection=False, shape=None):
        """The split task on `inputs` (then the partials, scratch tensors
        named after o) and the merge task into o (merge_in_split: no merge
        task; the split's last two arguments are the count and o); both
        latency-bound (a short cache's chunks are round trips, not a
        stream): under workers_by_sm they get SMs of their own.
        merge_in_projection: the split task alone, its partials (named
        after `name`) returned as AttentionPartials of shape (heads,
        kv_heads, head_dim, splits)."""
        if merge_in_projection:
            if o is not None:
                raise ValueError(f"{what}: merge_in_projection writes no o (pass None; the "
                                 "projection after it merges the partials)")
            if merge_in_split:
                raise ValueError(f"{what}: merge_in_split and merge_in_projection are two "
                                 "places for one merge; pick one")
            if not name:
                raise ValueError(f"{what}: merge_in_projection names the partials after the "
                                 "task: give name=")
            merged_projection.projection_merge_config(*shape, self.threads)
            o_part = self.scratch(f"{name}.o_part", split.args[-2][1], "float32")
            lse = self.scratch(f"{name}.lse", split.args[-1][1], "float32")
            self._task(what, f"{name}_split", split,
                       list(inputs) + [("o_part", o_part), ("lse", lse)], variable=jit,
                       latency_bound=True)
            return AttentionPartials(o_part, lse, *shape)
        self._check_args(what, merge, [("o", o)], start=2)
        parts = 4 if merge_in_split else 2
        o_part = self.scratch(f"{o.name}.o_part", split.args[-parts][1], "float32")
        lse = self.scratch(f"{o.name}.lse", split.args[-parts + 1][1], "float32")
        base = name or "attn"
        params = list(inputs) + [("o_part", o_part), ("lse", lse)]
        if merge_in_split:
            # The count a kv head: zero when the kernel is allocated or
            # reset (MegaKernel zeroes its scratch), back to zero after
            # each use (the last split resets it).
            counts = self.scratch(f"{o.name}.arrivals", split.args[-2][1], "int32")
            return self._task(what, f"{base}_split", split,
                              params + [("counts", counts), ("o", o)], variable=jit,
                              latency_bound=True)
        self._task(what, f"{base}_split", split, params, variable=jit, latency_bound=True)
        return self._task(what, f"{base}_merge", merge,
                          [("o_part", o_part), ("lse", lse), ("o", o)], latency_bound=True)

    def pick_next(self, logits, tokens, gen, sampling, name=None):
        """The next token: the first index of the largest logit (greedy), or
        a sample when sampling[0] = 1/T > 0 (generation_state.py), appended
        to tokens and the state advanced, in two tasks through scratch
        tensors of per-chunk maxima, top-k candidates and noisy scores."""
        self._need("pick_next", "logits", logits, rank=1)
        self._need("pick_next", "tokens", tokens, rank=1, dtype="int32")
        V = logits.size
        part = gbodies.argmax_partial(V, threads=self.threads, emit=False)
        units = part.units
        pick = gbodies.pick_advance(V, tokens.size, units, threads=self.threads, emit=False)
        self._check_args("pick_next", part, [("logits", logits)])
        best = self.scratch(f"{logits.name}.best", part.args[3][1], "float32")
        cand = self.scratch(f"{logits.name}.candidates", part.args[4][1], "float32")
        scores = self.scratch(f"{logits.name}.scores", part.args[5][1], "float32")
        base = name or "pick"
        self._need("pick_next", "sampling", sampling, rank=1, dtype="float32")
        self._task("pick_next", f"{base}_partial", part,
                   [("logits", logits), ("gen", gen), ("sampling", sampling), ("best", best),
                    ("cand", cand), ("scores", scores)])
        return self._task("pick_next", f"{base}_advance", pick,
                          [("best", best), ("cand", cand), ("sampling", sampling),
                           ("tokens", tokens), ("gen", gen), ("logits", logits),
                           ("scores", scores)])

    def pick_next_ranks(self, logits, tokens, gen, sampling, rank, name=None):
        """pick_next in a graph of several ranks, each holding its rows
        [rank V, (rank+1) V) of the vocabulary's logits (V = logits.size):
        a partial task per rank hands every chunk's pairs (global indices,
        the noise of global token ids) to every rank's inboxes
        (peer_bodies.argmax_partial_to_ranks) and signals a peer event;
        each rank's advance task then picks from the R ranks' partials as
        the one-GPU pick would from the whole vocabulary's, so every rank
        appends the same token. Greedy, temperature and top-k up to
        MAX_TOP_K; no whole-vocabulary filtering (top-p alone, larger k).
        Adds `<name>.best_inbox`, `<name>.cand_inbox` (this rank's) and
        `<name>.best_to<q>`, `<name>.cand_to<q>` (rank q's)."""
        from . import peer_bodies

        R = self.ranks
        if R < 2:
            raise ValueError("pick_next_ranks: the graph has one rank (pick_next)")
        self._need("pick_next_ranks", "logits", logits, rank=1)
        self._need("pick_next_ranks", "tokens", tokens, rank=1, dtype="int32")
        self._need("pick_next_ranks", "sampling", sampling, rank=1, dtype="float32")
        self._need("pick_next_ranks", "rank", rank, rank=1, dtype="int32")
        V = logits.size
        part = peer_bodies.argmax_partial_to_ranks(V, R, threads=self.threads, emit=False)
        pick = gbodies.pick_advance(R * V, tokens.size, R * part.units, whole=False,
                                    threads=self.threads, emit=False)
        base = name or "pick"
        nb, nc = part.args[4][1], part.args[4 + R][1]
        best = self.tensor(f"{base}.best_inbox", nb, "float32", role="cache")
        cand = self.tensor(f"{base}.cand_inbox", nc, "float32", role="cache")
        best_to = [self.tensor(f"{base}.best_to{q}", nb, "float32", role="cache")
                   for q in range(R)]
        cand_to = [self.tensor(f"{base}.cand_to{q}", nc, "float32", role="cache")
                   for q in range(R)]
        event = f"{base.replace('.', '_')}_partials"
        if event in self.peer_events:
            raise ValueError(f"pick_next_ranks: {base!r} is used already")
        self.peer_events[event] = part.units
        self._task("pick_next_ranks", f"{base}_partial", part,
                   [("logits", logits), ("gen", gen), ("sampling", sampling), ("rank", rank)]
                   + [(f"best_to_{q}", t) for q, t in enumerate(best_to)]
                   + [(f"cand_to_{q}", t) for q, t in enumerate(cand_to)],
                   signals=(event,))
        return self._task("pick_next_ranks", f"{base}_advance", pick,
                          [("best", best), ("cand", cand), ("sampling", sampling),
                           ("tokens", tokens), ("gen", gen)], waits=(event,))

    def silu_mul(self, gu, a, chunk=None, name=None):
        """a = silu(gu[:I]) * gu[I:], I = a.size."""
        self._need("silu_mul", "a", a, rank=1)
        body = bodies.silu_mul(a.size, chunk or elementwise_chunk(a.size, self.threads),
                               threads=self.threads, emit=False)
        return self._task("silu_mul", name, body, [("gu", gu), ("a", a)])

    def add(self, a, b, y, chunk=None, name=None):
        """y = a + b."""
        self._need("add", "y", y, rank=1)
        body = bodies.residual_add(y.size, chunk or elementwise_chunk(y.size, self.threads),
                                   threads=self.threads, emit=False)
        return self._task("add", name, body, [("a", a), ("b", b), ("y", y)])

    def repeat_until(self, flag, element, max_steps):
        """One launch repeats the whole graph on the device, up to max_steps
        steps (the runtime may set fewer: MegaKernel.set_step_limit), and
        stops after the first step that leaves flag[element] nonzero
        (mega.graph stop_word / max_steps). flag: a 1-D int32 tensor some
        task writes."""
        self._need("repeat_until", "flag", flag, rank=1, dtype="int32")
        if isinstance(element, bool) or not isinstance(element, int) or \
                not 0 <= element < flag.size:
            raise ValueError(f"repeat_until: element {element!r} is outside '{flag.name}' "
                             f"({flag.size} elements)")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or \
                not 1 <= max_steps <= 1 << 24:
            raise ValueError(f"repeat_until: max_steps must be an int in [1, 2^24], "
                             f"got {max_steps!r}")
        if flag.name not in self._writer:
            raise ValueError(f"repeat_until: no task writes '{flag.name}', so the loop "
                             "could never stop early")
        self.stop = (flag, element, max_steps)

    # --- output --------------------------------------------------------------

    def distinct_bodies(self) -> List[Body]:
        """The distinct bodies, in first-use order."""
        seen = {}
        for task in self.tasks:
            seen.setdefault(task.body.name, task.body)
        return list(seen.values())

    def graph_mlir(self) -> str:
        """The mega.graph op alone."""
        def strings(xs):
            return "[" + ", ".join(f'"{x}"' for x in xs) + "]"
        params = ", ".join(f"%arg{t.index}: {t.type}" for t in self.tensors)
        from ..compiler import attr_names
        names = attr_names()
        attrs = (f"{names['graph_arg_names']} = {strings(t.name for t in self.tensors)}, "
                 f"{names['graph_arg_roles']} = {strings(t.role for t in self.tensors)}")
        if self.stop is not None:
            flag, element, steps = self.stop
            attrs += f", stop_word = array<i64: {flag.index}, {element}>, max_steps = {steps}"
        if self.ctas_per_sm > 1:
            attrs += f", ctas_per_sm = {self.ctas_per_sm}"
        if self.workers_by_sm:
            attrs += ", workers_by_sm"
        ranks = f" ranks {self.ranks}" if self.ranks > 1 else ""
        lines = [f"mega.graph @{self.name}({params}) workers {self.workers} "
                 f"schedulers {self.schedulers}{ranks} attributes {{{attrs}}} {{"]
        lines += [f"  mega.event @{name} trigger {trigger} peers"
                  for name, trigger in self.peer_events.items()]
        lines += ["  " + task.mlir() for task in self.tasks]
        lines.append("}")
        return "\n".join(lines)

    def to_mlir(self) -> str:
        """The whole module as text: body functions, then the graph."""
        from tilemega.ir import InsertionPoint, Location, Module

        with _context() as ctx, Location.unknown(ctx):
            module = Module.create()
            with InsertionPoint(module.body):
                for body in self.distinct_bodies():
                    bodies.emit(body)
            funcs = str(module).strip()
        assert funcs.startswith("module {") and funcs.endswith("}")
        inner = funcs[len("module {"):-1].rstrip()
        graph = "\n".join("  " + line for line in self.graph_mlir().splitlines())
        return "module {" + inner + "\n" + graph + "\n}\n"

    def build(self):
        """The module (tilemega.ir.Module) in the current context (or a new one)."""
        from tilemega.ir import Module

        text = self.to_mlir()
        with _context():
            return Module.parse(text)


def _context():
    """The current MLIR context, or a new one (both usable in `with`)."""
    from contextlib import nullcontext
    from tilemega.ir import Context

    current = Context.current
    return nullcontext(current) if current is not None else Context()
