"""`@tilemega.jit`: compile a `tilemega.language` kernel and launch it.

    import tilemega
    import tilemega.language as T

    M, N = T.symbolic("M"), T.symbolic("N")

    @tilemega.jit(out_idx=[-1])
    def add_one(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
                *, block_M: int = 64):
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, 128), threads=128) as (bx, by):
            ...

    add_one.ir(M=256, N=1024)          # tile IR text (traced, not compiled)
    add_one.compile(M=256, N=1024)     # tilemega.compiler.CompiledModule
    b = add_one(a)                     # compile (cached) + launch on torch tensors

**Specialisation.** The kernel ABI is static-shape, so symbolic dimensions
are substituted before compiling: every distinct set of symbol values (taken
from the tensors' shapes at call time, or given to `ir`/`compile`) and every
distinct configuration (the keyword-only parameters) is traced and compiled
into its own artifact. Each artifact is specialised to its shapes and
rejects tensors of other shapes; grid sizes computed from symbols (e.g.
`T.ceildiv(M, 64)`) are constants of that artifact.

**Caching.** Traces and loaded kernels are memoised per specialisation in
the process; artifacts are cached on disk (see `tilemega.cache`:
`$TILEMEGA_CACHE_DIR` or `~/.cache/tilemega`) keyed by the IR text, the
compile options and the toolchain versions, so a new process that traces
the same kernel loads its artifact without running the MLIR pipeline. Every
entry's files are checked against their SHA-256 when it is read and again
just before the runtime loads it; a damaged entry is rebuilt with a
`tilemega.cache.CacheWarning`, never launched.

**Launching** needs `tilemega.runtime` (cuda-python) and, for `out_idx`,
torch; both are imported only on a call, so tracing and compiling work on a
machine without a GPU or torch.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .language.function import KernelSignature, TracedKernel, trace
from .language.types import Symbol, SymExpr

__all__ = ["jit", "JitFunction"]


def _spec_key(bindings: Dict[str, int], config: Dict[str, Any]) -> tuple:
    def freeze(v):
        try:
            hash(v)
            return v
        except TypeError:
            return repr(v)
    return (tuple(sorted(bindings.items())),
            tuple(sorted((k, freeze(v)) for k, v in config.items())))


def _shape_of(value) -> Optional[Tuple[int, ...]]:
    shape = getattr(value, "shape", None)
    if shape is None:
        cai = getattr(value, "__cuda_array_interface__", None)
        shape = cai.get("shape") if isinstance(cai, dict) else None
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


class JitFunction:
    """A kernel function compiled on demand; see the module docstring.

    Options (from `tilemega.jit(...)`): `out_idx` (indices of tensor
    parameters that the call allocates and returns instead of taking them as
    arguments, TileLang's convention), `chip`, `opt_level`, `features`,
    `assemble` (run ptxas for a cubin when found), `name` (of the kernel;
    default the function's), `cache` (use the on-disk cache).
    """

    def __init__(self, fn, *, out_idx: Union[None, int, Sequence[int]] = None,
                 chip: str = "sm_90a", opt_level: int = 3, features: str = "+ptx80",
                 assemble: bool = True, name: Optional[str] = None, cache: bool = True,
                 wgmma: Optional[bool] = None, wgmma_in_flight: Optional[bool] = None,
                 tma: Optional[bool] = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.signature = KernelSignature(fn)
        self.kernel_name = name or self.signature.name
        self.options = {"chip": chip, "opt_level": opt_level, "features": features,
                        "assemble": assemble}
        # Hopper's gemm, resolved now (tilemega.compile's rule) so that the
        # cache key names what the compile does.
        from .compiler import resolve_tma, resolve_wgmma, resolve_wgmma_in_flight
        self.options["wgmma"] = resolve_wgmma(wgmma, chip)
        self.options["wgmma_in_flight"] = resolve_wgmma_in_flight(wgmma_in_flight,
                                                                  self.options["wgmma"])
        self.options["tma"] = resolve_tma(tma, chip)
        self.use_disk_cache = cache
        self.out_idx = self._normalize_out_idx(out_idx)
        self._lock = threading.RLock()
        self._traces: Dict[tuple, TracedKernel] = {}
        self._entries: Dict[tuple, Any] = {}       # spec key -> cache.CacheEntry
        self._artifacts: Dict[tuple, Any] = {}     # spec key -> runtime Artifact
        self.last_entry = None                     # the CacheEntry of the last compile

    def __repr__(self):
        return f"<tilemega.jit kernel {self.kernel_name}>"

    # -- arguments -----------------------------------------------------------
    def _normalize_out_idx(self, out_idx) -> List[int]:
        params = self.signature.params
        if out_idx is None:
            return []
        if isinstance(out_idx, int) and not isinstance(out_idx, bool):
            out_idx = [out_idx]
        out = []
        for i in out_idx:
            if isinstance(i, bool) or not isinstance(i, int) or not -len(params) <= i < len(params):
                self.signature._fail(f"out_idx entry {i!r} is not a parameter index "
                                     f"(the kernel has {len(params)} parameters)", TypeError)
            i %= len(params)
            if params[i].kind != "tensor":
                self.signature._fail(f"out_idx {i} names scalar parameter {params[i].name}; "
                                     "outputs must be tensors", TypeError)
            if i in out:
                self.signature._fail(f"out_idx names parameter {params[i].name} twice",
                                     TypeError)
            out.append(i)
        return sorted(out)

    def _split_kwargs(self, config: Optional[Dict[str, Any]], kwargs: Dict[str, Any]):
        """(symbol bindings, full config) from fn.ir/compile keyword arguments."""
        sig = self.signature
        bindings, cfg = {}, dict(config or {})
        for k, v in kwargs.items():
            if k in sig.symbols:
                bindings[k] = int(v) if isinstance(v, SymExpr) else v
            elif k in sig.config:
                if k in cfg:
                    raise TypeError(f"{k} given both in config= and as a keyword argument")
                cfg[k] = v
            else:
                raise TypeError(
                    f"kernel {self.kernel_name} has no symbolic dimension or keyword-only "
                    f"parameter {k!r} (symbols: {list(sig.symbols) or 'none'}; configuration: "
                    f"{list(sig.config) or 'none'})")
        return sig.check_bindings(bindings), sig.resolve_config(cfg)

    def bind_shapes(self, args: Sequence[Any]) -> Dict[str, int]:
        """Symbol values from the call's input tensors (checked for consistency)."""
        from .runtime.errors import ArgumentError

        sig = self.signature
        inputs = [p for i, p in enumerate(sig.params) if i not in self.out_idx]
        if len(args) != len(inputs):
            outs = [sig.params[i].name for i in self.out_idx]
            raise ArgumentError(
                f"{self.kernel_name}: expected {len(inputs)} argument(s) "
                f"({', '.join(p.name for p in inputs)})"
                + (f"; the output(s) {outs} are allocated and returned (out_idx)" if outs else "")
                + f", got {len(args)}")
        bindings: Dict[str, int] = {}
        source: Dict[str, str] = {}
        deferred = []
        for p, a in zip(inputs, args):
            if p.kind != "tensor":
                continue
            shape = _shape_of(a)
            ann = p.annotation
            if shape is None:
                raise ArgumentError(f"{self.kernel_name}: argument {p.name}: expected a tensor "
                                    f"{ann!r}, got {type(a).__name__}")
            if len(shape) != ann.ndim:
                raise ArgumentError(f"{self.kernel_name}: argument {p.name}: expected a "
                                    f"{ann.ndim}-d tensor {ann!r}, got shape {list(shape)}")
            for d, (dim, actual) in enumerate(zip(ann.shape, shape)):
                if isinstance(dim, Symbol):
                    if dim.name in bindings and bindings[dim.name] != actual:
                        raise ArgumentError(
                            f"{self.kernel_name}: argument {p.name}: dimension {d} is {actual} "
                            f"but symbol {dim.name} is {bindings[dim.name]} from "
                            f"{source[dim.name]}")
                    bindings[dim.name] = actual
                    source[dim.name] = f"{p.name}.shape[{d}]"
                elif isinstance(dim, SymExpr):
                    deferred.append((p, d, dim, actual))
                elif dim != actual:
                    raise ArgumentError(f"{self.kernel_name}: argument {p.name}: dimension {d} "
                                        f"is {actual}, expected {dim} ({ann!r})")
        missing = [s for s in sig.symbols if s not in bindings]
        if missing:
            raise ArgumentError(f"{self.kernel_name}: symbolic dimension(s) {missing} appear "
                                "only in outputs, so no input tensor gives their value")
        for p, d, dim, actual in deferred:
            if dim.evaluate(bindings) != actual:
                raise ArgumentError(
                    f"{self.kernel_name}: argument {p.name}: dimension {d} is {actual}, but "
                    f"{dim!r} = {dim.evaluate(bindings)} with {bindings}")
        return bindings

    # -- tracing and compiling -------------------------------------------------
    def trace(self, *, config: Optional[Dict[str, Any]] = None, **kwargs) -> TracedKernel:
        """The traced kernel for these symbol values / configuration (memoised)."""
        bindings, cfg = self._split_kwargs(config, kwargs)
        return self._trace(bindings, cfg)

    def _trace(self, bindings, cfg) -> TracedKernel:
        key = _spec_key(bindings, cfg)
        with self._lock:
            traced = self._traces.get(key)
            if traced is None:
                traced = trace(self.signature, bindings, cfg, name=self.kernel_name)
                self._traces[key] = traced
            return traced

    def ir(self, *, config: Optional[Dict[str, Any]] = None, debug_info: bool = False,
           **kwargs) -> str:
        """The tile IR (MLIR text) of one specialisation: `fn.ir(M=256, block_M=64)`
        or `fn.ir(M=256, config={"block_M": 64})`. `debug_info=True` prints the
        source locations too."""
        traced = self.trace(config=config, **kwargs)
        return traced.text_with_locations if debug_info else traced.text

    def compile_entry(self, *, config: Optional[Dict[str, Any]] = None, **kwargs):
        """Like `compile`, but returns the `tilemega.cache.CacheEntry` (with the
        artifact's path and whether it came from memory, disk or a compile)."""
        bindings, cfg = self._split_kwargs(config, kwargs)
        return self._compile(bindings, cfg)

    def compile(self, *, config: Optional[Dict[str, Any]] = None, **kwargs):
        """`tilemega.compiler.CompiledModule` of one specialisation (cached).
        Raises `tilemega.CompileError` with MLIR's diagnostics, which point at
        the kernel's Python lines."""
        return self.compile_entry(config=config, **kwargs).compiled

    def _compile(self, bindings, cfg):
        from . import cache

        key = _spec_key(bindings, cfg)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                traced = self._trace(bindings, cfg)
                entry = cache.compile_cached(traced.text,
                                             compile_text=traced.text_with_locations,
                                             disk=self.use_disk_cache, **self.options)
                self._entries[key] = entry
            self.last_entry = entry
            return entry

    def get_kernel(self, bindings: Dict[str, int], config: Dict[str, Any]):
        """The loaded `tilemega.runtime.Artifact` of one specialisation."""
        key = _spec_key(bindings, config)
        with self._lock:
            art = self._artifacts.get(key)
            if art is None:
                from . import cache

                entry = self._compile(bindings, config)
                # Checked again here: the entry may come from the memo and
                # the disk may have changed since its hashes were checked.
                path = cache.verified_path(entry)
                if path is not None:
                    from .runtime import load_artifact
                    art = load_artifact(path)
                else:
                    art = entry.compiled.load()
                self._artifacts[key] = art
            return art

    # -- calling -----------------------------------------------------------------
    def prepare(self, args: Sequence[Any], kwargs: Dict[str, Any]):
        """(kernel artifact, full argument list, outputs) for a call; allocates
        the outputs named by out_idx."""
        sig = self.signature
        cfg_given = {}
        for k, v in kwargs.items():
            if k not in sig.config:
                raise TypeError(
                    f"{self.kernel_name}() got an unexpected keyword argument {k!r}; keyword "
                    f"arguments are its configuration parameters {list(sig.config) or '(none)'}"
                    "; symbolic dimensions come from the tensors' shapes")
            cfg_given[k] = v
        bindings = self.bind_shapes(args)
        cfg = sig.resolve_config(cfg_given)
        kernel = self.get_kernel(bindings, cfg)
        full, outputs = self._with_outputs(args, bindings)
        return kernel, full, outputs

    def _with_outputs(self, args, bindings):
        if not self.out_idx:
            return list(args), []
        try:
            import torch
        except ImportError:
            from .runtime.errors import RuntimeUnavailable
            raise RuntimeUnavailable(f"{self.kernel_name}: out_idx allocates its outputs with "
                                     "torch, which is not installed") from None
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        if device is None:
            from .runtime.errors import ArgumentError
            raise ArgumentError(f"{self.kernel_name}: out_idx needs a torch tensor among the "
                                "inputs to know the device of the outputs")
        full, outputs, it = [], [], iter(args)
        for i, p in enumerate(self.signature.params):
            if i in self.out_idx:
                t = torch.empty(p.annotation.resolve(bindings),
                                dtype=getattr(torch, p.annotation.dtype.name), device=device)
                outputs.append(t)
                full.append(t)
            else:
                full.append(next(it))
        return full, outputs

    def __call__(self, *args, stream=None, **kwargs):
        """Compile (cached) for these tensors' shapes and launch. Returns the
        out_idx outputs (one tensor, or a tuple), else None."""
        kernel, full, outputs = self.prepare(args, kwargs)
        kernel(*full, stream=stream)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def jit(fn=None, *, out_idx=None, chip: str = "sm_90a", opt_level: int = 3,
        features: str = "+ptx80", assemble: bool = True, name: Optional[str] = None,
        cache: bool = True, wgmma: Optional[bool] = None,
        wgmma_in_flight: Optional[bool] = None, tma: Optional[bool] = None):
    """Decorator: `@tilemega.jit` or `@tilemega.jit(out_idx=[-1], ...)`.

    Returns a `JitFunction`; see this module's docstring for tracing,
    specialisation per shape, caching and launching.
    """
    def wrap(f):
        return JitFunction(f, out_idx=out_idx, chip=chip, opt_level=opt_level,
                           features=features, assemble=assemble, name=name, cache=cache,
                           wgmma=wgmma, wgmma_in_flight=wgmma_in_flight, tma=tma)
    if fn is not None:
        if not callable(fn):
            raise TypeError(f"tilemega.jit decorates a function, got {type(fn).__name__}; "
                            "options are keyword arguments: @tilemega.jit(out_idx=[-1])")
        return wrap(fn)
    return wrap


class _CallableModule(types.ModuleType):
    """`import tilemega.jit` binds the attribute `tilemega.jit` to this module;
    calling it still means the decorator."""

    def __call__(self, *args, **kwargs):
        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
