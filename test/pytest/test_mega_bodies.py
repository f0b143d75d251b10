"""tilemega.mega: every task body of the Llama decode and MLP graphs (fused
and not) compiles on its own and assembles with no spills; the graph builder
checks shapes and writes the expected mega IR, and the fused decode graph
compiles to a deadlock-free persistent kernel. Needs no GPU
(examples_gpu/mega_bodies.py runs the bodies there)."""

import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.compiler import find_ptxas  # noqa: E402
from tilemega.ir import Attribute, Context, InsertionPoint, Location, Module  # noqa: E402
from tilemega.mega import bodies  # noqa: E402

LLAMA = mega.LlamaConfig(layers=1)


def _graph_bodies():
    seen = {}
    for g in (mega.decode_graph(LLAMA), mega.decode_graph(LLAMA, fuse=False),
              mega.decode_graph(LLAMA, rope_in_attention=False, fused_glu=False),
              mega.mlp_graph(), mega.mlp_graph(fuse=False)):
        for body in g.distinct_bodies():
            seen.setdefault(body.name, body)
    # The gate/up projection with the activation in its epilogue
    # (generation_graph(..., fused_glu=True)).
    glu = bodies.gemv_rmsnorm_glu(8192, 2048, 32, emit=False)
    seen[glu.name] = glu
    return seen


BODIES = _graph_bodies()


@pytest.fixture(scope="module")
def compiled():
    """body name -> CompiledModule, each body alone in its module."""
    out = {}
    for name, body in BODIES.items():
        with Context(), Location.unknown():
            module = Module.create()
            with InsertionPoint(module.body):
                bodies.emit(body)
            out[name] = tilemega.compile(module, chip="sm_90a")
    return out


def test_graphs_use_every_kind_of_body():
    kinds = {re.match(r"[a-z]+(_[a-z]+)?", n).group(0) for n in BODIES}
    assert kinds >= {"rmsnorm", "gemv", "rope", "kv_append", "attn_split",
                     "attn_combine", "silu_mul", "gemv_rms", "gemv_silu", "rope_kv",
                     "rope_attn", "attn_merge"}
    # The MLP chain's down projection has no residual.
    assert {"gemv_silu_2048x8192_r16", "gemv_silu_2048x8192_r16_res"} <= set(BODIES)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_body_compiles_without_spills(compiled, name):
    body, result = BODIES[name], compiled[name]
    (kernel,) = result.kernels
    assert kernel["grid"][0] == body.units and kernel["block"][0] == body.threads
    # Run by a persistent kernel, a body knows only its unit: no gridDim.
    assert "%nctaid" not in result.ptx
    assert kernel["dynamic_shared_bytes"] < 100 * 1024
    if find_ptxas():
        spills = re.findall(r"(\d+) bytes spill stores", result.ptxas_log)
        assert spills and all(s == "0" for s in spills), result.ptxas_log
        # Two 256-thread CTAs (a worker and the scheduler) fit one SM's
        # 64K registers.
        assert kernel["registers"] <= 128, kernel["registers"]


def _size(body, operand):
    n = 1
    for d in body.args[operand][1]:
        n *= d
    return n


def test_footprints_stay_inside_their_tensors():
    for body in BODIES.values():
        for a in body.footprint:
            first, last = a.units(body.units)
            assert a.mode in ("read", "write") and a.stride >= 0 and first < last
            assert a.stride * first + a.base >= 0, (body.name, a)
            assert a.stride * (last - 1) + a.base + a.size <= _size(body, a.operand), \
                (body.name, a)


def _write_counts(body, operand):
    """How many units' write accesses cover each element of `operand`."""
    counts = bytearray(_size(body, operand))
    for a in body.footprint:
        if a.mode == "write" and a.operand == operand:
            for u in range(*a.units(body.units)):
                for e in range(a.stride * u + a.base, a.stride * u + a.base + a.size):
                    counts[e] += 1
    return counts


def test_writes_are_exact():
    # No element is written by two units (they run concurrently), and each
    # output is written whole (caches: exactly the row of the new token).
    # The one exception: the attention with RoPE inside (rope_attn), whose
    # splits of a kv group each store the group's new row, the same bytes.
    for body in BODIES.values():
        for operand in sorted({a.operand for a in body.footprint if a.mode == "write"}):
            counts = _write_counts(body, operand)
            name, shape, _ = body.args[operand]
            same = 1
            if name.endswith("cache") and body.name.startswith("rope_attn"):
                same = int(re.search(r"_k(\d+)_", body.name).group(1))
            assert max(counts) == same, (body.name, operand)
            if name.endswith("cache"):
                pos = int(re.search(r"_p(\d+)(_tc)?$", body.name).group(1))
                hkv, s, d = shape
                rows = [counts[(h * s + p) * d:(h * s + p + 1) * d]
                        for h in range(hkv) for p in range(s)]
                assert [i % s for i, r in enumerate(rows) if min(r)] == [pos] * hkv
                assert sum(counts) == same * hkv * d, body.name
            else:
                assert min(counts) == 1, (body.name, name)


def test_access_unit_range_text():
    a = bodies.Access("write", 4, 64, -2048, 64, 32, 40)
    assert a.mlir() == "#mega.access<write operand 4 offset 64 * u + -2048 size 64 units 32 to 40>"
    assert a.units(100) == (32, 40) and bodies.Access("read", 0, 1, 0, 1).units(7) == (0, 7)
    assert bodies.Access("read", 0, 1, 0, 1).mlir().endswith("size 1>")
    assert bodies.Access("read", 0, 1, 0, 1, first=3).mlir().endswith("size 1 units 3 to -1>")
    with Context():
        # The dialect takes the range (its verifier checks unit 32 starts at >= 0).
        assert str(Attribute.parse(a.mlir())) == a.mlir()


def test_gemv_footprint_and_rows():
    A = bodies.Access
    b = bodies.gemv(3072, 2048, 24, emit=False)
    assert b.units == 128
    assert b.footprint == (A("read", 0, 24 * 2048, 0, 24 * 2048), A("read", 1, 0, 0, 2048),
                           A("write", 2, 24, 0, 24))
    # One wave of units over 132 workers, as large as that allows.
    assert mega.graph.gemv_rows_per_unit(3072, 2048, 132) == 24
    assert mega.graph.gemv_rows_per_unit(2048, 8192, 132) == 16


def _mlp_tensors(g, hidden=256, inter=512):
    return (g.input("x", [hidden]), g.weight("w", [hidden]), g.weight("W", [inter, hidden]),
            g.scratch("h", [hidden]), g.scratch("y", [inter]))


def test_shape_errors_name_the_argument():
    g = mega.Graph("t", workers=4)
    x, w, W, h, y = _mlp_tensors(g)
    with pytest.raises(ValueError, match=r"rmsnorm: w \(W\)"):
        g.rmsnorm(x, W, h)
    g.rmsnorm(x, w, h)
    y2 = g.scratch("y2", [512])
    with pytest.raises(ValueError, match=r"linear: x \(y2\) is \[512\] bfloat16, expected \[256\]"):
        g.linear(W, y2, y)
    with pytest.raises(ValueError, match=r"linear: y \(h\)"):
        g.linear(W, h, h)
    with pytest.raises(ValueError, match=r"linear: W \(h\) must have rank 2"):
        g.linear(h, h, y)
    with pytest.raises(ValueError, match=r"linear: residual \(h\)"):
        g.linear(W, h, y, residual=h)
    q, k, cache = g.scratch("q", [4 * 64]), g.scratch("k", [2 * 64]), g.cache("kc", [2, 128, 64])
    qkv = g.scratch("qkv", [8 * 64])
    cos, sin = g.input("cos", [32], "float32"), g.input("sin", [32], "float32")
    with pytest.raises(ValueError, match=r"rope: cos \(x\)"):
        g.rope(qkv, x, sin, q, k)
    with pytest.raises(ValueError, match=r"attention: k_cache \(q\) must have rank 3"):
        g.attention(q, q, cache, q)
    c1 = g.cache("kc1", [1, 128, 64])   # 4 query heads per kv head
    with pytest.raises(ValueError, match=r"attention: o \(k\) is \[128\]"):
        g.attention(q, c1, c1, k, splits=2)
    v_cache = g.cache("vc", [2, 128, 64])
    with pytest.raises(ValueError, match=r"kv_append: pos 128 is outside"):
        g.kv_append(k, qkv, cache, v_cache, 128)
    assert len(g.tasks) == 1   # failed calls add no task and no tensor
    assert not any(t.name.startswith("k.") for t in g.tensors)


def test_dataflow_errors():
    g = mega.Graph("t", workers=4)
    x, w, W, h, y = _mlp_tensors(g)
    with pytest.raises(ValueError, match=r"linear: x \(h\) is read before any task writes it"):
        g.linear(W, h, y)
    with pytest.raises(ValueError, match=r"rmsnorm: y \(w\) has role weight, which no task may write"):
        g.rmsnorm(x, w, w)
    foreign = mega.Graph("u", workers=4).input("x", [256])
    with pytest.raises(ValueError, match="not a tensor of graph 't'"):
        g.rmsnorm(foreign, w, h)
    with pytest.raises(ValueError, match="exists already"):
        g.input("x", [256])


def _tasks(g):
    """[(task, body, [argument tensor names], footprint text)] of g's graph."""
    names = [t.name for t in g.tensors]
    out = []
    for m in re.finditer(r"mega\.task @(\w+) body @(\w+)\(([^:]*) : [^)]*\) count \d+ "
                         r"footprint \[(.*)\]", g.graph_mlir()):
        args = [names[int(a)] for a in re.findall(r"%arg(\d+)", m.group(3))]
        out.append((m.group(1), m.group(2), args, m.group(4)))
    return out


def test_decode_graph_text():
    cfg = mega.LlamaConfig(layers=2)
    g = mega.decode_graph(cfg, fuse=False)
    text = g.to_mlir()
    graph = g.graph_mlir()
    per_layer = ["attn_norm", "qkv", "rope", "kv_append", "attn_split", "attn_combine",
                 "wo", "mlp_norm", "wgu", "silu_mul", "wd"]
    expected = [f"t{i}_l{l}_{op}" for i, (l, op) in
                enumerate((l, op) for l in range(2) for op in per_layer)]
    assert re.findall(r"mega\.task @(\w+)", graph) == expected
    # Tasks name their bodies, which the module defines once each.
    for name in set(re.findall(r"body @(\w+)\(", graph)):
        assert text.count(f"func.func @{name}(") == 1
    assert graph.startswith("mega.graph @decode(%arg0: memref<2048xbf16>, "
                            "%arg1: memref<32xf32>, %arg2: memref<32xf32>")
    # 131 workers + the scheduler CTA of the attention's JIT queue = 132 SMs.
    assert "workers 131 schedulers 1 attributes {mega.arg_names = [\"x\", " in graph
    names = [t.name for t in g.tensors]
    assert names.index("l1.wqkv") < names.index("out") == len(names) - 1
    assert {t.role for t in g.tensors if t.name.endswith("cache")} == {"cache"}
    qkv = re.search(r"mega\.task @t1_l0_qkv body @gemv_3072x2048_r24\(%arg4, %arg11, %arg12 "
                    r": [^)]*\) count 128 footprint \[(.*)\]$", graph, re.M)
    assert qkv, graph.splitlines()[2]
    assert qkv.group(1) == ("#mega.access<read operand 0 offset 49152 * u + 0 size 49152>, "
                            "#mega.access<read operand 1 offset 0 * u + 0 size 2048>, "
                            "#mega.access<write operand 2 offset 24 * u + 0 size 24>")
    split = [line for line in graph.splitlines() if "_attn_split " in line]
    # The splits go to the JIT queue (variable); splits and combines are
    # latency-bound (SMs of their own under workers_by_sm).
    assert len(split) == 2 and all(line.endswith("] {variable, latency_bound}")
                                   for line in split)
    assert "variable" not in graph.replace(split[0], "").replace(split[1], "")
    combine = [line for line in graph.splitlines() if "_attn_combine " in line]
    assert len(combine) == 2 and all(line.endswith("] {latency_bound}") for line in combine)
    # kv_append writes position kv_len - 1 of head u.
    assert "#mega.access<write operand 2 offset 65536 * u + 65472 size 64>" in graph
    # RoPE's units < 32 write q head u, the 8 after them k head u - 32.
    assert ("#mega.access<write operand 3 offset 64 * u + 0 size 64 units 0 to 32>, "
            "#mega.access<write operand 4 offset 64 * u + -2048 size 64 units 32 to 40>]"
            in graph)


def test_fused_decode_graph_text():
    g = mega.decode_graph(mega.LlamaConfig(layers=2))
    tasks = _tasks(g)
    ops = ["qkv", "attn_split", "attn_merge", "wo", "wgu", "wd"]
    assert [t[0] for t in tasks] == [f"t{6 * l + i}_l{l}_{op}" for l in range(2)
                                     for i, op in enumerate(ops)]
    # Layer 1 as written, dataflow included: its input is layer 0's output.
    calls = {t[0].split("_", 1)[1]: t[1:3] for t in tasks}
    assert calls["l1_qkv"] == ("gemv_rms_3072x2048_r24",
                               ["l1.wqkv", "l0.x2", "l1.attn_norm", "l1.qkv"])
    # The generation's attention at the fixed position kv_len - 1, on
    # tensor cores: RoPE and the cache row inside, no q tensor.
    assert calls["l1_attn_split"] == ("rope_attn_32x8x64_s1024_k8_p1023_tc",
                                      ["l1.qkv", "rope_cos", "rope_sin", "l1.k_cache",
                                       "l1.v_cache", "l1.attn.o_part", "l1.attn.lse"])
    assert calls["l1_attn_merge"] == ("attn_merge_32x8x64_k8",
                                      ["l1.attn.o_part", "l1.attn.lse", "l1.attn"])
    # After the latency-bound merge: all of a unit's W in its prologue
    # (Graph.whole_early_for).
    assert calls["l1_wo"] == ("gemv_2048x2048_r16_res_whole",
                              ["l1.wo", "l1.attn", "l0.x2", "l1.x1"])
    # The activation in the gate/up projection, as the generation graph has it.
    assert calls["l1_wgu"] == ("gemv_rms_glu_8192x2048_r64",
                               ["l1.wgu", "l1.x1", "l1.mlp_norm", "l1.act"])
    assert calls["l1_wd"] == ("gemv_2048x8192_r16_res",
                              ["l1.wd", "l1.act", "l1.x1", "out"])
    # No unfused intermediates remain.
    assert not {"l0.h", "l0.h2", "l0.k", "l0.q", "l0.gu"} & {t.name for t in g.tensors}
    foot = {t[0].split("_", 1)[1]: t[3] for t in tasks}
    # Split s of group g (units 8g..8g+7): the group's q heads 4g..4g+3, k
    # head 32 + g and v head 40 + g of qkv; the position's rope rows; its
    # partials; row kv_len - 1 of head g of each cache.
    split = foot["l0_attn_split"]
    assert split.startswith(
        "#mega.access<read operand 0 offset 0 * u + 0 size 256 units 0 to 8>, "
        "#mega.access<read operand 0 offset 0 * u + 2048 size 64 units 0 to 8>, "
        "#mega.access<read operand 0 offset 0 * u + 2560 size 64 units 0 to 8>, ")
    assert ("#mega.access<read operand 1 offset 0 * u + 0 size 32>, "
            "#mega.access<read operand 2 offset 0 * u + 0 size 32>, "
            "#mega.access<read operand 3 offset 0 * u + 0 size 524288>, "
            "#mega.access<read operand 4 offset 0 * u + 0 size 524288>, "
            "#mega.access<write operand 5 offset 256 * u + 0 size 256>, "
            "#mega.access<write operand 6 offset 4 * u + 0 size 4>, "
            "#mega.access<write operand 3 offset 0 * u + 65472 size 64 units 0 to 8>, ") in split
    assert split.endswith("#mega.access<write operand 4 offset 0 * u + 524224 size 64 "
                          "units 56 to 64>")
    # Without rope_in_attention: RoPE and the cache row a task of their own.
    own = {t[0].split("_", 1)[1]: t[1:4]
           for t in _tasks(mega.decode_graph(mega.LlamaConfig(layers=1),
                                             rope_in_attention=False))}
    assert own["l0_rope_kv"][:2] == ("rope_kv_32x8x64_s1024_p1023",
                                     ["l0.qkv", "rope_cos", "rope_sin", "l0.q",
                                      "l0.k_cache", "l0.v_cache"])
    assert own["l0_attn_split"][1][:3] == ["l0.q", "l0.k_cache", "l0.v_cache"]
    assert foot["l0_qkv"] == ("#mega.access<read operand 0 offset 49152 * u + 0 size 49152>, "
                              "#mega.access<read operand 1 offset 0 * u + 0 size 2048>, "
                              "#mega.access<read operand 2 offset 0 * u + 0 size 2048>, "
                              "#mega.access<write operand 3 offset 24 * u + 0 size 24>")
    # Group g: q heads 4g..4g+3, k head 32 + g, v head 40 + g of qkv; its
    # q heads; row kv_len - 1 of head g of each cache.
    assert own["l0_rope_kv"][2] == ("#mega.access<read operand 0 offset 256 * u + 0 size 256>, "
                                  "#mega.access<read operand 0 offset 64 * u + 2048 size 64>, "
                                  "#mega.access<read operand 0 offset 64 * u + 2560 size 64>, "
                                  "#mega.access<read operand 1 offset 0 * u + 0 size 32>, "
                                  "#mega.access<read operand 2 offset 0 * u + 0 size 32>, "
                                  "#mega.access<write operand 3 offset 256 * u + 0 size 256>, "
                                  "#mega.access<write operand 4 offset 65536 * u + 65472 size 64>, "
                                  "#mega.access<write operand 5 offset 65536 * u + 65472 size 64>")
    assert foot["l0_wd"] == ("#mega.access<read operand 0 offset 131072 * u + 0 size 131072>, "
                             "#mega.access<read operand 1 offset 0 * u + 0 size 8192>, "
                             "#mega.access<read operand 2 offset 16 * u + 0 size 16>, "
                             "#mega.access<write operand 3 offset 16 * u + 0 size 16>")


def test_fused_graph_errors():
    g = mega.Graph("t", workers=4)
    x, w, W, h, y = _mlp_tensors(g)
    with pytest.raises(ValueError, match=r"linear: norm \(W\) is \[512, 256\]"):
        g.linear(W, x, y, norm=W)
    with pytest.raises(ValueError, match="norm and residual together"):
        g.linear(W, x, y, norm=w, residual=y)
    g.linear(W, x, y, norm=w)
    Wd, out = g.weight("Wd", [256, 256]), g.output("out", [256])
    with pytest.raises(ValueError, match=r"linear_silu: gu \(y\) is \[512\] bfloat16, "
                                         r"expected \[1024\]"):
        g.linear_silu(g.weight("Wd2", [256, 512]), y, out)
    with pytest.raises(ValueError, match=r"linear_silu: residual \(W\)"):
        g.linear_silu(Wd, y, out, residual=W)
    g.linear_silu(Wd, y, out, residual=x)
    qkv, q = g.scratch("qkv", [8 * 64]), g.scratch("q", [4 * 64])
    kc, vc = g.cache("kc", [2, 128, 64]), g.cache("vc", [2, 128, 64])
    cos, sin = g.input("cos", [32], "float32"), g.input("sin", [32], "float32")
    with pytest.raises(ValueError, match=r"rope_kv_append: qkv \(qkv\) is read before"):
        g.rope_kv_append(qkv, cos, sin, q, kc, vc, 5)
    g.linear(g.weight("Wqkv", [8 * 64, 256]), x, qkv, norm=w)
    with pytest.raises(ValueError, match=r"rope_kv_append: pos 128 is outside"):
        g.rope_kv_append(qkv, cos, sin, q, kc, vc, 128)
    with pytest.raises(ValueError, match=r"rope_kv_append: q \(96\) is not whole heads of 64"):
        g.rope_kv_append(qkv, cos, sin, g.scratch("q3", [96]), kc, vc, 5)
    with pytest.raises(ValueError, match=r"rope_kv_append: qkv \(qkv\) is \[512\] bfloat16, "
                                         r"expected \[768\]"):
        g.rope_kv_append(qkv, cos, sin, y, kc, vc, 5)   # y: 8 heads, so 8 + 2 * 2
    g.rope_kv_append(qkv, cos, sin, q, kc, vc, 5)
    assert [t.body.name for t in g.tasks] == ["gemv_rms_512x256_r128", "gemv_silu_256x256_r64_res",
                                              "gemv_rms_512x256_r128", "rope_kv_4x2x64_s128_p5"]


def test_fused_decode_graph_compiles():
    # The whole pipeline: mega-decompose, plan-events, schedule,
    # convert-mega-to-gpu and the tile pipeline on the persistent kernel.
    from tilemega.runtime.mega_sim import check_deadlock_free

    result = tilemega.compile(mega.decode_graph(mega.LlamaConfig(layers=2)).to_mlir(),
                              chip="sm_90a")
    (kernel,) = result.kernels
    meta = kernel["mega"]
    assert [t["body"] for t in meta["tasks"]][:6] == [
        "gemv_rms_3072x2048_r24", "rope_attn_32x8x64_s1024_k8_p1023_tc",
        "attn_merge_32x8x64_k8", "gemv_2048x2048_r16_res_whole", "gemv_rms_glu_8192x2048_r64",
        "gemv_2048x8192_r16_res"]
    assert len(meta["tasks"]) == 12 and kernel["grid"][0] == 132
    assert check_deadlock_free(meta, runs=10).proven


def test_decode_graph_verifies_without_footprints():
    # Everything but the footprints, against the dialect as built: operands,
    # body signatures, counts = grids.
    text = mega.decode_graph(mega.LlamaConfig(layers=1)).to_mlir()
    text = re.sub(r" footprint \[[^\]]*\]", "", text).replace(" {variable}", "")
    with Context():
        assert Module.parse(text).operation.verify()


@pytest.mark.parametrize("fuse", [True, False])
def test_mlp_graph_builds(fuse):
    # Needs the #mega.access attribute in the dialect.
    g = mega.mlp_graph(fuse=fuse)
    assert [t.name for t in g.tensors if t.role != "scratch"] == ["x", "norm_w", "wgu", "wd", "out"]
    assert [t.body.name for t in g.tasks] == (
        ["gemv_rms_16384x2048_r128", "gemv_silu_2048x8192_r16"] if fuse else
        ["rmsnorm_2048", "gemv_16384x2048_r128", "silu_mul_8192_c2048", "gemv_2048x8192_r16"])
    with Context():
        module = g.build()
        assert module.operation.verify()
        # silu_mul writes chunks of 2048; fused, the activation never reaches memory.
        assert ("#mega.access<write operand 1 offset 2048 * u + 0 size 2048>" in str(module)) \
            != fuse


def test_fused_glu_graphs_build_and_compile():
    # The activation in the gate/up projection (opt-in): two tasks of the MLP
    # chain, gemv_rmsnorm_glu then a plain GEMV; the decode step's layer
    # likewise; refused without fuse.
    g = mega.mlp_graph(fused_glu=True)
    assert [t.body.name for t in g.tasks] == ["gemv_rms_glu_8192x2048_r64",
                                              "gemv_2048x8192_r16"]
    d = mega.decode_graph(LLAMA, fused_glu=True)
    assert [t.body.name.split("_")[1] for t in d.tasks if t.name.endswith(("wgu", "wd"))] \
        == ["rms", "2048x8192"]
    art = tilemega.compile(d.to_mlir(), chip="sm_90a", name="decode_glu")
    assert art.kernels[0]["mega"]["tasks"]
    for build in (mega.mlp_graph, lambda **k: mega.decode_graph(LLAMA, **k)):
        with pytest.raises(ValueError, match="fused_glu needs fuse=True"):
            build(fuse=False, fused_glu=True)


def test_fixed_position_attention_refusals():
    from tilemega.mega import generation_bodies as gb

    with pytest.raises(ValueError, match=r"rope_attention_at: pos 128 is outside the cache of 128"):
        gb.rope_attention_at(8, 2, 64, 128, 2, pos=128, emit=False)
    with pytest.raises(ValueError, match=r"merge_in_split needs the position from gen"):
        gb.rope_attention_at(8, 2, 64, 128, 2, pos=5, merge_in_split=True, emit=False)
    g = mega.Graph("t", workers=4)
    qkv = g.input("qkv", [12 * 64])
    cos, sin = g.input("cos", [32], "float32"), g.input("sin", [32], "float32")
    kc, vc = g.cache("kc", [2, 128, 64]), g.cache("vc", [2, 128, 64])
    gen = g.input("gen", [gb.gs.GEN_WORDS], "int32")
    o = g.scratch("o", [8 * 64])
    for position in (dict(gen=gen, pos=5), dict(gen=None, pos=None)):
        with pytest.raises(ValueError, match=r"either as gen .* or as pos"):
            g.rope_attention_at(qkv, cos, sin, position["gen"], kc, vc, o, splits=2,
                                pos=position["pos"])
    g.rope_attention_at(qkv, cos, sin, None, kc, vc, o, splits=2, pos=5)
    assert [t.body.name for t in g.tasks] == ["rope_attn_8x2x64_s128_k2_p5",
                                              "attn_merge_8x2x64_k2"]
    with pytest.raises(ValueError, match=r"attention_tensor_cores needs fuse=True and "
                                         r"rope_in_attention=True"):
        mega.decode_graph(LLAMA, rope_in_attention=False, attention_tensor_cores=True)


def test_only_a_linear_after_a_latency_bound_task_puts_its_whole_unit_early():
    """Graph.whole_early_for: the output projection (x from the attention's
    merge, latency-bound) gets bodies.gemv's whole_early - one stage more
    than its K tiles, so that its prologue, issued before the task's wait,
    is all of a unit's W; the other GEMVs keep STAGES - 1 tiles early."""
    g = mega.decode_graph(LLAMA)
    names = {t.name.split("_", 1)[1]: t.body.name for t in g.tasks}
    assert names["l0_wo"].endswith("_whole")
    assert not any(n.endswith("_whole") for k, n in names.items() if k != "l0_wo")
    whole = bodies.gemv(2048, 2048, 16, True, whole_early=True, emit=False)
    plain = bodies.gemv(2048, 2048, 16, True, emit=False)
    assert (whole.name, plain.name) == ("gemv_2048x2048_r16_res_whole", "gemv_2048x2048_r16_res")
    # The unit's 64 KB of W in K tiles of 512: 4 tiles, 5 stages.
    assert bodies.gemv_config(16, 2048) == (512, 4)
    with pytest.raises(ValueError, match="whole_early needs a unit of at most 65536 bytes"):
        bodies.gemv(2048, 2048, 32, whole_early=True, emit=False)
    # A unit too large for it stays as it was, even after the attention.
    assert not g.whole_early_for(g.tasks[2].args[-1], 64, 2048)
    # x from a streaming task (the gate/up projection's output): no.
    gu = next(t for t in g.tasks if t.name.endswith("l0_wgu"))
    assert not g.whole_early_for(gu.args[-1], 8, 2048)
