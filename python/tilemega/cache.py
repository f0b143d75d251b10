"""The artifact cache of `tilemega.jit`: in-process memo plus an on-disk store.

An entry is keyed by the SHA-256 of

  - the kernel's tile IR text (printed without debug locations, so editing
    comments or moving the kernel in its file does not invalidate it),
  - the compile options (chip, opt level, PTX features, whether a cubin is
    assembled),
  - the tilemega version, the MLIR version and the `ptxas --version` string,
  - a fingerprint (size and mtime) of the native compiler library, so that a
    rebuilt compiler never serves artifacts of the old one.

and holds the artifact exactly as `CompiledModule.save` writes it
(NAME.json + NAME.ptx + NAME.cubin) plus `key.json` (the key's parts, the
IR, the compile time and the ptxas log). A hit rebuilds the CompiledModule
from these files without running the MLIR pipeline; `tilemega.runtime` can
load the folder directly.

Location: `$TILEMEGA_CACHE_DIR`, else `$XDG_CACHE_HOME/tilemega`, else
`~/.cache/tilemega`. Entries are written to a temporary folder and renamed
into place, so concurrent processes never see half an entry. Deleting the
folder is always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, Optional

ENV_CACHE_DIR = "TILEMEGA_CACHE_DIR"
KEY_FORMAT = 1

#: Counts of "memory_hit", "disk_hit" and "miss" (compiles) in this process.
stats: Counter = Counter()

_lock = threading.RLock()
_memory: Dict[str, "CacheEntry"] = {}
_ptxas_versions: Dict[tuple, str] = {}


def cache_dir() -> str:
    """The cache folder (not created here)."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tilemega")


def ptxas_version(path: Optional[str]) -> str:
    """`ptxas --version` (its last line) for the ptxas at `path`; "none" without one."""
    if not path:
        return "none"
    try:
        st = os.stat(path)
    except OSError:
        return "none"
    key = (path, st.st_mtime_ns, st.st_size)
    with _lock:
        if key not in _ptxas_versions:
            import subprocess
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.strip()
            except (OSError, subprocess.SubprocessError) as e:
                out = f"unknown ({e})"
            lines = [line for line in out.splitlines() if line.strip()]
            _ptxas_versions[key] = lines[-1] if lines else "unknown"
        return _ptxas_versions[key]


def compiler_build_id() -> str:
    """Size and mtime of the native compiler library (not loaded to read them)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mlir_libs")
    parts = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return "unknown"
    for n in names:
        if n.startswith(("libTileMegaPythonCAPI", "_site_initialize_0")) and ".so" in n:
            try:
                st = os.stat(os.path.join(folder, n))
            except OSError:
                continue
            parts.append(f"{n}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts) or "unknown"


def key_components(ir_text: str, *, chip: str, opt_level: int, features: str,
                   assemble: bool) -> Dict[str, Any]:
    from . import __version__
    from .compiler import MLIR_VERSION, find_ptxas

    return {
        "format": KEY_FORMAT,
        "ir": ir_text,
        "options": {"chip": chip, "opt_level": opt_level, "features": features,
                    "assemble": bool(assemble)},
        "tilemega": __version__,
        "mlir": MLIR_VERSION,
        "ptxas": ptxas_version(find_ptxas()) if assemble else "none",
        "compiler_build": compiler_build_id(),
    }


def make_key(components: Dict[str, Any]) -> str:
    blob = json.dumps(components, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class CacheEntry:
    """A compiled kernel and where it came from."""
    key: str
    compiled: Any                 # tilemega.compiler.CompiledModule
    path: Optional[str]           # the artifact JSON on disk (None without a disk cache)
    source: str                   # "memory", "disk" or "compiled"
    seconds: float                # time to get it (compile, or load from disk)
    compile_seconds: Optional[float] = None   # the original compile's time


def _entry_dir(root: str, key: str) -> str:
    return os.path.join(root, "artifacts", key[:2], key)


def _load(directory: str, key: str):
    """(CompiledModule, json path, info) from a cache folder, or None."""
    from .compiler import CompiledModule

    try:
        with open(os.path.join(directory, "key.json")) as f:
            info = json.load(f)
        if info.get("key") != key:
            return None
        name = info["artifact"]
        json_path = os.path.join(directory, f"{name}.json")
        with open(json_path) as f:
            meta = json.load(f)
        with open(os.path.join(directory, meta["ptx"])) as f:
            ptx = f.read()
        cubin = None
        if meta.get("cubin"):
            with open(os.path.join(directory, meta["cubin"]), "rb") as f:
                cubin = f.read()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    compiled = CompiledModule(name=meta["name"], chip=meta.get("chip"), ptx=ptx, cubin=cubin,
                              kernels=meta["kernels"], ptxas_log=info.get("ptxas_log", ""),
                              toolchain=meta.get("toolchain") or {})
    return compiled, json_path, info


def _store(root: str, key: str, compiled, components, seconds: float) -> Optional[str]:
    """Writes the entry; returns the artifact JSON path (None if not writable)."""
    final = _entry_dir(root, key)
    parent = os.path.dirname(final)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    except OSError:
        return None
    try:
        compiled.save(tmp)
        info = {"key": key, "artifact": compiled.name, "components": components,
                "compile_seconds": seconds, "ptxas_log": compiled.ptxas_log,
                "created": time.time()}
        with open(os.path.join(tmp, "key.json"), "w") as f:
            json.dump(info, f, indent=1)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process stored it first, or a broken entry is in the way.
            if _load(final, key) is None:
                shutil.rmtree(final, ignore_errors=True)
                try:
                    os.rename(tmp, final)
                except OSError:
                    pass
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    path = os.path.join(final, f"{compiled.name}.json")
    return path if os.path.isfile(path) else None


def compile_cached(ir_text: str, *, compile_text: Optional[str] = None,
                   chip: str = "sm_90a", opt_level: int = 3, features: str = "+ptx80",
                   assemble: bool = True, name: Optional[str] = None,
                   disk: bool = True) -> CacheEntry:
    """The CompiledModule for `ir_text`: from the process memo, the disk cache,
    or `tilemega.compiler.compile(compile_text or ir_text, ...)`.

    `compile_text` is what is compiled on a miss (the same IR with debug
    locations, so that diagnostics name the user's lines); the key uses
    `ir_text`. Compile failures (CompileError) are not cached.
    """
    from . import compiler

    start = time.perf_counter()
    components = key_components(ir_text, chip=chip, opt_level=opt_level, features=features,
                                assemble=assemble)
    if name is not None:
        components["name"] = name
    key = make_key(components)
    root = cache_dir() if disk else None
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            path = hit.path
            if root is not None and path is None:   # memoised without the disk cache
                path = _store(root, key, hit.compiled, components, hit.compile_seconds or 0.0)
                hit.path = path
            stats["memory_hit"] += 1
            return CacheEntry(key, hit.compiled, path if disk else None, "memory",
                              time.perf_counter() - start, hit.compile_seconds)

    if root is not None:
        loaded = _load(_entry_dir(root, key), key)
        if loaded is not None:
            compiled, path, info = loaded
            entry = CacheEntry(key, compiled, path, "disk", time.perf_counter() - start,
                               info.get("compile_seconds"))
            stats["disk_hit"] += 1
            with _lock:
                _memory[key] = entry
            return entry

    t0 = time.perf_counter()
    compiled = compiler.compile(compile_text or ir_text, chip, name=name, opt_level=opt_level,
                                features=features, assemble=assemble)
    seconds = time.perf_counter() - t0
    stats["miss"] += 1
    path = _store(root, key, compiled, components, seconds) if root is not None else None
    entry = CacheEntry(key, compiled, path, "compiled", time.perf_counter() - start, seconds)
    with _lock:
        _memory[key] = entry
    return entry


def clear_memory():
    """Forget the in-process memo (the disk cache stays)."""
    with _lock:
        _memory.clear()


def clear(directory: Optional[str] = None):
    """Delete the on-disk cache (artifacts and autotuning results) and the memo."""
    clear_memory()
    shutil.rmtree(directory or cache_dir(), ignore_errors=True)
