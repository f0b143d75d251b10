"""tilemega.mega: every task body of the Llama decode and MLP graphs compiles
on its own and assembles with no spills; the graph builder checks shapes and
writes the expected mega IR. Needs no GPU (examples_gpu/mega_bodies.py runs
the bodies there)."""

import re

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega import mega  # noqa: E402
from tilemega.compiler import find_ptxas  # noqa: E402
from tilemega.ir import Context, InsertionPoint, Location, Module  # noqa: E402
from tilemega.mega import bodies  # noqa: E402

LLAMA = mega.LlamaConfig(layers=1)


def _graph_bodies():
    seen = {}
    for g in (mega.decode_graph(LLAMA), mega.mlp_graph()):
        for body in g.distinct_bodies():
            seen.setdefault(body.name, body)
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
                     "attn_combine", "silu_mul"}


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


def test_footprints_stay_inside_their_tensors():
    for body in BODIES.values():
        for a in body.footprint:
            _, shape, _ = body.args[a.operand]
            n = 1
            for d in shape:
                n *= d
            assert a.mode in ("read", "write") and a.stride >= 0 and a.base >= 0
            assert a.stride * (body.units - 1) + a.base + a.size <= n, (body.name, a)


def test_gemv_footprint_and_rows():
    b = bodies.gemv(3072, 2048, 24, emit=False)
    assert b.units == 128
    assert b.footprint == (("read", 0, 24 * 2048, 0, 24 * 2048), ("read", 1, 0, 0, 2048),
                           ("write", 2, 24, 0, 24))
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


def test_decode_graph_text():
    cfg = mega.LlamaConfig(layers=2)
    g = mega.decode_graph(cfg)
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
    assert "workers 132 schedulers 1 attributes {mega.arg_names = [\"x\", " in graph
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
    assert len(split) == 2 and all(line.endswith("] {variable}") for line in split)
    assert "{variable}" not in graph.replace(split[0], "").replace(split[1], "")
    # kv_append writes position kv_len - 1 of head u.
    assert "#mega.access<write operand 2 offset 65536 * u + 65472 size 64>" in graph


def test_decode_graph_verifies_without_footprints():
    # Everything but the footprints, against the dialect as built: operands,
    # body signatures, counts = grids.
    text = mega.decode_graph(mega.LlamaConfig(layers=1)).to_mlir()
    text = re.sub(r" footprint \[[^\]]*\]", "", text).replace(" {variable}", "")
    with Context():
        assert Module.parse(text).operation.verify()


def test_mlp_graph_builds():
    # Needs the #mega.access attribute in the dialect.
    g = mega.mlp_graph()
    assert [t.name for t in g.tensors if t.role != "scratch"] == ["x", "norm_w", "wgu", "wd", "out"]
    with Context():
        module = g.build()
        assert module.operation.verify()
        assert "#mega.access<write operand 1 offset 2048 * u + 0 size 2048>" in str(module)
