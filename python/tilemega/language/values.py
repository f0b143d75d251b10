"""Proxies of traced values: scalars (`Expr`), buffers and buffer regions.

`Expr` stands for an SSA value of the kernel being traced. Python operators
on it emit `arith` ops of the right kind: index arithmetic for block, loop
and parallel indices, integer or float arithmetic for values. Python ints and
floats mixed in become constants of the other operand's type; two traced
values of different types must be converted explicitly with `T.cast`
(except that integers widen to index where they meet an index).

Integer `//` and `%` follow Python (floor) semantics, as in TileLang; when
both operands are known to be non-negative (indices, constants) they emit
the plain `arith.divsi` / `arith.remsi`.

`Buffer` is a global tensor argument or a tile from `T.alloc_shared` /
`T.alloc_fragment`. `buf[i, j]` reads an element (`memref.load`),
`buf[i, j] = v` writes one (`memref.store`); the same `buf[r, c]` passed to
`T.copy` is the start of a region, and `buf[r:r+64, c:c+128]` is a region.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from .trace import (TileLangTypeError, in_kernel, user_error, user_location,
                    user_position)
from .types import DType, SymExpr, boolean, index

_SCOPE_NAMES = {"global": "global", "shared": "shared", "fragment": "fragment"}


# ---------------------------------------------------------------------------
# Placement of pure ops
# ---------------------------------------------------------------------------

def _scope_of(state, e: "Expr"):
    s = e.scope
    if s.closed:
        user_error(None, f"a value computed inside {s.describe()} is used after that "
                         "region ended; compute it again where it is needed")
    if s.kind == "func":           # scalar arguments: available in the whole kernel
        return state.kernel_scope
    return s


def _place(state, operands: Sequence["Expr"]):
    """Where a pure op on `operands` goes: (insertion point, scope, hoisted).

    At the start of the innermost scope that defines an operand (after the
    ops hoisted there before), unless an operand of that scope is itself not
    hoisted (a loaded value, say): then at the current position.
    """
    cur = state.scope
    target = state.kernel_scope
    scopes = [_scope_of(state, e) for e in operands]
    for s in scopes:
        if s.depth > target.depth:
            target = s
    for e, s in zip(operands, scopes):
        if s is target and not e.hoisted:
            return cur.end_point(), cur, False
    return target.hoist_point(), target, True


def emit_pure(api, key, operands: Sequence["Expr"], build, dtype: DType, *,
              nonneg: bool = False, affine=None) -> "Expr":
    """Emit a side-effect-free op; hoisted and CSE'd where possible.

    `build(*ir_operands)` creates the op (inside the right insertion point and
    location) and returns its result Value.
    """
    state = in_kernel(api)
    irs = [e.ir for e in operands]
    ip, scope, hoisted = _place(state, operands)
    memo_key = (key, tuple(irs)) if hoisted else None
    if memo_key is not None and memo_key in scope.memo:
        return scope.memo[memo_key]
    with user_location(), ip:
        value = build(*irs)
    result = Expr(value, dtype, scope, hoisted, nonneg=nonneg, affine=affine)
    if hoisted:
        scope.last_hoisted = value.owner
        scope.memo[memo_key] = result
    return result


def constant(value, dtype: DType, *, api: Optional[str] = None) -> "Expr":
    """A constant of `dtype`, placed (once) at the top of the kernel."""
    from ..dialects import arith
    from ..ir import FloatAttr, IntegerAttr

    state = in_kernel(api)
    value = _check_scalar(value, dtype, api)
    ks = state.kernel_scope
    key = ("const", dtype.name, repr(value))
    if key in ks.memo:
        return ks.memo[key]
    ty = dtype.mlir_type()
    with user_location(), ks.hoist_point():
        if dtype.kind == "float":
            v = arith.constant(ty, FloatAttr.get(ty, value))
        else:
            v = arith.constant(ty, IntegerAttr.get(ty, int(value)))
    e = Expr(v, dtype, ks, True, nonneg=dtype.kind != "float" and value >= 0,
             const=value)
    ks.last_hoisted = v.owner
    ks.memo[key] = e
    return e


def _check_scalar(value, dtype: DType, api):
    if isinstance(value, SymExpr):
        value = int(value)
    if isinstance(value, bool):
        if dtype.kind == "bool":
            return int(value)
        user_error(api, f"a Python bool cannot be a {dtype.name} value; use 0/1",
                   TileLangTypeError)
    if dtype.kind == "float":
        if isinstance(value, (int, float)):
            return float(value)
    elif isinstance(value, int):
        lo, hi = (0, 1) if dtype.kind == "bool" else dtype.int_range()
        if not lo <= value <= hi:
            user_error(api, f"{value} does not fit in {dtype.name} [{lo}, {hi}]")
        return value
    elif isinstance(value, float):
        user_error(api, f"the float {value!r} is not a {dtype.name} value; use an int, or "
                        f"T.cast(x, 'float32') to compute in floats", TileLangTypeError)
    user_error(api, f"expected a {dtype.name} value, got {type(value).__name__} {value!r}",
               TileLangTypeError)


# ---------------------------------------------------------------------------
# Expr: a traced scalar
# ---------------------------------------------------------------------------

_INT_CMP = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_FLOAT_CMP = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}


class Expr:
    """A traced scalar value (index, integer, float or bool) of the kernel.

    Attributes: `dtype` (a `T` dtype; block/loop indices have dtype index).
    Python control flow on it (`if x > 0:`) is an error: it runs once at trace
    time; use `T.if_then_else(cond, a, b)`.
    """

    __slots__ = ("_ir", "dtype", "scope", "hoisted", "nonneg", "affine", "const")

    def __init__(self, ir, dtype: DType, scope, hoisted: bool, *, nonneg: bool = False,
                 affine=None, const=None):
        self._ir = ir
        self.dtype = dtype
        self.scope = scope
        self.hoisted = hoisted
        self.nonneg = nonneg
        self.affine = affine          # (root Value, int offset) for index slices
        self.const = const            # the Python value of a constant

    @property
    def ir(self):
        return self._ir

    def __repr__(self):
        return f"<traced {self.dtype.name} value>"

    # Python must not branch on traced values.
    def __bool__(self):
        user_error(None, "a traced value has no Python truth value: `if`, `while`, `and`, "
                         "`or` and `not` run once at trace time. Use T.if_then_else(cond, a, "
                         "b) to select a value", TileLangTypeError)

    def __index__(self):
        user_error(None, "a traced value is not a Python int (it is known only on the GPU); "
                         "shapes, extents and loop bounds of Python loops must be "
                         "compile-time ints", TileLangTypeError)

    __int__ = __index__

    def __float__(self):
        user_error(None, "a traced value is not a Python float (it is known only on the GPU)",
                   TileLangTypeError)

    __hash__ = object.__hash__

    def __iter__(self):
        user_error(None, "a traced scalar cannot be iterated", TileLangTypeError)

    # -- arithmetic ----------------------------------------------------------
    def __add__(self, o): return binary("+", self, o)
    def __radd__(self, o): return binary("+", o, self)
    def __sub__(self, o): return binary("-", self, o)
    def __rsub__(self, o): return binary("-", o, self)
    def __mul__(self, o): return binary("*", self, o)
    def __rmul__(self, o): return binary("*", o, self)
    def __truediv__(self, o): return binary("/", self, o)
    def __rtruediv__(self, o): return binary("/", o, self)
    def __floordiv__(self, o): return binary("//", self, o)
    def __rfloordiv__(self, o): return binary("//", o, self)
    def __mod__(self, o): return binary("%", self, o)
    def __rmod__(self, o): return binary("%", o, self)
    def __and__(self, o): return binary("&", self, o)
    def __rand__(self, o): return binary("&", o, self)
    def __or__(self, o): return binary("|", self, o)
    def __ror__(self, o): return binary("|", o, self)
    def __xor__(self, o): return binary("^", self, o)
    def __rxor__(self, o): return binary("^", o, self)
    def __lshift__(self, o): return binary("<<", self, o)
    def __rlshift__(self, o): return binary("<<", o, self)
    def __rshift__(self, o): return binary(">>", self, o)
    def __rrshift__(self, o): return binary(">>", o, self)
    def __lt__(self, o): return binary("<", self, o)
    def __le__(self, o): return binary("<=", self, o)
    def __gt__(self, o): return binary(">", self, o)
    def __ge__(self, o): return binary(">=", self, o)
    def __eq__(self, o): return binary("==", self, o)     # noqa: E704
    def __ne__(self, o): return binary("!=", self, o)     # noqa: E704

    def __neg__(self):
        if self.const is not None and self.dtype.kind != "bool":
            return constant(-self.const, self.dtype)
        if self.dtype.kind == "float":
            from ..dialects import arith
            return emit_pure(None, ("negf",), [self], lambda x: arith.negf(x), self.dtype)
        if self.dtype.kind == "bool":
            user_error(None, "cannot negate a bool; use ~x", TileLangTypeError)
        return binary("-", 0, self)

    def __pos__(self):
        return self

    def __invert__(self):
        if self.dtype.kind in ("float",):
            user_error(None, "~ needs an integer or bool value", TileLangTypeError)
        return binary("^", self, 1 if self.dtype.kind == "bool" else -1)

    def __abs__(self):
        from .mathops import abs as t_abs
        return t_abs(self)


def check_live(e: "Expr") -> "Expr":
    """Raises if `e` is a deferred fragment read or was made in a region that
    has ended (its SSA value would not dominate the use)."""
    e.ir  # noqa: B018
    if e.scope.closed:
        user_error(None, f"a value computed inside {e.scope.describe()} is used after that "
                         "region ended; compute it again where it is needed")
    return e


def as_expr(value, dtype: Optional[DType], api: Optional[str], what: str) -> Expr:
    """A traced value from an Expr or a Python scalar (a constant of `dtype`;
    ints default to index and floats to float32 when `dtype` is None)."""
    if isinstance(value, Expr):
        return check_live(value)
    if isinstance(value, SymExpr):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        user_error(api, f"{what} must be a traced value or a Python number, got "
                        f"{type(value).__name__} {value!r}", TileLangTypeError)
    if dtype is None:
        from .types import float32
        dtype = index if isinstance(value, int) else float32
    return constant(value, dtype, api=api)


def to_index(value, api: Optional[str], what: str) -> Expr:
    """An index-typed Expr (integers are index_cast; floats are an error)."""
    e = as_expr(value, index, api, what)
    if e.dtype is index:
        return e
    if e.dtype.kind == "int":
        return cast(e, index, api=api)
    user_error(api, f"{what} must be an integer index, got a {e.dtype.name} value",
               TileLangTypeError)


def _coerce(op: str, a, b):
    """Both operands as Exprs of one dtype (see the module docstring)."""
    if isinstance(a, SymExpr):
        a = int(a)
    if isinstance(b, SymExpr):
        b = int(b)
    a_is, b_is = isinstance(a, Expr), isinstance(b, Expr)
    if a_is and b_is:
        check_live(a), check_live(b)
        if a.dtype is b.dtype:
            return a, b
        if a.dtype.is_int and b.dtype.is_int:
            if a.dtype is index:
                return a, cast(b, index)
            if b.dtype is index:
                return cast(a, index), b
        user_error(None, f"`{op}` on values of different types: {a.dtype.name} and "
                         f"{b.dtype.name}; convert one with T.cast(x, "
                         f"'{a.dtype.name if a.dtype is not index else b.dtype.name}')",
                   TileLangTypeError)
    if a_is:
        return check_live(a), _literal(op, b, a.dtype)
    if not b_is:
        user_error(None, f"unsupported operands for `{op}`: {type(a).__name__} and "
                         f"{type(b).__name__}", TileLangTypeError)
    return _literal(op, a, check_live(b).dtype), b


def _literal(op, value, dtype: DType) -> Expr:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        user_error(None, f"unsupported operand for `{op}`: {type(value).__name__} {value!r}",
                   TileLangTypeError)
    if isinstance(value, float) and dtype.kind != "float":
        user_error(None, f"`{op}` mixes a value of type {dtype.name} with the float {value!r}; "
                         f"use T.cast(x, 'float32') to compute in floats", TileLangTypeError)
    if dtype.kind == "bool":
        if value not in (0, 1):
            user_error(None, f"`{op}` mixes a bool with {value!r}", TileLangTypeError)
    return constant(value, dtype)


def _root(e: Expr):
    return e.affine if e.affine is not None else (e.ir, 0)


def binary(op: str, a, b) -> Expr:
    """Emit `a op b` (either side may be a Python scalar)."""
    from ..dialects import arith

    a, b = _coerce(op, a, b)
    dt = a.dtype
    kind = dt.kind
    both_nonneg = a.nonneg and b.nonneg

    if op in _INT_CMP:
        if kind == "float":
            pred = _FLOAT_CMP[op]
            return emit_pure(None, ("cmpf", pred), [a, b],
                             lambda x, y: arith.cmpf(getattr(arith.CmpFPredicate, pred.upper()), x, y),
                             boolean)
        pred = _INT_CMP[op]
        if kind == "bool" and op not in ("==", "!="):
            user_error(None, f"`{op}` is not defined on bools", TileLangTypeError)
        return emit_pure(None, ("cmpi", pred), [a, b],
                         lambda x, y: arith.cmpi(getattr(arith.CmpIPredicate, pred), x, y),
                         boolean)

    if kind == "float":
        if op in ("&", "|", "^", "<<", ">>"):
            user_error(None, f"`{op}` needs integer operands, got {dt.name}", TileLangTypeError)
        if op == "//":
            from .mathops import floor
            return floor(binary("/", a, b))
        name = {"+": "addf", "-": "subf", "*": "mulf", "/": "divf", "%": "remf"}[op]
        return emit_pure(None, (name,), [a, b], getattr(arith, name), dt)

    # Integers, index and bools.
    if kind == "bool" and op not in ("&", "|", "^"):
        user_error(None, f"`{op}` is not defined on bools; T.cast them to an integer type",
                   TileLangTypeError)
    if op == "/":
        user_error(None, f"`/` on {dt.name} values: use `//` for integer division, or "
                         "T.cast to a float type", TileLangTypeError)

    # Constant folding and identities keep address arithmetic tidy.
    if a.const is not None and b.const is not None and op in ("+", "-", "*", "//", "%"):
        if op in ("//", "%") and b.const == 0:
            user_error(None, "integer division by zero")
        value = {"+": a.const + b.const, "-": a.const - b.const, "*": a.const * b.const,
                 "//": a.const // b.const if b.const else 0,
                 "%": a.const % b.const if b.const else 0}[op]
        return constant(value, dt)
    if b.const == 0 and op in ("+", "-", "|", "^", "<<", ">>"):
        return a
    if a.const == 0 and op == "+":
        return b
    if b.const == 1 and op in ("*", "//"):
        return a
    if a.const == 1 and op == "*":
        return b
    if (a.const == 0 or b.const == 0) and op == "*":
        return constant(0, dt)
    if op in ("//", "%") and b.const == 0:
        user_error(None, "integer division by zero")

    if op in ("+", "-"):
        affine = None
        if b.const is not None:
            root, off = _root(a)
            affine = (root, off + b.const if op == "+" else off - b.const)
        elif a.const is not None and op == "+":
            root, off = _root(b)
            affine = (root, off + a.const)
        name = "addi" if op == "+" else "subi"
        return emit_pure(None, (name,), [a, b], getattr(arith, name), dt,
                         nonneg=both_nonneg and op == "+", affine=affine)
    if op == "*":
        return emit_pure(None, ("muli",), [a, b], arith.muli, dt, nonneg=both_nonneg)
    if op == "//":
        if both_nonneg:
            return emit_pure(None, ("divsi",), [a, b], arith.divsi, dt, nonneg=True)
        return emit_pure(None, ("floordivsi",), [a, b], arith.floordivsi, dt)
    if op == "%":
        r = emit_pure(None, ("remsi",), [a, b], arith.remsi, dt, nonneg=both_nonneg)
        if both_nonneg or (b.const is not None and b.const > 0 and a.nonneg):
            return r
        # Python's floor modulo: add b when r != 0 and r, b differ in sign.
        zero = constant(0, dt)
        fix = binary("&", binary("!=", r, zero), binary("!=", binary("<", r, zero),
                                                         binary("<", b, zero)))
        return if_then_else(fix, binary("+", r, b), r)
    name = {"&": "andi", "|": "ori", "^": "xori", "<<": "shli", ">>": "shrsi"}[op]
    return emit_pure(None, (name,), [a, b], getattr(arith, name), dt)


def if_then_else(cond, a, b, *, api: str = "T.if_then_else") -> Expr:
    """`cond ? a : b` (arith.select); `a`/`b` may be Python scalars."""
    from ..dialects import arith

    cond = as_expr(cond, boolean, api, "cond")
    if cond.dtype is not boolean:
        user_error(api, f"cond must be a comparison (bool), got a {cond.dtype.name} value",
                   TileLangTypeError)
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        if isinstance(a, float) or isinstance(b, float):
            from .types import float32
            a, b = constant(a, float32, api=api), constant(b, float32, api=api)
        else:
            a, b = constant(a, index, api=api), constant(b, index, api=api)
    a, b = _coerce("T.if_then_else", a, b)
    return emit_pure(api, ("select",), [cond, a, b], arith.select, a.dtype,
                     nonneg=a.nonneg and b.nonneg)


def ceildiv(a, b, *, api: str = "T.ceildiv") -> Expr:
    from ..dialects import arith
    a, b = _coerce("T.ceildiv", a, b)
    if not a.dtype.is_int:
        user_error(api, f"needs integer operands, got {a.dtype.name}", TileLangTypeError)
    if b.const == 1:
        return a
    return emit_pure(api, ("ceildivsi",), [a, b], arith.ceildivsi, a.dtype,
                     nonneg=a.nonneg and b.nonneg)


def cast(value, dtype, *, api: str = "T.cast") -> Expr:
    """Convert a traced value (or a Python number) to `dtype`."""
    from ..dialects import arith
    from .types import as_dtype, int64

    dst = as_dtype(dtype, "dtype", api=api, allow_index=True)
    if not isinstance(value, Expr):
        if isinstance(value, SymExpr):
            value = int(value)
        if isinstance(value, float) and dst.kind != "float":
            value = int(value)
        return constant(value, dst, api=api)
    src = value.dtype
    if src is dst:
        return value
    nonneg = value.nonneg and dst.kind != "float"

    def emit(name, fn, x=value, dt=dst):
        return emit_pure(api, (name, dt.name), [x], lambda v: fn(dt.mlir_type(), v), dt,
                         nonneg=nonneg)

    if src.kind == "float" and dst.kind == "float":
        if src.bits == dst.bits:          # float16 <-> bfloat16: through float32
            from .types import float32
            return cast(cast(value, float32, api=api), dst, api=api)
        return emit("extf" if dst.bits > src.bits else "truncf",
                    arith.extf if dst.bits > src.bits else arith.truncf)
    if src.kind == "index" or dst.kind == "index":
        if src.kind == "float":
            return cast(cast(value, int64, api=api), dst, api=api)
        if dst.kind == "float":
            return cast(cast(value, int64, api=api), dst, api=api)
        if src.kind == "bool":
            return emit("index_castui", arith.index_castui)
        if dst.kind == "bool":
            return binary("!=", value, 0)
        return emit("index_cast", arith.index_cast)
    if dst.kind == "bool":
        return binary("!=", value, 0.0 if src.kind == "float" else 0)
    if src.kind == "bool":
        return emit("uitofp" if dst.kind == "float" else "extui",
                    arith.uitofp if dst.kind == "float" else arith.extui)
    if src.kind == "int" and dst.kind == "int":
        return emit("extsi" if dst.bits > src.bits else "trunci",
                    arith.extsi if dst.bits > src.bits else arith.trunci)
    if src.kind == "int" and dst.kind == "float":
        return emit("sitofp", arith.sitofp)
    if src.kind == "float" and dst.kind == "int":
        return emit("fptosi", arith.fptosi)
    user_error(api, f"cannot convert {src.name} to {dst.name}", TileLangTypeError)


def reinterpret(value, dtype, *, api: str = "T.reinterpret") -> Expr:
    """The bits of a traced value read as `dtype` of the same width
    (`arith.bitcast`): e.g. a bfloat16's 16 bits as an int16, for
    order-preserving integer keys of floats."""
    from ..dialects import arith
    from .types import as_dtype

    dst = as_dtype(dtype, "dtype", api=api)
    if not isinstance(value, Expr):
        user_error(api, f"expects a traced value, got {type(value).__name__} "
                   "(a Python number has no bits of a dtype)", TileLangTypeError)
    src = value.dtype
    if src is dst:
        return value
    if {"bool", "index"} & {src.kind, dst.kind} or src.bits != dst.bits:
        user_error(api, f"cannot reinterpret {src.name} ({src.bits} bits) as {dst.name} "
                   f"({dst.bits} bits): the widths must be equal, and neither a bool "
                   "nor an index",
                   TileLangTypeError)
    return emit_pure(api, ("bitcast", dst.name), [value],
                     lambda v: arith.bitcast(dst.mlir_type(), v), dst)


# ---------------------------------------------------------------------------
# Buffers and regions
# ---------------------------------------------------------------------------

class Buffer:
    """A global tensor argument or a shared / fragment tile.

    Attributes: `name`, `shape` (tuple of ints), `dtype`, `scope` ("global",
    "shared" or "fragment"), `ndim`.
    """

    def __init__(self, ir, name: str, shape, dtype: DType, scope: str, op=None,
                 position=None):
        self.ir = ir
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.scope = scope
        self.op = op                  # the alloc op (None for arguments)
        self.position = position

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self):
        return f"<{self.scope} buffer {self.name} {list(self.shape)} {self.dtype.name}>"

    def describe(self) -> str:
        return f"{self.scope} buffer {self.name} {list(self.shape)}"

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        user_error(None, f"cannot iterate over {self.describe()}; index it inside "
                         "T.Parallel", TileLangTypeError)

    def __bool__(self):
        return True

    def view(self, *shape) -> "Buffer":
        """This global tensor seen with another shape of as many elements
        (row-major; no copy): `qkv.view(heads, head_dim)` makes heads rows of
        a flat vector, so that T.copy boxes (which have the rank of both
        buffers) can move whole heads. TileLang's `T.view` / `Buffer.view`."""
        from math import prod

        from ..dialects import memref
        from ..ir import MemRefType
        from .types import static_int

        api = f"{self.name}.view"
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not shape:
            user_error(api, "needs a shape")
        shape = tuple(static_int(d, f"shape[{i}]", api, minimum=1) for i, d in enumerate(shape))
        if self.scope != "global":
            user_error(api, f"only global tensors have views; {self.describe()} is a "
                            f"{self.scope} tile (T.copy it into one of the shape you want)")
        if prod(shape) != prod(self.shape):
            user_error(api, f"a view of {self.describe()} ({prod(self.shape)} elements) must "
                            f"keep its size; shape {list(shape)} has {prod(shape)}")
        if shape == self.shape:
            return self
        state = in_kernel(api)
        elem = self.dtype.mlir_type()
        with user_location(), state.scope.end_point():
            flat = self.ir
            if self.ndim > 1:
                flat = memref.collapse_shape(MemRefType.get([prod(self.shape)], elem), flat,
                                             [list(range(self.ndim))])
            if len(shape) > 1:
                flat = memref.expand_shape(MemRefType.get(list(shape), elem), flat,
                                           [list(range(len(shape)))], [], list(shape))
        return Buffer(flat, self.name, shape, self.dtype, "global", position=user_position())

    def __getitem__(self, idx):
        api = f"{self.name}[...]"
        entries = _index_entries(idx)
        if any(isinstance(e, slice) for e in entries):
            return _make_region(self, entries, api)
        if len(entries) != self.ndim:
            user_error(api, f"wrong rank: {self.describe()} has rank {self.ndim}, got "
                            f"{len(entries)} ind{'ices' if len(entries) != 1 else 'ex'}")
        indices = [_element_index(self, d, e, api) for d, e in enumerate(entries)]
        state = in_kernel(api)
        if self.scope == "fragment" and not state.in_parallel():
            # Not an error yet: T.copy may use it as a region start.
            return BufferLoad(None, self, indices, None, state.scope, user_position())
        return _load(state, self, indices)

    def __setitem__(self, idx, value):
        from ..dialects import memref

        api = f"{self.name}[...] ="
        entries = _index_entries(idx)
        if any(isinstance(e, slice) for e in entries):
            user_error(api, f"cannot assign to a slice of {self.describe()}; use T.fill / "
                            "T.copy, or assign elements inside T.Parallel")
        if len(entries) != self.ndim:
            user_error(api, f"wrong rank: {self.describe()} has rank {self.ndim}, got "
                            f"{len(entries)} ind{'ices' if len(entries) != 1 else 'ex'}")
        indices = [_element_index(self, d, e, api) for d, e in enumerate(entries)]
        state = in_kernel(api)
        if self.scope == "fragment" and not state.in_parallel():
            user_error(api, f"fragment {self.name} can be written element-wise only inside "
                            "T.Parallel (or whole, with T.copy / T.fill)")
        if isinstance(value, Expr):
            check_live(value)
            if value.dtype is not self.dtype:
                user_error(api, f"dtype mismatch: storing a {value.dtype.name} value into "
                                f"{self.dtype.name} buffer {self.name}; convert it with "
                                f"T.cast(value, '{self.dtype.name}')", TileLangTypeError)
        v = as_expr(value, self.dtype, api, "the stored value")
        if v.dtype is not self.dtype:
            user_error(api, f"dtype mismatch: storing a {v.dtype.name} value into "
                            f"{self.dtype.name} buffer {self.name}", TileLangTypeError)
        irs = [i.ir for i in _index_values(indices, api)]
        with user_location(), state.scope.end_point():
            memref.store(v.ir, self.ir, irs)


class BufferLoad(Expr):
    """`buf[i, j]`: an element read, or, passed to T.copy / T.atomic_add, the
    start of a region whose extent comes from the other side."""

    __slots__ = ("buffer", "indices", "op", "position")

    def __init__(self, ir, buffer: Buffer, indices, op, scope, position):
        super().__init__(ir, buffer.dtype, scope, False)
        self.buffer = buffer
        self.indices = indices
        self.op = op
        self.position = position

    @property
    def ir(self):
        if self._ir is None:
            if self.op == "consumed":
                msg = (f"{self.buffer.name}[...] was used as a region start; it is not "
                       "also an element value")
            else:
                msg = (f"fragment {self.buffer.name} can be read element-wise only inside "
                       "T.Parallel (or whole, with T.copy)")
            user_error(None, msg, position=self.position)
        return self._ir

    def consume(self):
        """Used as a region start: drop the element read emitted for it."""
        op = self.op
        if op is not None and op != "consumed":
            if not any(True for _ in self._ir.uses):
                op.erase()
                self._ir = None
                self.op = "consumed"


def _index_entries(idx) -> list:
    entries = list(idx) if isinstance(idx, tuple) else [idx]
    for e in entries:
        if e is Ellipsis or e is None:
            user_error(None, "`...` and `None` are not supported in buffer subscripts",
                       TileLangTypeError)
    return entries


def _element_index(buf: Buffer, dim: int, entry, api):
    """An int (checked against the shape) or an index Expr."""
    if isinstance(entry, SymExpr):
        entry = int(entry)
    if isinstance(entry, bool):
        user_error(api, f"index {dim} of {buf.name} is a bool", TileLangTypeError)
    if isinstance(entry, int):
        if not 0 <= entry < buf.shape[dim]:
            user_error(api, f"index {entry} is out of bounds for dimension {dim} of "
                            f"{buf.describe()}")
        return entry
    if isinstance(entry, Expr):
        return to_index(entry, api, f"index {dim} of {buf.name}")
    user_error(api, f"index {dim} of {buf.name} must be an int or a traced index, got "
                    f"{type(entry).__name__} {entry!r}", TileLangTypeError)


def _index_values(indices, api) -> List[Expr]:
    return [constant(i, index, api=api) if isinstance(i, int) else i for i in indices]


def _load(state, buf: Buffer, indices) -> BufferLoad:
    from ..dialects import memref

    api = f"{buf.name}[...]"
    irs = [i.ir for i in _index_values(indices, api)]
    with user_location(), state.scope.end_point():
        v = memref.load(buf.ir, irs)
    return BufferLoad(v, buf, indices, v.owner, state.scope, user_position())


class BufferRegion:
    """`buf[r:r+64, c:c+128]`: a box of static extent at (maybe traced) offsets."""

    def __init__(self, buffer: Buffer, starts, extents):
        self.buffer = buffer
        self.starts = list(starts)
        self.extents = list(extents)

    @property
    def shape(self):
        return tuple(self.extents)

    def __repr__(self):
        return f"<region of {self.buffer.name} extents {self.extents}>"


def _make_region(buf: Buffer, entries, api) -> BufferRegion:
    if len(entries) > buf.ndim:
        user_error(api, f"{buf.describe()} has rank {buf.ndim} but {len(entries)} "
                        "subscripts were given")
    entries = entries + [slice(None)] * (buf.ndim - len(entries))
    starts, extents = [], []
    for d, e in enumerate(entries):
        size = buf.shape[d]
        if not isinstance(e, slice):
            # A single index in a sliced subscript: a box of extent 1.
            starts.append(_element_index(buf, d, e, api))
            extents.append(1)
            continue
        if e.step not in (None, 1):
            user_error(api, f"slice steps are not supported (dimension {d} of {buf.name})")
        start, stop = e.start, e.stop
        if isinstance(start, SymExpr):
            start = int(start)
        if isinstance(stop, SymExpr):
            stop = int(stop)
        if start is None:
            start = 0
        if isinstance(start, Expr):
            start = to_index(start, api, f"slice start of dimension {d} of {buf.name}")
            if not isinstance(stop, Expr):
                user_error(api, f"dimension {d} of {buf.name}: the slice starts at a traced "
                                "value, so its stop must be that value plus a constant "
                                "(e.g. A[r:r + 64])")
            stop = to_index(stop, api, f"slice stop of dimension {d} of {buf.name}")
            (r0, o0), (r1, o1) = _root(start), _root(stop)
            if r0 != r1:
                user_error(api, f"dimension {d} of {buf.name}: the slice extent must be a "
                                "compile-time constant: write the stop as the start plus a "
                                "constant (e.g. A[r:r + 64])")
            extent = o1 - o0
        elif isinstance(start, int) and not isinstance(start, bool):
            if stop is None:
                stop = size
            if isinstance(stop, Expr) or isinstance(stop, bool) or not isinstance(stop, int):
                user_error(api, f"dimension {d} of {buf.name}: a slice with a constant start "
                                "needs a constant stop", TileLangTypeError)
            if start < 0 or stop > size:
                user_error(api, f"slice [{start}:{stop}] is out of bounds for dimension {d} "
                                f"of {buf.describe()}")
            extent = stop - start
        else:
            user_error(api, f"slice start of dimension {d} of {buf.name} must be an int or a "
                            f"traced index, got {type(start).__name__}", TileLangTypeError)
        if extent < 1:
            user_error(api, f"slice of dimension {d} of {buf.name} is empty (extent {extent})")
        if extent > size:
            user_error(api, f"slice extent {extent} exceeds dimension {d} of "
                            f"{buf.describe()}")
        starts.append(start)
        extents.append(extent)
    return BufferRegion(buf, starts, extents)
