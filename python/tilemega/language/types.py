"""Element types, tensor annotations and symbolic dimensions of `tilemega.language`.

Pure Python: importing this module (and writing annotations such as
`T.Tensor((M, 1024), "float16")`) never loads MLIR. The MLIR types are made
only while a kernel is traced.
"""

from __future__ import annotations

import operator
from typing import Dict, Iterable, Optional, Tuple

from .trace import TileLangError, TileLangTypeError, current_or_none, user_error


class DType:
    """A scalar element type: `T.float32`, `T.float16`, `T.int32`, ...

    Used as a buffer dtype (`T.alloc_shared((64, 64), T.float16)`; strings such
    as "float16" work too), as the annotation of a scalar kernel argument
    (`alpha: T.float32`), and, inside a traced kernel, to make a constant:
    `T.float32(0.5)`.
    """

    __slots__ = ("name", "kind", "bits")

    def __init__(self, name: str, kind: str, bits: int):
        self.name = name          # artifact spelling, e.g. "float32"
        self.kind = kind          # "float", "int", "index" or "bool"
        self.bits = bits

    def __repr__(self):
        return f"T.{self.name}"

    __str__ = lambda self: self.name  # noqa: E731

    def __reduce__(self):
        return (as_dtype, (self.name,))

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """Integer-like: int8..int64 and index (not bool)."""
        return self.kind in ("int", "index")

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def int_range(self) -> Tuple[int, int]:
        bits = 64 if self.kind == "index" else self.bits
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def mlir_type(self):
        """The MLIR type (needs an active tilemega.ir.Context)."""
        from ..ir import (BF16Type, F16Type, F32Type, F64Type, Float8E4M3FNType,
                          Float8E5M2Type, IndexType, IntegerType)
        if self.name in _FLOAT8:
            return {"float8_e4m3fn": Float8E4M3FNType,
                    "float8_e5m2": Float8E5M2Type}[self.name].get()
        if self.kind == "float":
            return {16: BF16Type if self.name == "bfloat16" else F16Type,
                    32: F32Type, 64: F64Type}[self.bits].get()
        if self.kind == "index":
            return IndexType.get()
        return IntegerType.get_signless(self.bits)

    def __call__(self, value):
        """`T.float32(1.0)`: a constant of this type inside a traced kernel."""
        from .values import constant
        return constant(value, self, api=f"T.{self.name}")


float16 = DType("float16", "float", 16)
bfloat16 = DType("bfloat16", "float", 16)
float32 = DType("float32", "float", 32)
float64 = DType("float64", "float", 64)
# 8-bit floats (torch.float8_e4m3fn / float8_e5m2): storage and wgmma gemm
# inputs (T.gemm into a float32 accumulator on sm_90a), not arithmetic.
float8_e4m3fn = DType("float8_e4m3fn", "float", 8)
float8_e5m2 = DType("float8_e5m2", "float", 8)
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
int8 = DType("int8", "int", 8)
int16 = DType("int16", "int", 16)
int32 = DType("int32", "int", 32)
int64 = DType("int64", "int", 64)
# Internal: loop and block indices, comparison results.
index = DType("index", "index", 64)
boolean = DType("bool", "bool", 1)

#: The element types a kernel buffer or scalar argument may have.
DTYPES: Dict[str, DType] = {d.name: d for d in
                            (float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2,
                             int8, int16, int32, int64)}
_ALIASES = {"half": "float16", "fp16": "float16", "f16": "float16",
            "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
            "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2", "float": "float32", "fp32": "float32", "f32": "float32",
            "double": "float64", "fp64": "float64", "f64": "float64",
            "i8": "int8", "i16": "int16", "int": "int32", "i32": "int32", "i64": "int64"}


def as_dtype(value, what: str = "dtype", *, api: Optional[str] = None,
             allow_index: bool = False) -> DType:
    """A DType from a DType, a name ("float16", "bf16"), Python `float`/`int`,
    or a torch/numpy dtype (by name). Raises TileLangTypeError naming `what`."""
    if isinstance(value, DType):
        if value.kind == "bool" or (value.kind == "index" and not allow_index):
            user_error(api, f"{what}: {value.name} is not a buffer/scalar element type; "
                            f"use one of {sorted(DTYPES)}", TileLangTypeError)
        return value
    if value is float:
        return float32
    if value is int:
        return int32
    name = value if isinstance(value, str) else getattr(value, "name", None) or str(value)
    if isinstance(name, str):
        name = name.rsplit(".", 1)[-1]          # "torch.float16" -> "float16"
        name = _ALIASES.get(name, name)
        if name in DTYPES:
            return DTYPES[name]
        if name == "index" and allow_index:
            return index
    user_error(api, f"{what}: unknown or unsupported element type {value!r}; "
                    f"use one of {sorted(DTYPES)}", TileLangTypeError)


# ---------------------------------------------------------------------------
# Symbolic dimensions
# ---------------------------------------------------------------------------

_SYM_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul,
            "//": operator.floordiv, "%": operator.mod,
            "ceildiv": lambda a, b: -(-a // b), "neg": operator.neg,
            "max": max, "min": min}


class SymExpr:
    """An integer expression over symbolic dimensions (`T.symbolic("M")`).

    Kernels are specialised per shape: while a kernel is traced every symbol
    has a concrete value, so a SymExpr converts to a Python int wherever one
    is needed (`int(M)`, `range(M // 64)`, grid sizes, buffer shapes, and in
    arithmetic with traced values). Outside a trace it stays symbolic, which is
    what annotations such as `T.Tensor((M, N * 2), "float32")` need.
    """

    __slots__ = ("op", "args")

    def __init__(self, op: str, args: tuple):
        self.op = op
        self.args = args

    # -- evaluation --------------------------------------------------------
    def symbols(self) -> Tuple[str, ...]:
        out = []
        for a in self.args:
            if isinstance(a, SymExpr):
                for s in a.symbols():
                    if s not in out:
                        out.append(s)
        return tuple(out)

    def evaluate(self, bindings: Dict[str, int]) -> int:
        vals = [a.evaluate(bindings) if isinstance(a, SymExpr) else a for a in self.args]
        return int(_SYM_OPS[self.op](*vals))

    def _value(self) -> int:
        state = current_or_none()
        if state is None:
            raise TileLangError(
                f"symbolic dimension {self!r} has no value here: kernels are specialised per "
                "shape, so symbols have values only while a kernel is traced "
                "(fn.compile(M=...), or a call with tensors)")
        missing = [s for s in self.symbols() if s not in state.bindings]
        if missing:
            user_error(None, f"symbolic dimension(s) {missing} are not bound in this "
                             f"specialisation (bound: {state.bindings})")
        return self.evaluate(state.bindings)

    def __index__(self):
        return self._value()

    __int__ = __index__

    def __bool__(self):
        return bool(self._value())

    # -- arithmetic (stays symbolic) ----------------------------------------
    def _bin(self, op, other, reverse=False):
        if isinstance(other, bool) or not isinstance(other, (int, SymExpr)):
            return NotImplemented
        args = (other, self) if reverse else (self, other)
        return SymExpr(op, args)

    __add__ = lambda s, o: s._bin("+", o)               # noqa: E731
    __radd__ = lambda s, o: s._bin("+", o, True)        # noqa: E731
    __sub__ = lambda s, o: s._bin("-", o)               # noqa: E731
    __rsub__ = lambda s, o: s._bin("-", o, True)        # noqa: E731
    __mul__ = lambda s, o: s._bin("*", o)               # noqa: E731
    __rmul__ = lambda s, o: s._bin("*", o, True)        # noqa: E731
    __floordiv__ = lambda s, o: s._bin("//", o)         # noqa: E731
    __rfloordiv__ = lambda s, o: s._bin("//", o, True)  # noqa: E731
    __mod__ = lambda s, o: s._bin("%", o)               # noqa: E731
    __rmod__ = lambda s, o: s._bin("%", o, True)        # noqa: E731

    def __neg__(self):
        return SymExpr("neg", (self,))

    # Comparisons need values: they work while tracing (`if M % 64 == 0:`).
    def _cmp(self, other, fn):
        if isinstance(other, SymExpr):
            other = other._value()
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return fn(self._value(), other)

    __lt__ = lambda s, o: s._cmp(o, operator.lt)   # noqa: E731
    __le__ = lambda s, o: s._cmp(o, operator.le)   # noqa: E731
    __gt__ = lambda s, o: s._cmp(o, operator.gt)   # noqa: E731
    __ge__ = lambda s, o: s._cmp(o, operator.ge)   # noqa: E731

    def __eq__(self, other):
        if isinstance(other, SymExpr) and current_or_none() is None:
            return self is other or (self.op == other.op and self.args == other.args)
        return self._cmp(other, operator.eq)

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = object.__hash__

    def __repr__(self):
        if self.op == "neg":
            return f"-{self.args[0]!r}"
        if self.op in ("ceildiv", "max", "min"):
            return f"{self.op}({self.args[0]!r}, {self.args[1]!r})"
        a, b = self.args
        wrap = lambda x: f"({x!r})" if isinstance(x, SymExpr) and not isinstance(x, Symbol) else repr(x)  # noqa: E731
        return f"{wrap(a)} {self.op} {wrap(b)}"


class Symbol(SymExpr):
    """A named symbolic dimension; see `symbolic`."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        super().__init__("sym", ())
        self.name = name

    def symbols(self):
        return (self.name,)

    def evaluate(self, bindings):
        if self.name not in bindings:
            raise TileLangError(f"symbolic dimension {self.name!r} is not bound")
        return int(bindings[self.name])

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        if isinstance(other, Symbol) and current_or_none() is None:
            return self.name == other.name
        return SymExpr.__eq__(self, other)

    __hash__ = object.__hash__


def symbolic(name: str) -> Symbol:
    """A dimension whose size is known only at call time: `M = T.symbolic("M")`.

    Use it in tensor annotations (`T.Tensor((M, 1024), "float32")`) and in the
    kernel body (`T.Kernel(T.ceildiv(M, 64), ...)`). The kernel ABI is
    static-shape, so a `@tilemega.jit` function is *specialised*: one artifact
    is compiled for every distinct set of symbol values seen at call time (or
    given to `fn.compile(M=...)`), and cached.
    """
    if not isinstance(name, str) or not name.isidentifier():
        user_error("T.symbolic", f"name must be an identifier string, got {name!r}",
                   TileLangTypeError)
    return Symbol(name)


dynamic = symbolic   # TileLang's spelling


def ceildiv(a, b):
    """ceil(a / b) for ints, symbolic dimensions and traced index values."""
    if isinstance(a, SymExpr) or isinstance(b, SymExpr):
        if current_or_none() is None:
            return SymExpr("ceildiv", (a, b))
        a, b = int(a), int(b)
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        if b == 0:
            user_error("T.ceildiv", "division by zero")
        return -(-a // b)
    from .values import ceildiv as traced_ceildiv
    return traced_ceildiv(a, b)


def static_int(value, what: str, api: Optional[str], *, minimum: Optional[int] = None) -> int:
    """An int from an int or a symbolic expression; a clear error otherwise."""
    if isinstance(value, SymExpr):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        from .values import Expr
        hint = (" (a traced value is known only on the GPU; this must be a compile-time int)"
                if isinstance(value, Expr) else "")
        user_error(api, f"{what} must be an int, got {type(value).__name__} {value!r}{hint}",
                   TileLangTypeError)
    if minimum is not None and value < minimum:
        user_error(api, f"{what} must be >= {minimum}, got {value}")
    return value


# ---------------------------------------------------------------------------
# Tensor annotations
# ---------------------------------------------------------------------------

class Tensor:
    """Annotation of a global tensor argument: `A: T.Tensor((M, K), "float16")`.

    Dimensions are ints or symbolic expressions (`T.symbolic`). Tensors are
    row-major and contiguous (the kernel ABI passes one pointer).
    """

    def __init__(self, shape, dtype="float32"):
        if isinstance(shape, (int, SymExpr)) and not isinstance(shape, bool):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not shape:
            user_error("T.Tensor", f"shape must be a non-empty tuple of ints or symbolic "
                                   f"dimensions, got {shape!r}", TileLangTypeError)
        dims = []
        for i, d in enumerate(shape):
            if isinstance(d, SymExpr):
                dims.append(d)
            elif isinstance(d, int) and not isinstance(d, bool):
                if d < 1:
                    user_error("T.Tensor", f"shape[{i}] must be >= 1, got {d}")
                dims.append(d)
            else:
                user_error("T.Tensor", f"shape[{i}] must be an int or a T.symbolic dimension, "
                                       f"got {type(d).__name__} {d!r}", TileLangTypeError)
        self.shape = tuple(dims)
        self.dtype = as_dtype(dtype, "dtype", api="T.Tensor")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def symbols(self) -> Tuple[str, ...]:
        out = []
        for d in self.shape:
            if isinstance(d, SymExpr):
                out += [s for s in d.symbols() if s not in out]
        return tuple(out)

    def resolve(self, bindings: Dict[str, int]) -> Tuple[int, ...]:
        return tuple(d.evaluate(bindings) if isinstance(d, SymExpr) else d for d in self.shape)

    def __repr__(self):
        return f"T.Tensor({self.shape!r}, {self.dtype.name!r})"


Buffer = Tensor   # TileLang's spelling of the annotation


def shape_symbols(shapes: Iterable) -> Tuple[str, ...]:
    out = []
    for t in shapes:
        out += [s for s in t.symbols() if s not in out]
    return tuple(out)
