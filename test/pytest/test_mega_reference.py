"""The decode-step reference (tilemega/mega/reference.py) and the pure parts of
bench/decode.py. The torch parts run where torch is installed (CPU or GPU);
the 1B-shape check needs a CUDA GPU."""

import importlib.util
import json
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_decode",
                                                  os.path.join(ROOT, "bench", "decode.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
ref = bench.reference_module()   # by file, as the benchmark loads it
LLAMA_1B = SimpleNamespace(**bench.LLAMA_1B)
TINY = SimpleNamespace(layers=2, hidden=32, intermediate=48, heads=4, kv_heads=2, head_dim=8,
                       kv_len=5, eps=1e-5, rope_theta=10000.0, dtype="bfloat16")


def _torch_reason(need_gpu=False):
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if need_gpu and not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


needs_torch = pytest.mark.skipif(_torch_reason() is not None, reason=str(_torch_reason()))


# ------------------------------------------------ shapes and bytes


def test_weight_names_and_shapes():
    shapes = ref.weight_shapes(TINY)
    per_layer = {"attn_norm": (32,), "wqkv": ((4 + 2 * 2) * 8, 32), "wo": (32, 32),
                 "mlp_norm": (32,), "wgu": (96, 32), "wd": (32, 48),
                 "k_cache": (2, 5, 8), "v_cache": (2, 5, 8)}
    expected = {f"l{l}.{n}": s for l in range(2) for n, s in per_layer.items()}
    expected.update({"x": (32,), "rope_cos": (4,), "rope_sin": (4,)})
    assert shapes == expected


def test_bytes_per_step_llama_1b():
    h, i, d = 2048, 8192, 64
    weights = 2 * h + (32 + 2 * 8) * d * h + h * 32 * d + 2 * i * h + h * i
    kv = 2 * 8 * 1024 * d
    assert ref.bytes_per_step(LLAMA_1B) == 16 * (weights + kv) * 2 == 1_979_842_560
    one = SimpleNamespace(**dict(vars(LLAMA_1B), layers=1))
    assert ref.bytes_per_step(one) * 16 == ref.bytes_per_step(LLAMA_1B)


def test_mlp_bytes():
    assert ref.mlp_bytes(2048, 8192) == (2048 + 2 * 8192 * 2048 + 2048 * 8192) * 2


def test_rope_angles_are_for_the_last_position():
    a = ref.rope_angles(TINY)
    assert a.shape == (4,)
    assert a[0] == 4.0                                   # pos = kv_len - 1, j = 0
    assert math.isclose(a[3], 4.0 * 10000.0 ** (-6 / 8))


# ------------------------------------------------ float64 reference


def _tiny_weights(seed=1):
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in ref.weight_shapes(TINY).items():
        w[name] = rng.standard_normal(shape) * (0.3 if len(shape) == 2 else 1.0)
        if name.endswith("norm"):
            w[name] = 1.0 + 0.1 * w[name]
        if name.endswith("cache"):
            w[name][:, -1] = 0.0
    w["rope_cos"], w["rope_sin"] = np.cos(ref.rope_angles(TINY)), np.sin(ref.rope_angles(TINY))
    return w


def _naive_step(cfg, w):
    """The step as the spec states it, one head and one position at a time."""
    hq, hkv, d, half = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.head_dim // 2
    pos, cos, sin = cfg.kv_len - 1, w["rope_cos"], w["rope_sin"]

    def rms(v, g):
        return v / math.sqrt(sum(e * e for e in v) / len(v) + cfg.eps) * g

    def rot(v):
        out = np.empty(d)
        for j in range(half):
            out[j] = v[j] * cos[j] - v[j + half] * sin[j]
            out[j + half] = v[j + half] * cos[j] + v[j] * sin[j]
        return out

    x = np.array(w["x"], dtype=np.float64)
    for layer in range(cfg.layers):
        p = f"l{layer}."
        qkv = w[p + "wqkv"] @ rms(x, w[p + "attn_norm"])
        kc, vc = w[p + "k_cache"].copy(), w[p + "v_cache"].copy()
        for g in range(hkv):
            kc[g, pos] = rot(qkv[(hq + g) * d:(hq + g + 1) * d])
            vc[g, pos] = qkv[(hq + hkv + g) * d:(hq + hkv + g + 1) * d]
        attn = np.zeros(hq * d)
        for h in range(hq):
            q, g = rot(qkv[h * d:(h + 1) * d]), h // (hq // hkv)
            s = [float(q @ kc[g, t]) / math.sqrt(d) for t in range(cfg.kv_len)]
            e = [math.exp(v - max(s)) for v in s]
            attn[h * d:(h + 1) * d] = sum(e[t] / sum(e) * vc[g, t] for t in range(cfg.kv_len))
        x = x + w[p + "wo"] @ attn
        gu = w[p + "wgu"] @ rms(x, w[p + "mlp_norm"])
        gate, up = gu[:cfg.intermediate], gu[cfg.intermediate:]
        x = x + w[p + "wd"] @ (gate / (1 + np.exp(-gate)) * up)
    return x


def test_reference_float64_matches_the_spec_stated_per_head():
    w = _tiny_weights()
    ours = ref.reference_float64(TINY, w)
    np.testing.assert_allclose(ours, _naive_step(TINY, w), rtol=1e-12, atol=1e-12)


def test_reference_reads_the_cache_but_overwrites_the_last_position():
    w = _tiny_weights()
    base = ref.reference_float64(TINY, w)
    assert np.all(w["l0.k_cache"][:, -1] == 0)          # worked on copies
    w["l1.k_cache"][:, -1] = 50.0                        # rewritten by the step: no effect
    w["l1.v_cache"][:, -1] = 50.0
    np.testing.assert_array_equal(ref.reference_float64(TINY, w), base)
    w["l1.v_cache"][1, 0] += 1.0                         # an older position: read
    assert not np.allclose(ref.reference_float64(TINY, w), base)


def test_reference_explicit_inputs_override_the_dict():
    w = _tiny_weights()
    x2 = w["x"] * 2
    np.testing.assert_array_equal(ref.reference_float64(TINY, w, x=x2),
                                  ref.reference_float64(TINY, dict(w, x=x2)))


def test_mlp_reference():
    rng = np.random.default_rng(3)
    w = {"x": rng.standard_normal(8), "norm_w": 1 + 0.1 * rng.standard_normal(8),
         "wgu": rng.standard_normal((12, 8)), "wd": rng.standard_normal((8, 6))}
    h = w["x"] / np.sqrt(np.mean(w["x"] ** 2) + 1e-5) * w["norm_w"]
    gate, up = w["wgu"][:6] @ h, w["wgu"][6:] @ h
    expected = w["wd"] @ (gate * (1 / (1 + np.exp(-gate))) * up)
    np.testing.assert_allclose(ref.mlp_reference_float64(w, 1e-5), expected, rtol=1e-12)


def test_compare():
    got = ref.compare(np.array([1.0, 2.0, 2.0]), np.array([1.0, 2.0, 0.0]))
    assert got == {"max_abs": 2.0, "rel_l2": 2.0 / math.sqrt(5.0)}
    with pytest.raises(ValueError, match="shapes differ"):
        ref.compare(np.zeros(3), np.zeros(4))


def test_torch_classes_are_not_built_on_import():
    assert "LlamaDecodeStep" not in vars(ref)
    with pytest.raises(AttributeError):
        ref.NoSuchThing


# ------------------------------------------------ judging a step: cache rows


def _model_weights(cfg, seed):
    """make_weights' distribution in numpy: projections normal / sqrt(fan_in),
    norms 1 + 0.05 normal, every cache position normal (the written one too)."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in ref.weight_shapes(cfg).items():
        r = rng.standard_normal(shape)
        kind = name.split(".")[-1]
        if kind.endswith("norm"):
            r = 1.0 + 0.05 * r
        elif kind.startswith("w"):
            r = r / math.sqrt(shape[1])
        w[name] = r
    angles = ref.rope_angles(cfg)
    w["rope_cos"], w["rope_sin"] = np.cos(angles), np.sin(angles)
    return w


def _step(cfg, w, position=None):
    """What a step leaves behind, simulated in float64: (tensors with the
    rows written at `position` (default: the right one), before, out)."""
    before = ref.snapshot_caches(cfg, w)
    out, rows = ref.reference_step_float64(cfg, w, position=position)
    pos = ref.written_position(cfg) if position is None else position
    after = dict(w)
    for name, row in rows.items():
        after[name] = before[name].copy()
        after[name][:, pos] = row
    return after, before, out


def test_reference_step_returns_the_rows_it_writes():
    w = _tiny_weights()
    x, rows = ref.reference_step_float64(TINY, w)
    np.testing.assert_array_equal(x, ref.reference_float64(TINY, w))
    assert sorted(rows) == sorted(ref.cache_names(TINY)) == sorted(
        f"l{l}.{k}_cache" for l in range(2) for k in "kv")
    # Layer 0's rows from its input x alone: rope(wk @ rmsnorm(x)) and wv @ rmsnorm(x).
    hq, hkv, d = TINY.heads, TINY.kv_heads, TINY.head_dim
    h = w["x"] / np.sqrt(np.mean(w["x"] ** 2) + TINY.eps) * w["l0.attn_norm"]
    qkv = w["l0.wqkv"] @ h
    k = ref._rope64(qkv[hq * d:(hq + hkv) * d].reshape(hkv, d), w["rope_cos"], w["rope_sin"])
    np.testing.assert_allclose(rows["l0.k_cache"], k, rtol=1e-12)
    np.testing.assert_allclose(rows["l0.v_cache"], qkv[(hq + hkv) * d:].reshape(hkv, d),
                               rtol=1e-12)
    assert ref.written_position(TINY) == TINY.kv_len - 1
    # The last layer's rows depend on the layers before: not layer 0's formula.
    h1 = w["x"] / np.sqrt(np.mean(w["x"] ** 2) + TINY.eps) * w["l1.attn_norm"]
    assert not np.allclose(rows["l1.v_cache"],
                           (w["l1.wqkv"] @ h1)[(hq + hkv) * d:].reshape(hkv, d))


def test_check_decode_step_passes_a_correct_step():
    w = _tiny_weights()
    after, before, out = _step(TINY, w)
    got = ref.check_decode_step(TINY, after, before, out, *ref.reference_step_float64(TINY, w))
    assert got["passed"] and got["error"] == 0.0, got
    d = got["details"]
    assert [k for k in d if k.endswith("_row")] == ["l0.k_row", "l0.v_row", "l1.k_row",
                                                     "l1.v_row"]
    assert all(d[k] == 0.0 for k in d if k.endswith("_row"))
    assert d["untouched_rows_ok"] and d["failed"] == []
    assert got["tolerance"] == ref.DECODE_TOLERANCE
    assert d["kv_row_tolerance"] == ref.KV_ROW_TOLERANCE


def test_check_decode_step_flags_a_cache_row_not_written():
    """The step forgot layer 1's v row: the position keeps its stale values.
    The output is right (e.g. the attention read v from elsewhere), so only
    the row check can see it."""
    w = _tiny_weights()
    after, before, out = _step(TINY, w)
    after["l1.v_cache"] = before["l1.v_cache"].copy()
    got = ref.check_decode_step(TINY, after, before, out, *ref.reference_step_float64(TINY, w))
    d = got["details"]
    assert not got["passed"] and d["failed"] == ["l1.v_row"], got
    assert got["error"] == 0.0 and d["l1.k_row"] == 0.0 and d["untouched_rows_ok"]
    assert d["l1.v_row"] > 10 * ref.KV_ROW_TOLERANCE
    # A NaN row (or one the kernel filled with NaN) fails as well.
    after["l1.v_cache"][:, -1] = np.nan
    got = ref.check_decode_step(TINY, after, before, out, *ref.reference_step_float64(TINY, w))
    assert got["details"]["l1.v_row"] == float("inf") and not got["passed"]


def test_check_decode_step_flags_a_stray_write_and_a_nan_output():
    w = _tiny_weights()
    after, before, out = _step(TINY, w)
    after["l0.k_cache"][1, 0, 3] += 0.5                   # a position the step must not write
    expected = ref.reference_step_float64(TINY, w)
    got = ref.check_decode_step(TINY, after, before, out, *expected)
    assert not got["passed"] and not got["details"]["untouched_rows_ok"]
    assert got["details"]["failed"] == [f"l0.k_cache positions other than {TINY.kv_len - 1}"]
    after["l0.k_cache"] = before["l0.k_cache"].copy()
    after["l0.k_cache"][:, -1] = expected[1]["l0.k_cache"]
    assert ref.check_decode_step(TINY, after, before, out, *expected)["passed"]
    nan_out = out.copy()
    nan_out[0] = np.nan                                   # an output element never written
    got = ref.check_decode_step(TINY, after, before, nan_out, *expected)
    assert not got["passed"] and got["details"]["failed"] == ["out"]


def test_a_misplaced_cache_write_passes_the_output_check_but_not_the_row_check():
    """The broken artifact test_mega_misplaced_kv in float64: every layer
    writes its new k/v at kv_len - 2. Over 512 keys the output moves by far
    less than the tolerance (one stale key, one replaced): the output check
    alone passes, the row and untouched-position checks fail."""
    cfg = SimpleNamespace(layers=2, hidden=128, intermediate=256, heads=4, kv_heads=2,
                          head_dim=32, kv_len=512, eps=1e-5, rope_theta=500000.0,
                          dtype="bfloat16")
    w = _model_weights(cfg, seed=0)
    expected = ref.reference_step_float64(cfg, w)
    after, before, out = _step(cfg, w, position=cfg.kv_len - 2)
    got = ref.check_decode_step(cfg, after, before, out, *expected)
    d = got["details"]
    assert got["error"] < ref.DECODE_TOLERANCE / 3, got       # the output alone would pass
    assert not got["passed"] and not d["untouched_rows_ok"], got
    rows = [k for k in d if k.endswith("_row")]
    assert len(rows) == 4 and all(d[k] > 10 * ref.KV_ROW_TOLERANCE for k in rows), d
    assert d["failed"] == [f for name in ref.cache_names(cfg)
                           for f in (f"{name.split('.')[0]}.{name.split('.')[1][0]}_row",
                                     f"{name} positions other than {cfg.kv_len - 1}")]


# ------------------------------------------------ examples/run_mega.py, pure parts


def _run_mega():
    spec = importlib.util.spec_from_file_location("run_mega",
                                                  os.path.join(ROOT, "examples", "run_mega.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_mega_infers_the_decode_config_from_shapes():
    run_mega = _run_mega()
    shapes = dict(ref.weight_shapes(TINY), out=(TINY.hidden,))
    cfg = run_mega.decode_config(shapes, "a.json")
    assert {k: getattr(cfg, k) for k in ("layers", "hidden", "intermediate", "heads",
                                         "kv_heads", "head_dim", "kv_len")} == \
        {k: getattr(TINY, k) for k in ("layers", "hidden", "intermediate", "heads",
                                       "kv_heads", "head_dim", "kv_len")}
    assert run_mega.workload(shapes) == "decode"
    shapes["l1.wo"] = (TINY.hidden, 16)
    with pytest.raises(ValueError, match=r"a\.json: tensor 'l1\.wo' is \(32, 16\)"):
        run_mega.decode_config(shapes, "a.json")


def test_run_mega_tells_workloads_apart():
    run_mega = _run_mega()
    mlp = {"x": (8,), "norm_w": (8,), "wgu": (12, 8), "wd": (8, 6), "out": (8,)}
    assert run_mega.workload(mlp) == "mlp"
    with pytest.raises(run_mega.NoNumericCheck, match=r"e\.json: tensors none are neither"):
        run_mega.workload({}, "e.json")
    with pytest.raises(run_mega.NoNumericCheck, match=r"neither a decode step's"):
        run_mega.workload({"a": (4,)})
    assert run_mega.launch_list_path("out/ops_decode.json") == "out/ops_decode.launches.json"
    assert set(run_mega.EXPECTED_TO_FAIL) == {"test_mega_misplaced_kv"}


# ------------------------------------------------ bench/decode.py, pure parts


def test_parse_args():
    args = bench.parse_args([])
    assert (args.artifacts, args.out, args.layers) == ("out", "docs/results", 16)
    assert bench.config(bench.parse_args(["--layers", "2"])).layers == 2
    assert bench.config(args).hidden == 2048
    with pytest.raises(SystemExit):
        bench.parse_args(["--layers", "0"])
    # The torch.compile peer runs unless skipped (its autotuning takes minutes).
    assert args.torch_compile and not bench.parse_args(["--no-torch-compile"]).torch_compile
    assert "max-autotune" in bench.COMPILED
    # do_bench's flush times the rows and every part runs unless chosen.
    assert args.flush == ["zero"] and args.parts == list(bench.PARTS)


def test_parse_args_flush_modes_and_parts():
    args = bench.parse_args(["--flush", "read,zero,none", "--parts", "mlp,dispatch"])
    assert args.flush == ["read", "zero", "none"] and args.parts == ["mlp", "dispatch"]
    for bad in (["--flush", "dirty"], ["--flush", "zero,zero"], ["--flush", ""],
                ["--parts", "mlp,prefill"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def _mega_meta(tensors):
    buffers = [{"name": n, "kind": "tensor", "dtype": "int32", "shape": [4]}
               for n in ("mega_args", "mega_tables", "mega_events", "mega_state",
                         "mega_timeline")]
    return {"kernels": [{"name": "step", "params": buffers,
                         "mega": {"workers": 132, "args": tensors}}]}


WGU = {"name": "wgu", "kind": "tensor", "dtype": "bfloat16", "shape": [16384, 2048],
       "role": "weight"}
OUT = {"name": "out", "kind": "tensor", "dtype": "bfloat16", "shape": [2048], "role": "output"}


def test_graph_params_are_the_mega_args_tensors():
    params = bench.graph_params(_mega_meta([WGU, OUT, dict(OUT, name="y", role=None)]), "a.json")
    assert params == [("wgu", "bfloat16", (16384, 2048), "weight"),
                      ("out", "bfloat16", (2048,), "output"), ("y", "bfloat16", (2048,), None)]
    with pytest.raises(bench.Skip, match="one kernel with 'mega'"):
        bench.graph_params({"kernels": [{"name": "k", "params": []}]}, "a.json")


PARAMS = [("wgu", "bfloat16", (16384, 2048), "weight"), ("h", "bfloat16", (2048,), "scratch"),
          ("y", "float32", (2048,), "output"), ("z", "bfloat16", (8,), None)]


def test_plan_tensors_takes_given_leaves_scratch_allocates_outputs():
    given = {"wgu": ("bfloat16", (16384, 2048)), "h": ("bfloat16", (2048,)),
             "unused": ("float32", (1,))}
    take, allocate = bench.plan_tensors(PARAMS, given, "a.json")
    assert take == ["wgu"]
    assert allocate == [("y", "float32", (2048,)), ("z", "bfloat16", (8,))]


def test_plan_tensors_refuses_other_shapes_and_missing_weights():
    with pytest.raises(bench.Skip, match=r"another shape: wgu is bfloat16\[16384, 2048\] there, "
                                         r"bfloat16\[4, 2\] here"):
        bench.plan_tensors(PARAMS, {"wgu": ("bfloat16", (4, 2))}, "a.json")
    with pytest.raises(bench.Skip, match="no tensor for weight 'wgu'"):
        bench.plan_tensors(PARAMS, {}, "a.json")
    take, allocate = bench.plan_tensors(PARAMS, {}, "a.json", strict=False)
    assert take == [] and [a[0] for a in allocate] == ["wgu", "y", "z"]


def test_output_name():
    assert bench.output_name(PARAMS, "a") == "y"
    assert bench.output_name([("out", "bfloat16", (4,), None)], "a") == "out"
    with pytest.raises(bench.Skip, match="cannot tell the output"):
        bench.output_name([("x", "bfloat16", (4,), "input")], "a")
    with pytest.raises(bench.Skip, match="cannot tell the output"):
        bench.output_name([PARAMS[2], ("y2", "float32", (2048,), "output")], "a")


def test_resolve_launches():
    spec = {"launches": [{"kernel": "gemv", "args": ["w", "h", "y", 3]}]}
    assert bench.resolve_launches(spec, {"gemv"}, {"w", "h", "y"}, "s") == [
        ("gemv", ["w", "h", "y", 3])]
    with pytest.raises(bench.Skip, match="no kernel 'gemv'"):
        bench.resolve_launches(spec, {"other"}, {"w", "h", "y"}, "s")
    with pytest.raises(bench.Skip, match="no tensor 'y'"):
        bench.resolve_launches(spec, {"gemv"}, {"w", "h"}, "s")
    with pytest.raises(bench.Skip, match="no launches"):
        bench.resolve_launches({}, {"gemv"}, set(), "s")


def test_missing_artifacts_skip_with_reason(tmp_path):
    with pytest.raises(bench.Skip, match="no artifact .*mega_decode.json"):
        bench.load_ours(str(tmp_path), {})
    with pytest.raises(bench.Skip, match="no launch list .*ops_mlp.launches.json"):
        bench.load_per_operator(str(tmp_path), {}, bench.MLP_OPS)
    assert bench.empty_artifacts(str(tmp_path / "absent")) == []


def test_empty_artifacts_sorted_by_task_count(tmp_path):
    for name in ("mega_empty_10.json", "mega_empty_2.json", "mega_empty_0.json",
                 "mega_empty_x.json", "mega_decode.json", "mega_empty_3.ptx"):
        (tmp_path / name).write_text("{}")
    assert bench.empty_artifacts(str(tmp_path)) == [
        (0, "mega_empty_0.json"), (2, "mega_empty_2.json"), (10, "mega_empty_10.json")]


def test_waited_empty_artifacts_are_a_series_of_their_own(tmp_path):
    for name in ("mega_empty_131.json", "mega_empty_waited_131.json",
                 "mega_empty_waited_1048.json", "mega_empty_waited_x.json"):
        (tmp_path / name).write_text("{}")
    assert bench.empty_artifacts(str(tmp_path)) == [(131, "mega_empty_131.json")]
    assert bench.empty_artifacts(str(tmp_path), bench.EMPTY_WAITED) == [
        (131, "mega_empty_waited_131.json"), (1048, "mega_empty_waited_1048.json")]


def test_waited_empty_graph_waits_every_entry_on_one_event(tmp_path):
    """Each of the N empty tasks waits for the one event the start task
    fires; the schedule is proven deadlock-free."""
    pytest.importorskip("tilemega.ir", reason="the compiler package is not built")
    from tilemega.mega.artifacts import compile_empty, waited_empty_graph
    from tilemega.runtime import mega_sim as ms

    with pytest.raises(ValueError, match="tasks must be >= 1"):
        waited_empty_graph(0)
    path = compile_empty(24, str(tmp_path), workers=8, waited=True)
    assert os.path.basename(path) == "mega_empty_waited_24.json"
    with open(path) as f:
        meta = json.load(f)["kernels"][0]["mega"]
    assert [(t["name"], t["count"]) for t in meta["tasks"]] == [("t0_start", 1),
                                                                 ("t1_waited", 24)]
    assert meta["events"] == [{"name": "ev0", "trigger": 1}]
    waited = [e for e, t in enumerate(meta["entries"]["task"]) if t == 1]
    assert len(waited) == 24 and all(meta["waits"][e] == [0] for e in waited)
    assert ms.check_deadlock_free(meta, runs=5).proven


def test_mlp_shape_from_artifact(tmp_path):
    assert bench.mlp_shape(str(tmp_path), (1, 2)) == (1, 2)
    (tmp_path / bench.MLP).write_text(json.dumps(_mega_meta([WGU, OUT])))
    assert bench.mlp_shape(str(tmp_path), (1, 2)) == (2048, 8192)


def test_per_task_ns():
    assert bench.per_task_ns([(0, 0.010), (1000, 0.020)]) == pytest.approx(10.0)
    assert bench.per_task_ns([(10, 0.1), (20, 0.3), (30, 0.5)]) == pytest.approx(20000.0)
    assert bench.per_task_ns([(100, 0.1)]) is None
    assert bench.per_task_ns([(100, 0.1), (100, 0.2)]) is None


def test_summarize():
    times = {bench.EAGER: 4.0, bench.GRAPH: 2.0, "mega": 0.5}
    rows = {r["impl"]: r for r in bench.summarize(times, 2e9, 4000.0)}
    assert rows["mega"]["vs_eager"] == 8.0 and rows["mega"]["vs_graph"] == 4.0
    assert rows["mega"]["gbs"] == pytest.approx(4000.0)
    assert rows["mega"]["fraction_of_copy"] == pytest.approx(1.0)
    assert rows[bench.GRAPH]["vs_eager"] == 2.0


# ------------------------------------------------ torch


def _device():
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


@needs_torch
def test_make_weights():
    import torch
    w = ref.make_weights(TINY, seed=0, device=_device())
    assert {n: tuple(t.shape) for n, t in w.items()} == ref.weight_shapes(TINY)
    for name, t in w.items():
        assert t.dtype == (torch.float32 if name.startswith("rope") else torch.bfloat16), name
    # The position the step writes holds random values, not zeros (a stale row).
    assert torch.all(w["l1.k_cache"][:, -1] != 0) and torch.all(w["l1.v_cache"][:, :-1] != 0)
    np.testing.assert_allclose(w["rope_sin"].cpu().numpy(), np.sin(ref.rope_angles(TINY)),
                               rtol=1e-6)
    again = ref.make_weights(TINY, seed=0, device=_device())
    assert all(torch.equal(w[n], again[n]) for n in w)
    assert not torch.equal(w["l0.wqkv"], ref.make_weights(TINY, seed=1, device=_device())["l0.wqkv"])


@needs_torch
def test_decode_step_module_matches_float64():
    import torch
    cfg = SimpleNamespace(**dict(vars(TINY), hidden=64, intermediate=128, head_dim=16, kv_len=33))
    w = ref.make_weights(cfg, seed=0, device=_device())
    expected = ref.reference_float64(cfg, w)
    out = ref.LlamaDecodeStep(cfg, w)(w["x"], w["rope_cos"], w["rope_sin"])
    assert out.dtype == torch.bfloat16
    assert ref.compare(out, expected)["rel_l2"] < 2e-2
    # Layer 0's k was written at the last position: rope(wk @ rmsnorm(x)).
    x = w["x"].double().cpu().numpy()
    h = x / np.sqrt(np.mean(x * x) + cfg.eps) * w["l0.attn_norm"].double().cpu().numpy()
    hq, hkv, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    k = (w["l0.wqkv"].double().cpu().numpy() @ h)[hq * d:(hq + hkv) * d].reshape(hkv, d)
    k = ref._rope64(k, np.cos(ref.rope_angles(cfg)), np.sin(ref.rope_angles(cfg)))
    assert ref.compare(w["l0.k_cache"][:, -1], k)["rel_l2"] < 1e-2


@needs_torch
def test_mlp_chain_module_matches_float64():
    w = ref.make_mlp_weights(64, 96, seed=0, device=_device())
    out = ref.MlpChain(w, 1e-5)(w["x"])
    assert ref.compare(out, ref.mlp_reference_float64(w, 1e-5))["rel_l2"] < 2e-2


@pytest.mark.gpu
@pytest.mark.skipif(_torch_reason(True) is not None, reason=str(_torch_reason(True)))
def test_llama_1b_step_stays_order_one_and_accurate_in_bf16():
    import torch
    w = ref.make_weights(LLAMA_1B, seed=0)
    out = ref.LlamaDecodeStep(LLAMA_1B, w)(w["x"], w["rope_cos"], w["rope_sin"])
    assert torch.isfinite(out).all()
    rms = out.float().pow(2).mean().sqrt().item()
    assert 0.3 < rms < 30, rms
    assert ref.compare(out, ref.reference_float64(LLAMA_1B, w))["rel_l2"] < 3e-2


def test_mlp_timeline_summarizes_each_task_from_the_first_start():
    """bench/mlp_timeline.py's table: per task in graph order, times in us
    from the launch's first stamp, spreads of starts and ends."""
    spec = importlib.util.spec_from_file_location(
        "bench_mlp_timeline", os.path.join(ROOT, "bench", "mlp_timeline.py"))
    mlp_timeline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mlp_timeline)
    meta = {"tasks": [{"name": "t0_wgu"}, {"name": "t1_wd"}],
            "entries": {"task": [0, 0, 1, 1]}}
    rows = [(1000, 5000, 0, 0), (2000, 7000, 1, 1), (8000, 9000, 0, 0), (8500, 11000, 1, 1)]
    table = mlp_timeline.summarize(meta, rows)
    assert table["span_us"] == 10.0
    wgu, wd = table["tasks"]
    assert (wgu["task"], wgu["instances"], wgu["first_start_us"], wgu["last_end_us"]) == \
        ("t0_wgu", 2, 0.0, 6.0)
    assert wgu["mean_us"] == 4.5 and wd["start_us"]["max"] == 7.5
    assert wd["end_us"]["p10"] == 8.0 and wd["last_end_us"] == 10.0
