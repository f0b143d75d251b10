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
(NAME.json + NAME.ptx + NAME.cubin), `key.json` (the key's parts, the IR,
the compile time and the ptxas log) and `content.json`, the SHA-256 of each
of those files. A hit rebuilds the CompiledModule from these files without
running the MLIR pipeline; `tilemega.runtime` can load the folder directly.

**Integrity.** A hit reads every file of the entry, checks it against
`content.json`, and only then parses anything. A missing or unlisted file, a
hash mismatch, truncated JSON or any other unreadable part makes the entry
corrupt: `CacheWarning` names the entry and what is wrong, the kernel is
recompiled and the entry replaced. A corrupt entry is never loaded. Entries
without `content.json` (written before it existed, format 1) have other keys
and are never looked up; one that lost its `content.json` is corrupt.
`jit` checks the files once more just before the runtime reads them, since
the in-process memo may be older than the disk.

Location: `$TILEMEGA_CACHE_DIR`, else `$XDG_CACHE_HOME/tilemega`, else
`~/.cache/tilemega`. Entries are written to a temporary folder and renamed
into place, so concurrent processes never see half an entry; the hashes
catch what a crash or a full disk leaves behind. Deleting the folder is
always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

ENV_CACHE_DIR = "TILEMEGA_CACHE_DIR"
# 2: entries carry content.json. Part of the key, so format-1 entries (no
# hashes to check) are never looked up.
KEY_FORMAT = 2
CONTENT_FILE = "content.json"
KEY_FILE = "key.json"

#: Counts of "memory_hit", "disk_hit", "miss" (compiles) and "corrupt"
#: (entries found damaged and replaced) in this process.
stats: Counter = Counter()


class CacheWarning(UserWarning):
    """A cache entry or tuning record on disk was damaged and is being
    rebuilt; the message names the file and what is wrong."""


class CorruptEntry(Exception):
    """Raised by `_load` with what is wrong with an entry folder."""

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
                   assemble: bool, wgmma: bool = False,
                   wgmma_in_flight: bool = False, tma: bool = False) -> Dict[str, Any]:
    from . import __version__
    from .compiler import MLIR_VERSION, find_ptxas

    options = {"chip": chip, "opt_level": opt_level, "features": features,
               "assemble": bool(assemble)}
    if wgmma:                   # keys of mma.sync-only compiles stay as they were
        options["wgmma"] = True
    if wgmma_in_flight:
        options["wgmma_in_flight"] = True
    if tma:
        options["tma"] = True
    return {
        "format": KEY_FORMAT,
        "ir": ir_text,
        "options": options,
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
    content: Optional[Dict[str, str]] = None  # file name -> SHA-256 of the entry on disk
    components: Optional[Dict[str, Any]] = field(default=None, repr=False)  # of the key


def _entry_dir(root: str, key: str) -> str:
    return os.path.join(root, "artifacts", key[:2], key)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_verified(directory: str):
    """(file name -> bytes, file name -> SHA-256) of every file `content.json`
    lists, each checked against its hash. Raises CorruptEntry naming the
    first problem."""
    try:
        with open(os.path.join(directory, CONTENT_FILE), "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        raise CorruptEntry(f"{CONTENT_FILE} is missing (no content hash)") from None
    except (OSError, ValueError) as e:
        raise CorruptEntry(f"{CONTENT_FILE} is unreadable: {e}") from None
    hashes = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not isinstance(hashes, dict) or not hashes:
        raise CorruptEntry(f"{CONTENT_FILE} has no 'sha256' table of files")
    files = {}
    for name, expected in hashes.items():
        # Plain names only: the table must not reach outside the entry.
        if not isinstance(expected, str) or os.path.basename(name) != name \
                or name in ("", ".", "..", CONTENT_FILE):
            raise CorruptEntry(f"{CONTENT_FILE}: bad entry {name!r}: {expected!r}")
        try:
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise CorruptEntry(f"{name} is missing") from None
        except OSError as e:
            raise CorruptEntry(f"{name} is unreadable: {e}") from None
        actual = _sha256(data)
        if actual != expected:
            raise CorruptEntry(f"{name}: SHA-256 is {actual}, {CONTENT_FILE} says {expected} "
                               f"({len(data)} bytes)")
        files[name] = data
    return files, hashes


def _parse_json(files: Dict[str, bytes], name: str, what: str) -> Dict[str, Any]:
    if name not in files:
        raise CorruptEntry(f"{what} {name} is not listed in {CONTENT_FILE}")
    try:
        value = json.loads(files[name])
    except ValueError as e:
        raise CorruptEntry(f"{name} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise CorruptEntry(f"{name} is not a JSON object")
    return value


def _load(directory: str, key: str):
    """(CompiledModule, json path, key info, content hashes) from a cache
    folder; None when there is no entry; CorruptEntry when it is damaged.
    Nothing is parsed before its hash is checked."""
    from .compiler import CompiledModule

    if not os.path.isdir(directory):
        return None
    files, content = _read_verified(directory)
    info = _parse_json(files, KEY_FILE, "the key file")
    if info.get("key") != key:
        raise CorruptEntry(f"{KEY_FILE} is for key {info.get('key')!r}, not this folder's")
    name = info.get("artifact")
    if not isinstance(name, str):
        raise CorruptEntry(f"{KEY_FILE} has no 'artifact' name")
    json_name = f"{name}.json"
    meta = _parse_json(files, json_name, "the artifact metadata")
    try:
        ptx = files[meta["ptx"]].decode()
        cubin = files[meta["cubin"]] if meta.get("cubin") else None
        compiled = CompiledModule(name=meta["name"], chip=meta.get("chip"), ptx=ptx,
                                  cubin=cubin, kernels=meta["kernels"],
                                  ptxas_log=info.get("ptxas_log", ""),
                                  toolchain=meta.get("toolchain") or {})
    except KeyError as e:
        raise CorruptEntry(f"{json_name}: no field {e} or its file is not listed in "
                           f"{CONTENT_FILE}") from None
    except (TypeError, UnicodeDecodeError) as e:
        raise CorruptEntry(f"{json_name}: {e}") from None
    return compiled, os.path.join(directory, json_name), info, content


def _discard(directory: str):
    """Removes a damaged entry: renamed away first, so that no reader sees a
    half-deleted folder under the entry's name."""
    trash = f"{directory}.corrupt-{os.urandom(6).hex()}"
    try:
        os.rename(directory, trash)
    except OSError:
        return      # gone already, or another process replaced it
    shutil.rmtree(trash, ignore_errors=True)


def _warn_corrupt(directory: str, problem: str, action: str):
    stats["corrupt"] += 1
    warnings.warn(f"tilemega cache: corrupt entry {directory}: {problem}; {action}",
                  CacheWarning, stacklevel=3)


def _write_content(directory: str) -> Dict[str, str]:
    """Hashes every file in `directory` into its content.json."""
    content = {}
    for name in sorted(os.listdir(directory)):
        if name != CONTENT_FILE:
            with open(os.path.join(directory, name), "rb") as f:
                content[name] = _sha256(f.read())
    with open(os.path.join(directory, CONTENT_FILE), "w") as f:
        json.dump({"format": KEY_FORMAT, "sha256": content}, f, indent=1)
    return content


def _store(root: str, key: str, compiled, components, seconds: float):
    """Writes the entry; returns (artifact JSON path, content hashes), or
    (None, None) when the cache is not writable."""
    final = _entry_dir(root, key)
    parent = os.path.dirname(final)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    except OSError:
        return None, None
    try:
        compiled.save(tmp)
        info = {"key": key, "artifact": compiled.name, "components": components,
                "compile_seconds": seconds, "ptxas_log": compiled.ptxas_log,
                "created": time.time()}
        with open(os.path.join(tmp, KEY_FILE), "w") as f:
            json.dump(info, f, indent=1)
        content = _write_content(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process stored it first, or a damaged entry is in the way.
            try:
                existing = _load(final, key)
            except CorruptEntry:
                existing = None
            if existing is not None:
                content = existing[3]
            else:
                _discard(final)
                try:
                    os.rename(tmp, final)
                except OSError:
                    return None, None
    except OSError:
        return None, None
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    path = os.path.join(final, f"{compiled.name}.json")
    return (path, content) if os.path.isfile(path) else (None, None)


def verified_path(entry: CacheEntry) -> Optional[str]:
    """The entry's artifact JSON path, after checking its files on disk
    against their hashes once more (the memo may be older than the disk),
    just before the runtime reads them. Another process's valid entry for
    the key is fine; a damaged one is rewritten from the in-memory
    CompiledModule, itself verified, with a CacheWarning. None when there is
    no disk copy, or it cannot be rewritten (then load `entry.compiled`)."""
    with _lock:
        current = _memory.get(entry.key) or entry
        path = current.path
    if path is None:
        return None
    directory = os.path.dirname(path)
    try:
        content = _read_verified(directory)[1]
    except CorruptEntry as e:
        _warn_corrupt(directory, str(e), "rewriting it from the verified copy in memory")
        _discard(directory)
        root = os.path.dirname(os.path.dirname(os.path.dirname(directory)))
        path, content = _store(root, entry.key, entry.compiled, current.components or {},
                               current.compile_seconds or 0.0)
    with _lock:
        for e in {id(entry): entry, id(current): current}.values():
            e.path, e.content = path, content
    return path


def compile_cached(ir_text: str, *, compile_text: Optional[str] = None,
                   chip: str = "sm_90a", opt_level: int = 3, features: str = "+ptx80",
                   assemble: bool = True, name: Optional[str] = None,
                   disk: bool = True, wgmma: Optional[bool] = None,
                   wgmma_in_flight: Optional[bool] = None,
                   tma: Optional[bool] = None) -> CacheEntry:
    """The CompiledModule for `ir_text`: from the process memo, the disk cache,
    or `tilemega.compiler.compile(compile_text or ir_text, ...)`.

    `compile_text` is what is compiled on a miss (the same IR with debug
    locations, so that diagnostics name the user's lines); the key uses
    `ir_text`. Compile failures (CompileError) are not cached. A damaged
    disk entry is recompiled and replaced, with a CacheWarning.
    """
    from . import compiler

    start = time.perf_counter()
    wgmma = compiler.resolve_wgmma(wgmma, chip)   # the key names what is compiled
    wgmma_in_flight = compiler.resolve_wgmma_in_flight(wgmma_in_flight, wgmma)
    tma = compiler.resolve_tma(tma, chip)
    components = key_components(ir_text, chip=chip, opt_level=opt_level, features=features,
                                assemble=assemble, wgmma=wgmma,
                                wgmma_in_flight=wgmma_in_flight, tma=tma)
    if name is not None:
        components["name"] = name
    key = make_key(components)
    root = cache_dir() if disk else None
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            if root is not None and hit.path is None:   # memoised without the disk cache
                hit.path, hit.content = _store(root, key, hit.compiled, components,
                                               hit.compile_seconds or 0.0)
            stats["memory_hit"] += 1
            return CacheEntry(key, hit.compiled, hit.path if disk else None, "memory",
                              time.perf_counter() - start, hit.compile_seconds,
                              hit.content if disk else None, components)

    if root is not None:
        directory = _entry_dir(root, key)
        try:
            loaded = _load(directory, key)
        except CorruptEntry as e:
            _warn_corrupt(directory, str(e), "recompiling and replacing it")
            _discard(directory)
            loaded = None
        if loaded is not None:
            compiled, path, info, content = loaded
            entry = CacheEntry(key, compiled, path, "disk", time.perf_counter() - start,
                               info.get("compile_seconds"), content, components)
            stats["disk_hit"] += 1
            with _lock:
                _memory[key] = entry
            return entry

    t0 = time.perf_counter()
    compiled = compiler.compile(compile_text or ir_text, chip, name=name, opt_level=opt_level,
                                features=features, assemble=assemble, wgmma=wgmma,
                                wgmma_in_flight=wgmma_in_flight, tma=tma)
    seconds = time.perf_counter() - t0
    stats["miss"] += 1
    path, content = (_store(root, key, compiled, components, seconds) if root is not None
                     else (None, None))
    entry = CacheEntry(key, compiled, path, "compiled", time.perf_counter() - start, seconds,
                       content, components)
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
