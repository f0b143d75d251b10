"""`@tilemega.autotune`: pick the fastest configuration of a jit kernel.

    @tilemega.autotune(configs=[{"block_M": 64, "block_N": 128},
                                {"block_M": 128, "block_N": 64}],
                       key=["M", "N"])
    @tilemega.jit(out_idx=[-1])
    def matmul(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               C: T.Tensor((M, N), "float32"), *, block_M: int, block_N: int):
        ...

    c = matmul(a, b)

The configurations are values of the kernel's keyword-only parameters. The
first call for a key (the values of the `key` symbols, or scalar arguments,
plus the GPU's name) compiles every configuration (through the artifact
cache), times each on the GPU with CUDA events (`warmup` launches, then the
median of `rep` timed launches), prints a progress line per configuration to
stderr, and stores the best in `autotune/<kernel>-<hash>.json` in the cache
folder; later calls, in this process or another, reuse it. A configuration
that does not compile (a diagnostic) or does not launch is skipped with a
note; if none works the error says why each failed.

The record is shared by every process tuning the kernel: a result is saved
under an exclusive lock on `<record>.lock` (fcntl.flock), re-reading the
record under it and merging, then writing a temporary file renamed over the
record, so processes tuning other keys at the same time lose nothing and
readers never see half a file. A record that is not valid JSON or not
shaped like one gives a `tilemega.cache.CacheWarning` naming it and is
rebuilt from the results saved afterwards.

Timing runs the kernel on the call's own tensors: kernels that accumulate
into an argument (atomics) should name it in `reset_to_zero`, which zeroes
it before every launch (outside the timed region) and before the real one.

Tuning needs a CUDA GPU, torch and cuda-python; without them the call
raises `tilemega.runtime.RuntimeUnavailable`. Compile-only users pick a
configuration themselves: `fn.compile(config={...}, M=...)`.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import types
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

from .jit import JitFunction

__all__ = ["autotune", "Autotuner"]


def _format_config(config: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) or "(defaults)"


def _summary(error: BaseException) -> str:
    """One line for a failed config: MLIR's first `error:` line, else the first."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return f"{type(error).__name__}: {line}"
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _gpu_unavailable_reason() -> Optional[str]:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    try:
        import cuda.bindings.driver as _driver
    except ImportError:
        return "cuda-python (cuda.bindings) is not installed"
    del _driver
    return None


def benchmark(launch: Callable[[], None], *, warmup: int = 3, rep: int = 10,
              before_each: Optional[Callable[[], None]] = None) -> List[float]:
    """Times `launch()` on the current CUDA stream with CUDA events.

    Runs `warmup` untimed launches, then `rep` launches each between a pair
    of events; `before_each` (e.g. zeroing an accumulator) runs before every
    launch, outside the timed region. Returns the `rep` times in ms.
    """
    import torch

    for _ in range(warmup):
        if before_each is not None:
            before_each()
        launch()
    torch.cuda.synchronize()
    events = []
    for _ in range(rep):
        if before_each is not None:
            before_each()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


class Autotuner:
    """A `JitFunction` with a set of configurations to choose from; see the
    module docstring. Call it like the jit function (without the
    configuration); `best_config(*args)` tunes (or looks up) without the
    final launch; `compile(config=..., **shapes)` and `ir(...)` pass through."""

    def __init__(self, fn: JitFunction, configs: Sequence[Dict[str, Any]],
                 key: Sequence[str] = (), *, warmup: int = 3, rep: int = 10,
                 reset_to_zero: Sequence[str] = (), cache: bool = True,
                 verbose: bool = True):
        if not isinstance(fn, JitFunction):
            raise TypeError("tilemega.autotune decorates a @tilemega.jit function: put "
                            "@tilemega.autotune(...) above @tilemega.jit")
        self.fn = fn
        sig = fn.signature
        configs = [dict(c) for c in configs]
        if not configs:
            raise ValueError("tilemega.autotune needs at least one config")
        for i, c in enumerate(configs):
            unknown = [k for k in c if k not in sig.config]
            if unknown:
                raise TypeError(f"config {i} {c} names {unknown}, which are not keyword-only "
                                f"parameters of {fn.kernel_name} ({list(sig.config)})")
        self.configs = configs
        scalars = [p.name for p in sig.params if p.kind == "scalar"]
        self.key = list(key)
        for k in self.key:
            if k not in sig.symbols and k not in scalars:
                raise TypeError(f"autotune key {k!r} is neither a symbolic dimension "
                                f"({list(sig.symbols)}) nor a scalar parameter ({scalars}) of "
                                f"{fn.kernel_name}")
        params = [p.name for p in sig.params]
        for name in reset_to_zero:
            if name not in params:
                raise TypeError(f"reset_to_zero names {name!r}, not a parameter of "
                                f"{fn.kernel_name} ({params})")
        self.reset_to_zero = list(reset_to_zero)
        if warmup < 0 or rep < 1:
            raise ValueError(f"warmup must be >= 0 and rep >= 1, got {warmup}, {rep}")
        self.warmup, self.rep = warmup, rep
        self.use_disk = cache
        self.verbose = verbose
        self._best: Dict[str, Dict[str, Any]] = {}    # key string -> record
        self._lock = threading.RLock()
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", fn.kernel_name)
        self.__wrapped__ = fn

    def __repr__(self):
        return f"<tilemega.autotune of {self.fn!r}, {len(self.configs)} configs>"

    # -- pass-throughs for compile-only use ------------------------------------
    def compile(self, *, config: Optional[Dict[str, Any]] = None, **kwargs):
        return self.fn.compile(config=config, **kwargs)

    def ir(self, *, config: Optional[Dict[str, Any]] = None, **kwargs):
        return self.fn.ir(config=config, **kwargs)

    # -- the tuning record ---------------------------------------------------------
    def results_path(self) -> str:
        """The JSON file of this kernel's tuning results in the cache folder."""
        from . import __version__
        from .cache import cache_dir

        fn = self.fn.fn
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = fn.__code__.co_code.hex()
        ident = json.dumps({"module": fn.__module__, "qualname": fn.__qualname__,
                            "source": source, "configs": repr(self.configs),
                            "options": self.fn.options, "tilemega": __version__,
                            "reset": self.reset_to_zero}, sort_keys=True)
        digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
        return os.path.join(cache_dir(), "autotune", f"{self.fn.kernel_name}-{digest}.json")

    def _read_results(self) -> Dict[str, Any]:
        """The saved results (key string -> record); {} when there is no
        record, with a CacheWarning when it is damaged (it is rewritten
        without the damaged parts at the next save)."""
        path = self.results_path()
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            self._warn_corrupt(path, f"unreadable: {e}")
            return {}
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, dict):
            self._warn_corrupt(path, "no 'results' object")
            return {}
        bad = [k for k, r in results.items() if not isinstance(r, dict)
               or not isinstance(r.get("config"), dict)]
        if bad:
            self._warn_corrupt(path, f"results without a config: {bad}")
        return {k: r for k, r in results.items() if k not in bad}

    def _warn_corrupt(self, path: str, problem: str):
        from .cache import CacheWarning

        warnings.warn(f"tilemega.autotune {self.fn.kernel_name}: the tuning record {path} is "
                      f"corrupt ({problem}); it is rebuilt as keys are tuned", CacheWarning,
                      stacklevel=4)

    def _write_result(self, key: str, record: Dict[str, Any]):
        """Adds one result to the record on disk. Read-merge-write under an
        exclusive lock on a sidecar file (the record itself is replaced, so
        it cannot carry the lock); the write is a rename, atomic for readers
        that take no lock."""
        path = self.results_path()
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, exist_ok=True)
            with open(path + ".lock", "a") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)    # released when closed
                results = self._read_results()
                results[key] = record
                fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
                try:
                    with os.fdopen(fd, "w") as f:
                        json.dump({"kernel": self.fn.kernel_name, "configs": self.configs,
                                   "results": results}, f, indent=1)
                    os.replace(tmp, path)
                except BaseException:
                    os.unlink(tmp)
                    raise
        except OSError as e:
            self._note(f"could not save the tuning result to {path}: {e}")

    def _note(self, message: str):
        if self.verbose:
            print(f"tilemega.autotune {self.fn.kernel_name}: {message}", file=sys.stderr,
                  flush=True)

    # -- tuning -------------------------------------------------------------------
    def _require_gpu(self):
        reason = _gpu_unavailable_reason()
        if reason is not None:
            from .runtime.errors import RuntimeUnavailable
            raise RuntimeUnavailable(
                f"tilemega.autotune({self.fn.kernel_name}) times its configurations on a CUDA "
                f"GPU, but {reason}. To compile without a GPU, choose a configuration: "
                f"{self.fn.kernel_name}.compile(config={self.configs[0]!r}, ...)")

    def _device_name(self, args) -> str:
        import torch
        device = next((a.device for a in args if isinstance(a, torch.Tensor)
                       and a.device.type == "cuda"), None)
        index = device.index if device is not None and device.index is not None \
            else torch.cuda.current_device()
        return torch.cuda.get_device_name(index)

    def _key_values(self, args, bindings) -> Dict[str, Any]:
        sig = self.fn.signature
        inputs = [p for i, p in enumerate(sig.params) if i not in self.fn.out_idx]
        scalars = {p.name: a for p, a in zip(inputs, args) if p.kind == "scalar"}
        return {k: bindings[k] if k in bindings else scalars.get(k) for k in self.key}

    def _time_config(self, config, kernel, full_args, reset) -> List[float]:
        """The `rep` times (ms) of one configuration (tests replace this)."""
        return benchmark(lambda: kernel(*full_args), warmup=self.warmup, rep=self.rep,
                         before_each=reset)

    def best_config(self, *args) -> Dict[str, Any]:
        """The best configuration for these arguments: from memory, the disk
        record, or by tuning now."""
        self._require_gpu()
        bindings = self.fn.bind_shapes(args)
        keyvals = self._key_values(args, bindings)
        device = self._device_name(args)
        key = json.dumps({"key": keyvals, "device": device}, sort_keys=True, default=str)
        with self._lock:
            record = self._best.get(key)
            if record is None and self.use_disk:
                record = self._read_results().get(key)
                if record is not None and record.get("config") not in self.configs:
                    record = None
            if record is None:
                record = self._tune(args, bindings, keyvals, device)
                if self.use_disk:
                    self._write_result(key, record)
            self._best[key] = record
            return dict(record["config"])

    def _tune(self, args, bindings, keyvals, device) -> Dict[str, Any]:
        from .compiler import CompileError
        from .language.trace import TileLangError
        from .runtime.errors import ArgumentError, LaunchError

        sig = self.fn.signature
        n = len(self.configs)
        desc = ", ".join(f"{k}={v}" for k, v in keyvals.items())
        self._note(f"tuning {n} configs" + (f" for {desc}" if desc else "") + f" on {device}")
        full_args = None
        reset = None
        timings, failures = [], []
        width = len(str(n))
        for i, config in enumerate(self.configs, 1):
            label = _format_config(config)
            bar = "#" * (20 * i // n) + "-" * (20 - 20 * i // n)
            prefix = f"[{i:>{width}}/{n}] [{bar}] {label} ..."
            try:
                cfg = sig.resolve_config(config)
                t0 = time.perf_counter()
                kernel = self.fn.get_kernel(bindings, cfg)
                compile_s = time.perf_counter() - t0
            except (CompileError, TileLangError, TypeError, AssertionError) as e:
                why = _summary(e)
                failures.append((config, why))
                self._progress(f"{prefix} skipped: does not compile: {why}")
                continue
            if full_args is None:
                full_args, _ = self.fn._with_outputs(args, bindings)
                reset = self._make_reset(full_args)
            try:
                times = self._time_config(config, kernel, full_args, reset)
            except (LaunchError, ArgumentError) as e:
                why = _summary(e)
                failures.append((config, why))
                self._progress(f"{prefix} skipped: launch failed: {why}")
                continue
            ms = statistics.median(times)
            timings.append({"config": config, "ms": ms, "compile_s": round(compile_s, 4)})
            self._progress(f"{prefix} {ms:.3f} ms")
        if not timings:
            detail = "\n".join(f"  {_format_config(c)}: {why}" for c, why in failures)
            raise RuntimeError(f"tilemega.autotune({self.fn.kernel_name}): no configuration "
                               f"worked:\n{detail}")
        best = min(timings, key=lambda t: t["ms"])
        self._note(f"best: {_format_config(best['config'])} ({best['ms']:.3f} ms)")
        return {"config": best["config"], "ms": best["ms"], "device": device,
                "key": keyvals, "timings": timings,
                "skipped": [{"config": c, "error": why} for c, why in failures],
                "warmup": self.warmup, "rep": self.rep, "time": time.time()}

    def _progress(self, line: str):
        if self.verbose:
            print(line, file=sys.stderr, flush=True)

    def _make_reset(self, full_args):
        if not self.reset_to_zero:
            return None
        names = [p.name for p in self.fn.signature.params]
        tensors = [full_args[names.index(n)] for n in self.reset_to_zero]

        def reset():
            for t in tensors:
                t.zero_()
        return reset

    def __call__(self, *args, stream=None, **kwargs):
        """Tune (first call for a key) and launch with the best configuration."""
        if kwargs:
            raise TypeError(f"{self.fn.kernel_name}: the autotuner chooses the configuration; "
                            f"got keyword arguments {sorted(kwargs)}")
        config = self.best_config(*args)
        kernel, full, outputs = self.fn.prepare(args, config)
        if self.reset_to_zero:
            self._make_reset(full)()
        kernel(*full, stream=stream)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def autotune(configs: Sequence[Dict[str, Any]], key: Sequence[str] = (), *, warmup: int = 3,
             rep: int = 10, reset_to_zero: Sequence[str] = (), cache: bool = True,
             verbose: bool = True):
    """Decorator over a `@tilemega.jit` function; see this module's docstring.

    configs: dicts of keyword-only parameter values. key: symbolic dimensions
    (or scalar parameters) whose values select a tuning result. warmup / rep:
    untimed and timed launches per config (the median is compared).
    reset_to_zero: parameters zeroed before every launch. cache: keep results
    on disk. verbose: print progress to stderr.
    """
    def wrap(fn):
        return Autotuner(fn, configs, key, warmup=warmup, rep=rep,
                         reset_to_zero=reset_to_zero, cache=cache, verbose=verbose)
    return wrap


class _CallableModule(types.ModuleType):
    """`import tilemega.autotune` binds the attribute `tilemega.autotune` to this
    module; calling it still means the decorator."""

    def __call__(self, *args, **kwargs):
        return autotune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
