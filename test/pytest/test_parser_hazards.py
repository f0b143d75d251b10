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
