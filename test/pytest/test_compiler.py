"""tilemega.compile and the Python builders (no GPU needed)."""

import json
import os
import sys

import pytest

tilemega = pytest.importorskip(
    "tilemega.ir", reason="the compiler package is not built "
    "(run scripts/tilemega.sh build and put build/python_packages on PYTHONPATH)")

from tilemega import CompileError, compile as tm_compile  # noqa: E402
from ptxas_policy import ptxas_checks_enabled  # noqa: E402
from tilemega.dialects import tile  # noqa: E402
from tilemega.ir import (Context, F32Type, IndexType, InsertionPoint,  # noqa: E402
                         Location, MemRefType, Module)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import scale_add  # noqa: E402

BAD_REDUCE = """
func.func @r(%A: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 32 {
    %f = tile.alloc_fragment : memref<128xf32, #tile.fragment>
    %g = tile.alloc_fragment : memref<1xf32, #tile.fragment>
    tile.reduce sum %f dim 0 into %g : memref<128xf32, #tile.fragment> into memref<1xf32, #tile.fragment>
  }
  return
}
"""


def test_builder_module_round_trips():
    with Context(), Location.unknown():
        module = scale_add.build()
        assert module.operation.verify()
        text = str(module)
        assert "tile.kernel blocks(" in text and "tile.parallel" in text
        assert str(Module.parse(text)) == text


def test_compile_returns_ptx_cubin_and_metadata(tmp_path):
    with Context(), Location.unknown():
        result = tm_compile(scale_add.build(), chip="sm_90a")
    assert ".entry scale_add" in result.ptx and ".target sm_90a" in result.ptx
    (kernel,) = result.kernels
    assert kernel["grid"] == [4, 8, 1] and kernel["block"] == [128, 1, 1]
    assert kernel["dynamic_shared_bytes"] == 64 * 128 * 4
    assert [p["name"] for p in kernel["params"]] == ["A", "B", "alpha"]
    assert kernel["params"][2] == {"name": "alpha", "kind": "scalar", "dtype": "float32"}
    assert (result.cubin is not None) == ptxas_checks_enabled()
    path = result.save(str(tmp_path))
    meta = json.load(open(path))
    assert meta["format"] == "tilemega.artifact" and meta["version"] == 1
    assert os.path.exists(tmp_path / meta["ptx"])
    if result.cubin is not None:
        # The assembler's version (what made the cubin), not its path.
        import re
        assert re.fullmatch(r"\d+\.\d+, V[\d.]+", meta["toolchain"]["ptxas"])
    # The runtime loads what the compiler saved (no GPU touched).
    from tilemega.runtime import load_artifact
    art = load_artifact(path)
    assert list(art.kernels) == ["scale_add"]


def test_compile_accepts_text_and_leaves_module_untouched():
    with Context(), Location.unknown():
        module = scale_add.build()
        before = str(module)
        tm_compile(module, assemble=False)
        assert str(module) == before
    result = tm_compile(before, assemble=False)
    assert result.cubin is None and result.name == "scale_add"


def test_pipeline_failure_gives_diagnostic_and_repro():
    with pytest.raises(CompileError) as info:
        tm_compile(BAD_REDUCE, assemble=False)
    message = str(info.value)
    assert "tile.reduce" in message and "not supported yet" in message
    assert "reproduce with:" in message and "tilemega-opt" in message


def test_verifier_error_is_a_compile_error():
    bad = BAD_REDUCE.replace("threads 32", "threads 100")
    with pytest.raises(CompileError, match="multiple of 32"):
        tm_compile(bad)


def test_module_without_kernel():
    with pytest.raises(CompileError, match="no tile.kernel"):
        tm_compile("func.func @f() { return }")


@pytest.mark.parametrize("kwargs, match", [
    ({"chip": "hopper"}, "chip"),
    ({"chip": "sm_80"}, r"chip: no target description of 'sm_80' \(known: sm_90, sm_90a\)"),
    ({"opt_level": 7}, "opt_level"),
    ({"mega_max_ctas": 0}, "mega_max_ctas"),
])
def test_bad_options_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tm_compile(BAD_REDUCE, **kwargs)


def test_target_info_is_the_one_the_verifiers_use():
    # Python reads the C++ target description; the verifier's limit is the
    # same number.
    from tilemega.compiler import default_target_info, target_info
    hopper = target_info("sm_90a")
    assert hopper == dict(target_info("sm_90"), chip="sm_90a")
    assert default_target_info() == hopper
    assert (hopper["sm_count"], hopper["max_shared_bytes_per_block"],
            hopper["max_registers_per_thread"], hopper["max_threads_per_block"],
            hopper["registers_per_sm"]) == (132, 232448, 255, 1024, 65536)
    too_big = BAD_REDUCE.replace("threads 32", f"threads {hopper['max_threads_per_block'] + 32}")
    with pytest.raises(CompileError, match=f"at most {hopper['max_threads_per_block']}, got"):
        tm_compile(too_big)


def test_attribute_names_come_from_the_dialects():
    # The names Python exchanges with the passes are read from the dialects
    # (TileDialect / MegaDialect getters), not spelled out in Python; IR that
    # other tools already hold uses these spellings, so they must not drift.
    from tilemega.compiler import attr_names
    assert attr_names() == {"kernels_metadata": "tilemega.kernels", "arg_name": "tile.name",
                            "graph_arg_names": "mega.arg_names",
                            "graph_arg_roles": "mega.arg_roles",
                            "aligned_barriers": "tilemega.aligned_barriers"}


def test_compile_defaults_to_the_default_chip():
    import inspect
    from tilemega._mlir_libs import _site_initialize_0 as extension
    assert inspect.signature(tm_compile).parameters["chip"].default == extension.DEFAULT_CHIP


def test_bad_module_type():
    with pytest.raises(TypeError, match="module"):
        tm_compile(42)


def test_builder_helpers_check_arguments():
    with Context(), Location.unknown():
        module = Module.create()
        with InsertionPoint(module.body):
            with pytest.raises(ValueError, match="threads"):
                tile.kernel(grid=[1], threads=100)
            with pytest.raises(ValueError, match="grid"):
                tile.kernel(grid=[1, 1, 1, 1], threads=32)
            with pytest.raises(ValueError, match="extents"):
                tile.parallel([0, 4])
            with pytest.raises(TypeError, match="extents"):
                tile.parallel(["a"])


def test_copy_helper_names_bad_offsets():
    f32 = None
    with Context(), Location.unknown():
        f32 = F32Type.get()
        module = Module.create()
        with InsertionPoint(module.body):
            from tilemega.dialects import func
            t = MemRefType.get([64], f32)
            fn = func.FuncOp("f", ([t, t], []))
            with InsertionPoint(fn.add_entry_block()):
                a, b = fn.arguments
                with pytest.raises(ValueError, match="src_offsets"):
                    tile.copy(a, b, src_offsets=[0, 0])
                with pytest.raises(TypeError, match=r"dst_offsets\[0\]"):
                    tile.copy(a, b, dst_offsets=["x"])


SIMT_F16_GEMM = """
func.func @g(%A: memref<64x40xf16>, %C: memref<64x64xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    %a = tile.alloc_shared : memref<64x40xf16, #gpu.address_space<workgroup>>
    %bb = tile.alloc_shared : memref<40x64xf16, #gpu.address_space<workgroup>>
    %c = tile.alloc_fragment : memref<64x64xf32, #tile.fragment>
    tile.copy %A[0, 0] to %a[0, 0] sizes [64, 40] : memref<64x40xf16> to memref<64x40xf16, #gpu.address_space<workgroup>>
    tile.gemm %a, %bb, %c {clear_accum} : memref<64x40xf16, #gpu.address_space<workgroup>>, memref<40x64xf16, #gpu.address_space<workgroup>>, memref<64x64xf32, #tile.fragment>
    tile.copy %c[0, 0] to %C[0, 0] sizes [64, 64] : memref<64x64xf32, #tile.fragment> to memref<64x64xf32>
  }
  return
}
"""


def test_slow_path_is_a_python_warning():
    from tilemega import CompileWarning
    with pytest.warns(CompileWarning, match=r"not tensor cores: K = 40 is not a multiple"):
        result = tm_compile(SIMT_F16_GEMM, assemble=False)
    assert ".entry g" in result.ptx


def test_a_construct_the_parser_aborts_on_is_a_compile_error():
    """MLIR 22.1.8's parser asserts on a dense array of `index` (found by
    scripts/fuzz/fuzz_opt.py); compile reports it with its position instead
    of taking the process down (tilemega-opt does the same: lit
    test/Dialect/Mega/parser-hazards.mlir)."""
    text = ('mega.graph @g(%x: memref<64xf32>) workers 1 {\n'
            '  mega.queue @w0 aot worker 0 {tasks = [@t], instances = array<index: 0>}\n'
            '  mega.task @t body @k(%x : memref<64xf32>) count 1\n}\n')
    with pytest.raises(CompileError, match=r"-:2:58: error: a dense array attribute "
                                                     r"needs an integer or float element type"):
        tm_compile(text)
