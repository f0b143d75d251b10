"""Tracing state, source locations and errors of `tilemega.language`.

A kernel is traced by running its Python body once with proxy objects; every
T.* call and every operator on a proxy appends MLIR operations at the state's
insertion point. This module holds that state (one per thread), the scopes of
the regions being built (kernel, parallel, pipelined), and the helpers that
find the user's source line, so that every op carries a
`Location.file(filename, line, col)` of the line that made it and every
Python-side error names it.

Pure Python at import time; MLIR is imported only while tracing.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import re
import sys
import threading
from typing import Dict, List, Optional, Tuple

# Frames from files under this folder (the tilemega package) are ours; the
# first frame outside it is the user's. The mega package's task bodies are
# T.* kernels like a user's: their lines are the locations.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_KERNEL_SOURCES = os.path.join(_PACKAGE_DIR, "mega") + os.sep


class TileLangError(ValueError):
    """Misuse of `tilemega.language` found while tracing (wrong rank, dtype
    mismatch, copy extents that do not match, ...). The message starts with
    the user's `file:line` and names the T.* call and the argument;
    `filename` and `lineno` hold the same position."""

    def __init__(self, message: str, filename: Optional[str] = None,
                 lineno: Optional[int] = None):
        super().__init__(message)
        self.filename = filename
        self.lineno = lineno


class TileLangTypeError(TileLangError, TypeError):
    """A TileLangError about the type of an argument (also a TypeError)."""


_ABSPATHS: Dict[str, str] = {}


def _abspath(filename: str) -> str:
    path = _ABSPATHS.get(filename)
    if path is None:
        path = filename if filename.startswith("<") else os.path.abspath(filename)
        _ABSPATHS[filename] = path
    return path


def _is_internal(filename: str) -> bool:
    path = _abspath(filename)
    if path.startswith(_KERNEL_SOURCES):
        return False
    return path.startswith(_PACKAGE_DIR) or filename.startswith("<frozen")


def user_frame():
    """The innermost frame that is not tilemega's own code (or None)."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


@functools.lru_cache(maxsize=512)
def _positions(code):
    try:
        return tuple(code.co_positions())
    except AttributeError:       # Python < 3.11: line numbers only
        return None


def user_position() -> Tuple[str, int, int]:
    """(filename, line, column) of the user's code running now; the column is
    1-based (0 when Python cannot tell)."""
    frame = user_frame()
    if frame is None:
        return ("<unknown>", 0, 0)
    line, col = frame.f_lineno, 0
    positions = _positions(frame.f_code)
    if positions is not None and 0 <= frame.f_lasti // 2 < len(positions):
        pos = positions[frame.f_lasti // 2]   # Python 3.11+: the instruction's column
        if pos[0] is not None:
            line = pos[0]
        if pos[2] is not None:
            col = pos[2] + 1
    return (_abspath(frame.f_code.co_filename), line or 0, col)


def user_location():
    """`Location.file(...)` of the user's current line (needs a Context)."""
    from ..ir import Location
    filename, line, col = user_position()
    return Location.file(filename, line, col)


def describe_position(position: Optional[Tuple[str, int, int]] = None) -> str:
    filename, line, _ = position or user_position()
    return f"{filename}:{line}"


def user_error(api: Optional[str], message: str, cls=TileLangError,
               position: Optional[Tuple[str, int, int]] = None):
    """Raise `cls` with the user's file:line and the T.* call in front."""
    filename, line, col = position or user_position()
    prefix = f"{filename}:{line}: " + (f"{api}: " if api else "")
    raise cls(prefix + message, filename, line)


_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")


def assigned_name(default: str) -> str:
    """The variable the user's current line assigns (`A_s = T.alloc_shared(...)`
    gives "A_s"), for messages; `default` when there is none."""
    filename, line, _ = user_position()
    text = linecache.getline(filename, line) if line else ""
    m = _ASSIGN.match(text)
    return m.group(1) if m else default


# ---------------------------------------------------------------------------
# Scopes and the trace state
# ---------------------------------------------------------------------------

class Scope:
    """One region being traced: the kernel body, a T.Parallel body or a
    T.Pipelined body (or the function entry, which only holds arguments).

    Pure operations whose operands are all available at the start of a scope
    are *hoisted* there (after the ops hoisted before them) and CSE'd through
    `memo`: block-invariant address arithmetic is computed once per block,
    not once per use.
    """

    def __init__(self, kind: str, block, parent: Optional["Scope"], op=None,
                 position=None):
        self.kind = kind                  # "func", "kernel", "parallel", "pipelined"
        self.block = block
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.op = op
        self.position = position          # where the user opened it
        self.closed = False
        self.last_hoisted = None          # the last op placed in the hoisted prefix
        self.memo: Dict[tuple, object] = {}
        # The accumulators (tile buffers) of this block's asynchronous
        # gemms in flight, oldest first (T.gemm(..., wg_wait=-1)).
        self.pending_gemms: list = []

    def hoist_point(self):
        from ..ir import InsertionPoint
        if self.last_hoisted is None:
            return InsertionPoint.at_block_begin(self.block)
        return InsertionPoint.after(self.last_hoisted)

    def end_point(self):
        from ..ir import InsertionPoint
        return InsertionPoint(self.block)

    def encloses(self, other: "Scope") -> bool:
        s = other
        while s is not None:
            if s is self:
                return True
            s = s.parent
        return False

    def describe(self) -> str:
        where = f" at {describe_position(self.position)}" if self.position else ""
        return {"kernel": "T.Kernel", "parallel": "T.Parallel",
                "pipelined": "T.Pipelined"}.get(self.kind, self.kind) + where


class TraceState:
    """Everything one trace needs; see `tilemega.language.function.trace`."""

    def __init__(self, context, module, func_op, entry_block, bindings, config, name):
        self.context = context
        self.module = module
        self.func_op = func_op
        self.bindings: Dict[str, int] = dict(bindings)
        self.config = dict(config)
        self.name = name
        self.func_scope = Scope("func", entry_block, None)
        self.scopes: List[Scope] = [self.func_scope]
        self.kernel = None                # the tile.kernel op once opened
        self.kernel_scope: Optional[Scope] = None
        self.kernel_context = None        # the T.Kernel object once opened
        self.threads: Optional[int] = None
        self.buffers: List[object] = []   # Buffer proxies, for annotate_layout

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def push(self, scope: Scope):
        self.scopes.append(scope)

    def pop(self, scope: Scope):
        if self.scopes and self.scopes[-1] is scope:
            self.scopes.pop()
        scope.closed = True

    def in_parallel(self) -> bool:
        return any(s.kind == "parallel" for s in self.scopes)


_local = threading.local()


def current_or_none() -> Optional[TraceState]:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def current(api: Optional[str]) -> TraceState:
    state = current_or_none()
    if state is None:
        user_error(api, "can only be used while a @tilemega.jit function is traced "
                        "(call it, or its .ir() / .compile())")
    return state


def in_kernel(api: Optional[str]) -> TraceState:
    state = current(api)
    if state.kernel_scope is None or state.kernel_scope.closed:
        user_error(api, "must be inside `with T.Kernel(...)`")
    return state


@contextlib.contextmanager
def tracing(state: TraceState):
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(state)
    try:
        yield state
    finally:
        stack.pop()
