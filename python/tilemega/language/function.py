"""Kernel signatures and the tracer that turns a Python kernel into tile IR.

    def scale_add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
                  alpha: T.float32, *, block_M: int = 64):
        with T.Kernel(...) as (bx, by):
            ...

Positional parameters are the kernel's arguments: tensors (`T.Tensor`) and
scalars (a dtype such as `T.float32`). Keyword-only parameters are
compile-time configuration (block sizes and such, what `tilemega.autotune`
varies); they are ordinary Python values while the body runs.

`trace()` builds `func.func @name(memref..., scalars...)` with `tile.name`
argument attributes and runs the body once inside it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..compiler import attr_names
from .trace import TileLangError, TileLangTypeError, TraceState, _abspath, tracing
from .types import SymExpr, Tensor, as_dtype


@dataclass
class Param:
    name: str
    kind: str                     # "tensor" or "scalar"
    annotation: Any               # Tensor or DType


@dataclass
class ConfigParam:
    name: str
    default: Any                  # inspect.Parameter.empty when required


class KernelSignature:
    """The parsed signature of a kernel function (no MLIR needed)."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        try:
            sig = inspect.signature(fn, eval_str=True)
        except NameError as e:
            raise TileLangError(f"{self._where()}: cannot evaluate the annotations of "
                                f"{self.name}: {e}") from None
        self.params: List[Param] = []
        self.config: Dict[str, ConfigParam] = {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                self._fail(f"parameter {p.name}: *args / **kwargs are not supported in "
                           "kernel signatures")
            if p.kind == p.KEYWORD_ONLY:
                self.config[p.name] = ConfigParam(p.name, p.default)
                continue
            ann = p.annotation
            if isinstance(ann, Tensor):
                self.params.append(Param(p.name, "tensor", ann))
            elif ann is p.empty:
                self._fail(f"parameter {p.name} needs an annotation: T.Tensor((M, N), "
                           "'float32') for a tensor, a dtype such as T.float32 for a scalar "
                           "(compile-time options go after `*` as keyword-only parameters)")
            else:
                try:
                    dt = as_dtype(ann, f"parameter {p.name}")
                except TileLangError:
                    self._fail(f"parameter {p.name}: the annotation {ann!r} is neither a "
                               "T.Tensor(...) nor a scalar dtype such as T.float32",
                               TileLangTypeError)
                self.params.append(Param(p.name, "scalar", dt))
        if not self.params:
            self._fail("a kernel needs at least one argument")
        symbols: List[str] = []
        for p in self.params:
            if p.kind == "tensor":
                symbols += [s for s in p.annotation.symbols() if s not in symbols]
        self.symbols: Tuple[str, ...] = tuple(symbols)
        clash = set(self.symbols) & set(self.config)
        if clash:
            self._fail(f"{sorted(clash)} are both symbolic dimensions and keyword-only "
                       "parameters")

    def _where(self) -> str:
        code = self.fn.__code__
        return f"{_abspath(code.co_filename)}:{code.co_firstlineno}"

    def _fail(self, message, cls=TileLangError):
        code = self.fn.__code__
        raise cls(f"{self._where()}: kernel {self.name}: {message}", _abspath(code.co_filename),
                  code.co_firstlineno)

    def tensor_params(self) -> List[Param]:
        return [p for p in self.params if p.kind == "tensor"]

    def resolve_config(self, config: Dict[str, Any]) -> Dict[str, Any]:
        """`config` completed with defaults; errors for unknown / missing names."""
        unknown = [k for k in config if k not in self.config]
        if unknown:
            raise TileLangTypeError(
                f"{self._where()}: kernel {self.name} has no keyword-only parameter(s) "
                f"{unknown}; its configuration parameters are {list(self.config) or 'none'}")
        out = {}
        for name, cp in self.config.items():
            if name in config:
                out[name] = config[name]
            elif cp.default is not inspect.Parameter.empty:
                out[name] = cp.default
            else:
                raise TileLangTypeError(
                    f"{self._where()}: kernel {self.name} needs a value for its keyword-only "
                    f"parameter {name!r} (pass it as fn.compile(config={{{name!r}: ...}}), as "
                    f"a keyword argument of the call, or through tilemega.autotune)")
        return out

    def check_bindings(self, bindings: Dict[str, int]) -> Dict[str, int]:
        unknown = [k for k in bindings if k not in self.symbols]
        if unknown:
            raise TileLangTypeError(
                f"{self._where()}: kernel {self.name} has no symbolic dimension(s) {unknown}; "
                f"its symbols are {list(self.symbols) or 'none'}")
        missing = [s for s in self.symbols if s not in bindings]
        if missing:
            raise TileLangTypeError(
                f"{self._where()}: kernel {self.name} is specialised per shape: give the "
                f"symbolic dimension(s) {missing} a value (e.g. fn.compile({missing[0]}=1024)) "
                "or call it with tensors")
        out = {}
        for k, v in bindings.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TileLangTypeError(f"{self._where()}: symbolic dimension {k} must be an "
                                        f"int >= 1, got {v!r}")
            out[k] = v
        for p in self.tensor_params():
            for d, dim in enumerate(p.annotation.shape):
                if isinstance(dim, SymExpr) and dim.evaluate(out) < 1:
                    raise TileLangError(
                        f"{self._where()}: dimension {d} of {p.name} ({dim!r}) is "
                        f"{dim.evaluate(out)} with {out}")
        return out


_PURE_DIALECTS = ("arith.", "math.")


def _erase_dead_pure_ops(root):
    """Drops arith/math ops whose results are unused (e.g. the stop of a slice
    `A[r:r + 64]`, which only served to compute the extent)."""
    def walk(op, out):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    out.append(child)
                    walk(child.operation, out)
        return out

    changed = True
    while changed:
        changed = False
        for op in reversed(walk(root, [])):
            op = op.operation
            if (op.name.startswith(_PURE_DIALECTS) and len(op.results) > 0
                    and all(not any(True for _ in r.uses) for r in op.results)):
                op.erase()
                changed = True


@dataclass
class TracedKernel:
    """The result of one trace: MLIR text without and with locations."""
    name: str
    text: str                   # the cache key: no debug locations
    text_with_locations: str    # what is compiled, so diagnostics name user lines
    bindings: Dict[str, int]
    config: Dict[str, Any]


def trace(sig: KernelSignature, bindings: Dict[str, int], config: Dict[str, Any],
          name: Optional[str] = None, verify: bool = True) -> TracedKernel:
    """Runs the kernel body once with proxies and returns the tile IR."""
    from ..compiler import CompileError
    from ..dialects import func
    from ..ir import (Context, DictAttr, InsertionPoint, Location, MemRefType,
                      MLIRError, Module, StringAttr)
    from .values import Buffer, Expr

    fn = sig.fn
    name = name or sig.name
    code = fn.__code__
    with Context(), Location.file(_abspath(code.co_filename), code.co_firstlineno, 1) as def_loc:
        module = Module.create()
        with InsertionPoint(module.body):
            types = []
            for p in sig.params:
                if p.kind == "tensor":
                    shape = p.annotation.resolve(bindings)
                    types.append(MemRefType.get(list(shape), p.annotation.dtype.mlir_type()))
                else:
                    types.append(p.annotation.mlir_type())
            fop = func.FuncOp(name, (types, []))
            arg_name = attr_names()["arg_name"]   # the name the passes read (tile.name)
            fop.arg_attrs = [DictAttr.get({arg_name: StringAttr.get(p.name)})
                             for p in sig.params]
            entry = fop.add_entry_block()
        state = TraceState(None, module, fop, entry, bindings, config, name)
        args = []
        for p, arg in zip(sig.params, entry.arguments):
            if p.kind == "tensor":
                args.append(Buffer(arg, p.name, p.annotation.resolve(bindings),
                                   p.annotation.dtype, "global"))
            else:
                args.append(Expr(arg, p.annotation, state.func_scope, True))
        with tracing(state):
            result = fn(*args, **config)
        if result is not None:
            raise TileLangError(
                f"{sig._where()}: kernel {name} returned {type(result).__name__}; kernels "
                "return nothing: write results into tensor arguments (see jit's out_idx)")
        if state.kernel is None:
            raise TileLangError(f"{sig._where()}: kernel {name}: the body never opened "
                                "`with T.Kernel(...)`")
        with InsertionPoint(entry), def_loc:
            func.ReturnOp([])
        _erase_dead_pure_ops(module.operation)
        if verify:
            try:
                module.operation.verify()
            except MLIRError as e:
                raise CompileError(f"the traced kernel {name} does not verify:\n{e}") from None
        text = module.operation.get_asm(enable_debug_info=False)
        with_locs = module.operation.get_asm(enable_debug_info=True)
    return TracedKernel(name, text, with_locs, dict(bindings), dict(config))
