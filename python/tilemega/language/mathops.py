"""Elementwise math on traced values: `T.exp`, `T.max`, `T.cast`, ...

Float functions emit `math` dialect ops (the pipeline lowers them for NVVM);
Python numbers given to them become float32 constants unless the other
operand fixes the type.
"""

from __future__ import annotations

from .trace import TileLangTypeError, user_error
from .types import float32
from .values import Expr, _coerce, as_expr, emit_pure


def _float_unary(name, api, x):
    from ..dialects import math

    e = as_expr(x, float32, api, "x")
    if e.dtype.kind != "float":
        user_error(api, f"needs a float value, got {e.dtype.name}; use T.cast(x, 'float32')",
                   TileLangTypeError)
    return emit_pure(api, (name,), [e], getattr(math, name), e.dtype)


def exp(x):
    """e ** x"""
    return _float_unary("exp", "T.exp", x)


def exp2(x):
    """2 ** x"""
    return _float_unary("exp2", "T.exp2", x)


def log(x):
    """natural logarithm"""
    return _float_unary("log", "T.log", x)


def log2(x):
    return _float_unary("log2", "T.log2", x)


def sqrt(x):
    return _float_unary("sqrt", "T.sqrt", x)


def rsqrt(x):
    """1 / sqrt(x)"""
    return _float_unary("rsqrt", "T.rsqrt", x)


def tanh(x):
    return _float_unary("tanh", "T.tanh", x)


def sin(x):
    return _float_unary("sin", "T.sin", x)


def cos(x):
    return _float_unary("cos", "T.cos", x)


def floor(x):
    return _float_unary("floor", "T.floor", x)


def ceil(x):
    return _float_unary("ceil", "T.ceil", x)


def abs(x):  # noqa: A001  (T.abs)
    """|x| for floats (math.absf) and integers (math.absi)."""
    from ..dialects import math

    api = "T.abs"
    e = as_expr(x, float32 if isinstance(x, float) else None, api, "x")
    if e.dtype.kind == "float":
        return emit_pure(api, ("absf",), [e], math.absf, e.dtype)
    if e.dtype.kind in ("int", "index"):
        if e.nonneg:
            return e
        return emit_pure(api, ("absi",), [e], math.absi, e.dtype, nonneg=True)
    user_error(api, f"needs a number, got {e.dtype.name}", TileLangTypeError)


def fma(a, b, c):
    """a * b + c rounded once (fma.rn): one instruction where a separate
    multiply and add would be two (each rounded, so never contracted)."""
    from ..dialects import math

    api = "T.fma"
    if not any(isinstance(x, Expr) for x in (a, b, c)):
        user_error(api, f"needs at least one traced value, got {a!r}, {b!r}, {c!r}",
                   TileLangTypeError)
    ref = next(x for x in (a, b, c) if isinstance(x, Expr))
    a, b, c = (_coerce(api, x, ref)[0] for x in (a, b, c))
    if a.dtype.kind != "float":
        user_error(api, f"needs float values, got {a.dtype.name}", TileLangTypeError)
    return emit_pure(api, ("fma",), [a, b, c], math.fma, a.dtype)


def fast_div(a, b):
    """a / b for floats with approximate-function fast math (`arith.divf`
    `fastmath<afn>`; CUDA's __fdividef): PTX `div.approx` (about 2 ulp)
    rather than IEEE division. The GEMV bodies' SiLU, g / (1 + exp(-g)),
    uses it."""
    from ..dialects import arith
    from ..ir import Attribute

    api = "T.fast_div"
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        user_error(api, f"needs at least one traced value, got {a!r} and {b!r}",
                   TileLangTypeError)
    a, b = _coerce(api, a, b)
    if a.dtype.kind != "float":
        user_error(api, f"needs float values, got {a.dtype.name}", TileLangTypeError)
    return emit_pure(api, ("divf_afn",), [a, b],
                     lambda x, y: arith.divf(x, y, fastmath=Attribute.parse(
                         "#arith.fastmath<afn>")), a.dtype)


def _minmax(kind, api, a, b):
    from ..dialects import arith

    if not isinstance(a, Expr) and not isinstance(b, Expr):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return max(a, b) if kind == "max" else min(a, b)
        user_error(api, f"needs numbers, got {a!r} and {b!r}", TileLangTypeError)
    a, b = _coerce(api, a, b)
    dt = a.dtype
    if dt.kind == "float":
        name = "maxnumf" if kind == "max" else "minnumf"
    elif dt.kind in ("int", "index"):
        name = "maxsi" if kind == "max" else "minsi"
    else:
        user_error(api, f"needs numbers, got {dt.name}", TileLangTypeError)
    return emit_pure(api, (name,), [a, b], getattr(arith, name), dt,
                     nonneg=a.nonneg or b.nonneg if kind == "max" else a.nonneg and b.nonneg)


def max(a, b):  # noqa: A001
    """The larger of a and b (floats: fmaxf semantics, a NaN operand is ignored)."""
    return _minmax("max", "T.max", a, b)


def min(a, b):  # noqa: A001
    """The smaller of a and b."""
    return _minmax("min", "T.min", a, b)


def infinity(dtype="float32"):
    """+inf of a float dtype (`-T.infinity(T.float32)` for -inf)."""
    from .types import as_dtype
    from .values import constant
    dt = as_dtype(dtype, "dtype", api="T.infinity")
    if dt.kind != "float":
        user_error("T.infinity", f"needs a float dtype, got {dt.name}", TileLangTypeError)
    return constant(float("inf"), dt, api="T.infinity")


def max_value(dtype):
    """The largest finite value of `dtype`."""
    from .types import as_dtype
    from .values import constant
    dt = as_dtype(dtype, "dtype", api="T.max_value")
    if dt.kind == "float":
        value = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
                 "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}[dt.name]
    else:
        value = dt.int_range()[1]
    return constant(value, dt, api="T.max_value")


def min_value(dtype):
    """The smallest (most negative) finite value of `dtype`."""
    from .types import as_dtype
    from .values import constant
    dt = as_dtype(dtype, "dtype", api="T.min_value")
    if dt.kind == "float":
        value = {"float16": -65504.0, "bfloat16": -3.3895313892515355e38,
                 "float32": -3.4028234663852886e38, "float64": -1.7976931348623157e308}[dt.name]
    else:
        value = dt.int_range()[0]
    return constant(value, dt, api="T.min_value")
