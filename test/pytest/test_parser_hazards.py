"""Inputs MLIR 22.1.8's parser aborts on (tilemega/Support/ParserHazards.h),
reported by tilemega.compile as a CompileError at their line and column,
and the neighbouring inputs the parser reports itself (no false hazard)."""

import pytest

pytest.importorskip("tilemega.ir", reason="the compiler package is not built")

import tilemega  # noqa: E402
from tilemega.compiler import reject_parser_hazards  # noqa: E402


def _extract(position):
    return ("llvm.func @f(%s: !llvm.struct<(f32, f32)>) -> f32 {\n"
            f"  %v = llvm.extractvalue %s[{position}] : !llvm.struct<(f32, f32)>\n"
            "  llvm.return %v : f32\n}\n")


@pytest.mark.parametrize("position", ["4294967296", "-4294967296", "0, 18446744073709551616",
                                      "99999999999999999999999"])
def test_huge_aggregate_positions_are_hazards(position):
    with pytest.raises(tilemega.CompileError,
                       match=r"-:2:\d+: error: llvm.extractvalue position -?\d+ is out of "
                             r"range \(MLIR 22.1.8's parser would abort on it\)"):
        reject_parser_hazards(_extract(position))


@pytest.mark.parametrize("position", ["0", "1", "4294967295", "-1", "2147483648"])
def test_positions_below_2_to_the_32_are_left_to_the_parser(position):
    reject_parser_hazards(_extract(position))
    # In a comment the construct is no hazard either.
    reject_parser_hazards("// llvm.extractvalue %s[4294967296]\n")


def test_compile_reports_the_hazard_not_a_crash():
    with pytest.raises(tilemega.CompileError, match="position 4294967296 is out of range"):
        tilemega.compile(_extract("4294967296"), chip="sm_90a")


def test_a_use_defined_only_in_a_nested_region_is_a_hazard():
    text = ("func.func @f(%c: i1, %t: index) {\n"
            "  %first = arith.addi %t, %a : index\n"
            "  scf.if %c {\n"
            "    %a = arith.constant 4 : index\n"
            "  }\n  return\n}\n")
    with pytest.raises(tilemega.CompileError,
                       match=r"-:2:27: error: %a is used here before its definition, which is "
                             r"inside a region nested below this use"):
        reject_parser_hazards(text)


def test_forward_references_between_blocks_and_region_arguments_are_no_hazard():
    """A later definition at the same level (a branch to a later block) or
    values a region defines for itself (iter_args, block and function
    arguments, result groups) are what valid IR does."""
    text = """func.func @f(%c: i1, %n: index) -> i32 {
  cf.br ^bb2
^bb1:
  %y = arith.addi %x, %x : i32
  cf.br ^bb3
^bb2:
  %x = arith.constant 1 : i32
  cf.br ^bb1
^bb3:
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.while (%a = %x, %b = %x) : (i32, i32) -> (i32, i32) {
    scf.condition(%c) %a, %b : i32, i32
  } do {
  ^bb0(%p: i32, %q: i32):
    %s = arith.addi %p, %q : i32
    scf.yield %s, %q : i32, i32
  }
  %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %r#0) -> (i32) {
    %t = arith.addi %acc, %r#1 : i32
    scf.yield %t : i32
  }
  return %sum : i32
}
// %zz = %a in a comment, and "%a" in a string: no names
func.func @g(%a: i32) -> i32 {
  return %a : i32
}
"""
    reject_parser_hazards(text)


def test_names_a_custom_syntax_introduces_and_sibling_regions_are_no_hazard():
    """`tile.parallel (%i, %j) in [...]` introduces its region's names
    without `=` (they read as uses), and the printer reuses %argN in
    sibling regions: a later block argument of that name, deeper down, is
    not a definition of them (found when the pre-parse check refused the
    Llama-3.2-1B generation graph's printed IR)."""
    text = """func.func @f(%c: i1, %m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  scf.if %c {
    %x = scf.execute_region -> index {
      scf.yield %c0 : index
    }
  }
  %y = arith.addi %c0, %c0 : index
  scf.if %c {
    scf.if %c {
      %arg9 = arith.constant 1 : index
    }
  }
  return
}
"""
    reject_parser_hazards(text)
    kernel = """func.func @k(%a: memref<1x256xf32>) {
  tile.kernel blocks(%b) in [1] threads 128 {
    tile.parallel (%arg8, %arg9) in [1, 256] {
      %v = memref.load %a[%arg8, %arg9] : memref<1x256xf32>
    }
    scf.if %true {
      scf.if %true {
        %arg9 = arith.constant 0 : index
      }
    }
  }
  return
}
"""
    reject_parser_hazards(kernel)
