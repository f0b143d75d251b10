"""`tilemega.compile`: tile IR in, a launchable artifact out.

Runs the pipeline registered in C++ (`tilemega-tile-to-ptx-pipeline`, the same
one `tilemega-opt` runs) on a copy of the module, pulls the PTX out of the
resulting `gpu.binary`, assembles a cubin with ptxas when it is installed, and
gathers the launch metadata the lowering recorded in `tilemega.kernels`. The
result saves as the artifact format of docs/artifact-format.md, which the
compiler-free `tilemega.runtime` loads.
"""

from __future__ import annotations

import functools
import json
import os
import re
import warnings
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import __version__

MLIR_VERSION = "22.1.8"
PIPELINE = "tilemega-tile-to-ptx-pipeline"


class CompileError(RuntimeError):
    """The pipeline rejected the module; the message carries MLIR's
    diagnostics and a `tilemega-opt` command that reproduces the failure."""


class CompileWarning(UserWarning):
    """A compiler warning, e.g. a 16-bit gemm that cannot use tensor cores;
    the message starts with the source location."""


@functools.lru_cache(maxsize=None)
def ptxas_version(ptxas: str) -> str:
    """`ptxas --version`'s release and build ("13.0, V13.0.88"), or "unknown"."""
    try:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(r"release (\S+?),? (V\S+)", out)
    return f"{found.group(1)}, {found.group(2)}" if found else "unknown"


def find_ptxas() -> Optional[str]:
    """ptxas from PATH or the usual CUDA install, or None."""
    found = shutil.which("ptxas")
    if found:
        return found
    for candidate in ("/usr/local/cuda/bin/ptxas",):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class CompiledModule:
    """What `compile` produced: PTX, an optional cubin, and metadata."""

    name: str
    chip: str
    ptx: str
    cubin: Optional[bytes]
    kernels: List[Dict[str, Any]]
    ptxas_log: str = ""
    toolchain: Dict[str, str] = field(default_factory=dict)
    _loaded: Any = field(default=None, repr=False)

    @property
    def metadata(self) -> Dict[str, Any]:
        """The artifact JSON (docs/artifact-format.md, version 1)."""
        return {
            "format": "tilemega.artifact",
            "version": 1,
            "name": self.name,
            "chip": self.chip,
            "ptx": f"{self.name}.ptx",
            "cubin": f"{self.name}.cubin" if self.cubin is not None else None,
            "toolchain": self.toolchain,
            "kernels": self.kernels,
        }

    def save(self, directory: str) -> str:
        """Writes NAME.json, NAME.ptx and NAME.cubin into `directory`;
        returns the JSON path."""
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"{self.name}.ptx"), "w") as f:
            f.write(self.ptx)
        if self.cubin is not None:
            with open(os.path.join(directory, f"{self.name}.cubin"), "wb") as f:
                f.write(self.cubin)
        path = os.path.join(directory, f"{self.name}.json")
        with open(path, "w") as f:
            json.dump(self.metadata, f, indent=2)
            f.write("\n")
        return path

    def load(self, directory: Optional[str] = None):
        """Saves (to a temporary folder unless given) and loads the artifact
        with `tilemega.runtime`; returns the launchable Artifact."""
        from .runtime import load_artifact

        if self._loaded is None or directory is not None:
            target = directory or tempfile.mkdtemp(prefix="tilemega-")
            self._loaded = load_artifact(self.save(target))
        return self._loaded

    def __call__(self, *args, stream=None):
        """Launches the only kernel (see tilemega.runtime.Artifact)."""
        return self.load()(*args, stream=stream)


def _attr_to_python(attr) -> Any:
    """Converts the builtin attributes of `tilemega.kernels` to Python."""
    from .ir import (ArrayAttr, BoolAttr, DenseI32ArrayAttr, DenseI64ArrayAttr,
                     DictAttr, FloatAttr, IntegerAttr, StringAttr)

    if isinstance(attr, DictAttr):
        return {attr[i].name: _attr_to_python(attr[i].attr)
                for i in range(len(attr))}
    if isinstance(attr, ArrayAttr):
        return [_attr_to_python(a) for a in attr]
    if isinstance(attr, (DenseI64ArrayAttr, DenseI32ArrayAttr)):
        return list(attr)
    if isinstance(attr, BoolAttr):
        return attr.value
    if isinstance(attr, FloatAttr):
        return attr.value
    if isinstance(attr, IntegerAttr):
        return attr.value
    if isinstance(attr, StringAttr):
        return attr.value
    raise TypeError(f"unexpected attribute in tilemega.kernels: {attr}")


def _expand_mega_tables(mega: dict) -> None:
    """Adds the per-entry lists of docs/mega.md (entries, waits, signals,
    aot, jit) to a persistent kernel's metadata, read back from the int32
    tables the compiler packed, so that the artifact shows exactly what the
    kernel runs."""
    data, at = mega["tables"], mega["table_sections"]
    n, workers = mega["num_entries"], mega["workers"]

    def section(name, count, start=0):
        return data[at[name] + start: at[name] + start + count]

    def ranges(offsets_name, values_name):
        offsets = section(offsets_name, n + 1)
        return [section(values_name, b - a, a) for a, b in zip(offsets, offsets[1:])]

    mega["entries"] = {"task": section("entry_task", n),
                       "instance": section("entry_instance", n)}
    mega["waits"] = ranges("wait_offsets", "waits")
    mega["signals"] = ranges("signal_offsets", "signals")
    aot_offsets = section("aot_offsets", workers + 1)
    mega["aot"] = [section("aot", b - a, a) for a, b in zip(aot_offsets, aot_offsets[1:])]
    mega["jit"] = section("jit", mega["num_jit"])


def _write_repro(text: str, options: str) -> str:
    fd, path = tempfile.mkstemp(prefix="tilemega-repro-", suffix=".mlir")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return (f"reproduce with:\n  tilemega-opt {path} "
            f"--{PIPELINE}='{options}'")


_REGISTERS = re.compile(
    r"Compiling entry function '(\w+)'.*?Used (\d+) registers", re.S)
# ptxas serialising a wgmma pipeline (C7509-C7515: an extern call, a
# non-inlined call, too few registers, non-wgmma writes to the accumulators
# ...): the kernel still runs, at a fraction of its speed.
_WGMMA_SERIALISED = re.compile(r"^.*\bC75(?:09|1[0-5])\b.*$", re.M)


_SPILLS = re.compile(r"Compiling entry function '(\w+)'.*?Function properties for \1\s+"
                     r"\d+ bytes stack frame, (\d+) bytes spill stores.*?"
                     r"Used (\d+) registers", re.S)
_MIN_CTAS = re.compile(r"\.entry (\w+)\([^{]*?\.minnctapersm (\d+)", re.S)
# A warp-specialised kernel's register split (WarpSpecialize.cpp): the
# consumers' setmaxnreg.inc budget after the producer's setmaxnreg.dec.
_ENTRY = re.compile(r"\.entry (\w+)\(")
_SETMAXNREG = re.compile(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+);")


def _register_splits(ptx: str) -> dict:
    """kernel name -> (consumer, producer) registers of its setmaxnreg split."""
    out = {}
    entries = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx)] + [(len(ptx), None)]
    for (start, name), (end, _) in zip(entries, entries[1:]):
        split = dict((kind, int(n)) for kind, n in _SETMAXNREG.findall(ptx, start, end))
        if "inc" in split:
            out[name] = (split["inc"], split.get("dec"))
    return out


def check_aligned_barriers(ptx: str, handed_to_llvm: Optional[int],
                           persistent: bool = False) -> None:
    """CompileError when an aligned CTA barrier (bar.sync and kin) of the
    PTX depends on a per-thread branch (ptx_barriers.misplaced_barriers):
    every thread of a CTA must execute the same one. Our lowering puts them
    where the whole CTA runs; LLVM's optimiser once split a loop between
    thread 0 and the others, each copy with its own barriers, and the
    persistent kernel hung outside every watchdog (docs/mega.md, "Claimed
    units"). The analysis runs on persistent kernels always and on others
    when LLVM returned more barriers than the LLVM dialect code handed to
    it held (tilemega-record-aligned-barriers; None: not recorded), as
    unrolling and peeling do harmlessly."""
    from ._mlir_libs import _site_initialize_0 as extension
    found = extension.count_aligned_barriers(ptx)
    copied = handed_to_llvm is not None and found > handed_to_llvm
    if not (persistent or copied):
        return
    from .ptx_barriers import misplaced_barriers
    misplaced = misplaced_barriers(ptx)
    if misplaced:
        shown = "\n  ".join(misplaced[:5])
        more = f"\n  ... and {len(misplaced) - 5} more" if len(misplaced) > 5 else ""
        counts = f"the LLVM dialect code holds {handed_to_llvm}, the PTX {found}" \
            if handed_to_llvm is not None else f"the PTX holds {found}"
        raise CompileError(
            f"aligned CTA barriers in code that only some threads run ({counts}); "
            f"every thread of a CTA must execute the same barrier, so the kernel "
            f"would hang:\n  {shown}{more}\n(LLVM's optimiser splits a loop between "
            f"threads when a per-thread condition in it is loop-invariant: "
            f"docs/mega.md, \"Claimed units\"; mega-fresh-thread-ids keeps claim "
            f"loops clear of it.)")


def spill_warnings(ptx: str, ptxas_log: str) -> List[str]:
    """A message for each kernel ptxas spilled registers of (local memory
    traffic: slower, whatever the cause), naming the minimum CTAs an SM
    that capped its registers where there is one above 1 (a persistent
    kernel of several CTAs an SM, mega.ctas_per_sm)."""
    per_sm = {name: int(n) for name, n in _MIN_CTAS.findall(ptx)}
    splits = _register_splits(ptx)
    out = []
    for name, stores, regs in _SPILLS.findall(ptxas_log):
        if int(stores) == 0:
            continue
        why = (f": the most that lets {per_sm[name]} CTAs share an SM, as the graph's "
               f"ctas_per_sm or max-ctas asks" if per_sm.get(name, 1) > 1 else "")
        if name in splits:
            consumer, producer = splits[name]
            why = (f"; a warp-specialised kernel's consumer warpgroups run with "
                   f"{consumer} registers a thread after setmaxnreg (the producer "
                   f"warpgroup keeps {producer}): smaller tiles or fewer fragments fit it")
        out.append(f"kernel '{name}': ptxas spilled {stores} bytes of registers to local "
                   f"memory ({regs} registers a thread{why})")
    return out


def wgmma_serialisation_warnings(ptxas_log: str) -> List[str]:
    """The lines of a ptxas log that report a serialised wgmma pipeline."""
    return _WGMMA_SERIALISED.findall(ptxas_log)


def _assemble(ptx: str, chip: str, ptxas: str):
    with tempfile.TemporaryDirectory(prefix="tilemega-ptxas-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={chip}", "-v", src, "-o", out],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"ptxas rejected the generated PTX:\n{proc.stderr}")
        serialised = wgmma_serialisation_warnings(proc.stderr)
        if serialised:
            raise CompileError("ptxas serialised a wgmma pipeline (a kernel that runs at a "
                               "fraction of its speed):\n" + "\n".join(serialised))
        with open(out, "rb") as f:
            return f.read(), proc.stderr


def target_info(chip: str) -> Dict[str, Any]:
    """The hardware limits of `chip` as the C++ verifiers and passes see them
    (include/tilemega/Target/TargetInfo.h): sm_count,
    max_shared_bytes_per_block, shared_bytes_per_sm, max_registers_per_thread,
    registers_per_sm, max_threads_per_block, max_threads_per_sm,
    max_ctas_per_sm. ValueError for a chip without a description."""
    from ._mlir_libs import _site_initialize_0 as extension
    if not isinstance(chip, str):
        raise ValueError(f"chip must be a string like 'sm_90a', got {chip!r}")
    return extension.target_info(chip)


def attr_names() -> Dict[str, str]:
    """The discardable attribute names Python exchanges with the passes, as
    the tile and mega dialects declare them: kernels_metadata
    (tilemega.kernels), arg_name (tile.name), graph_arg_names
    (mega.arg_names), graph_arg_roles (mega.arg_roles)."""
    from ._mlir_libs import _site_initialize_0 as extension
    return dict(extension.ATTR_NAMES)


def reject_parser_hazards(text: str, source: str = "-") -> None:
    """CompileError at `source`:line:col for a construct of MLIR `text` that
    the pinned MLIR parser would abort the process on instead of reporting
    (tilemega/Support/ParserHazards.h, the check tilemega-opt makes too)."""
    from ._mlir_libs import _site_initialize_0 as extension
    found = extension.find_parser_hazard(text)
    if found is None:
        return
    offset, message = found
    # The C++ offset counts bytes of the UTF-8 text.
    before = text.encode("utf-8")[:offset].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    col = len(before) - (before.rfind("\n") + 1) + 1
    raise CompileError(f"the module does not parse:\n{source}:{line}:{col}: error: {message}")


def default_target_info() -> Dict[str, Any]:
    """`target_info` of the chip TileMega compiles for unless told otherwise
    (the C++ kDefaultChip, also `compile`'s default `chip`)."""
    from ._mlir_libs import _site_initialize_0 as extension
    return extension.target_info(extension.DEFAULT_CHIP)


def _resolve_hopper_option(value, name: str, what: str, chip: str) -> bool:
    """A bool option of a Hopper feature: the caller's bool, or with None
    whether `chip` is sm_90a (the chip that has it). True elsewhere and
    anything but a bool or None are ValueErrors naming the option."""
    if value is None:
        return chip == "sm_90a"
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool or None, got {value!r}")
    if value and chip != "sm_90a":
        raise ValueError(f"{name}=True needs chip='sm_90a' ({what} is Hopper's), got {chip!r}")
    return value


def resolve_wgmma(wgmma, chip: str) -> bool:
    """Whether gemms that tile::chooseWgmma accepts take Hopper's wgmma:
    the caller's bool, or with None whether `chip` is sm_90a (the chip that
    has wgmma; checked on the H200: docs/architecture.md). The one rule for
    tilemega.compile, @tilemega.jit and the compile cache's key."""
    return _resolve_hopper_option(wgmma, "wgmma", "wgmma", chip)


def resolve_wgmma_in_flight(in_flight, wgmma: bool) -> bool:
    """Whether tile-pipeline keeps each k-tile's wgmma in flight into the
    next iteration (loops of 3 or more stages): the caller's bool, or with
    None whenever the gemms take wgmma (`wgmma`, resolved by resolve_wgmma;
    checked on the H200: docs/architecture.md). The one rule for
    tilemega.compile, @tilemega.jit and the compile cache's key."""
    if in_flight is None:
        return bool(wgmma)
    if not isinstance(in_flight, bool):
        raise ValueError(f"wgmma_in_flight must be a bool or None, got {in_flight!r}")
    if in_flight and not wgmma:
        raise ValueError("wgmma_in_flight=True needs the wgmma lowering (wgmma=True, or None "
                         "on sm_90a)")
    return in_flight


def resolve_tma(tma, chip: str) -> bool:
    """Whether tile-pipeline moves the global-to-shared tiles of pipelined
    loops with TMA bulk copies on mbarriers where every copy of a loop can
    be one TMA box (tile::chooseBulkCopy; the others keep cp.async): the
    caller's bool, or with None whether `chip` is sm_90a (the chip that has
    TMA). The one rule for tilemega.compile, @tilemega.jit and the compile
    cache's key."""
    return _resolve_hopper_option(tma, "tma", "TMA", chip)


def compile(module, chip: str = "sm_90a", *, name: Optional[str] = None,
            opt_level: int = 3, features: str = "+ptx80",
            assemble: bool = True, mega_policy: str = "auto",
            mega_timeline: bool = False, mega_watchdog_ms: int = 2000,
            mega_max_ctas: Optional[int] = None, mega_prefetch_bytes: int = 0,
            mega_prefetch_depth: int = 1, mega_early_loads: bool = True,
            mega_stream_units: bool = False, mega_fresh_thread_ids: bool = True,
            mega_early_depth: int = 0,
            mega_bulk_copies: bool = False,
            mega_pair_entries: bool = False,
            mega_claim_units: bool = False,
            wgmma: Optional[bool] = None,
            wgmma_in_flight: Optional[bool] = None,
            tma: Optional[bool] = None) -> CompiledModule:
    """Compiles a module of tile functions for `chip`.

    module: a `tilemega.ir.Module` (not modified) or MLIR text.
    name: artifact name; defaults to the kernel's name (or "module").
    assemble: also run ptxas (when found) to produce a cubin.
    mega_*: options of mega graphs (docs/mega.md): the queue policy (auto,
        aot or jit), per-task timestamps, the watchdog, the resident CTAs
        (None: the chip's SM count, `target_info(chip)["sm_count"]`, x the
        graph's ctas_per_sm), and
        early loads (graphs without a JIT queue: a task's weight tiles start
        loading before its events fire; convert-mega-to-gpu early-loads),
        streamed units (a task's units through one ring of pipeline
        stages; convert-mega-to-gpu stream-units), per-body thread
        index reads (mega-fresh-thread-ids: fewer registers), how many
        iterations of a loop's prologue its early loads issue before the
        wait (mega_early_depth, 0: all; tile-pipeline early-depth), and
        whether the bodies' loops
        stream their tiles with 1-D bulk copies on mbarriers instead of
        cp.async (mega_bulk_copies, sm_90a; tile-pipeline linear-bulk;
        off by default: slower on the Llama-3.2-1B generation, docs/mega.md
        "Bulk copies"), and whether consecutive AOT entries run as pairs
        whose second body's weights load while the first one waits and
        computes (mega_pair_entries; mega-pair-entries, docs/mega.md
        "Paired entries"), and whether a task of several units an
        instance claims the units beyond each instance's own at run time
        (mega_claim_units; mega-decompose claim-units, docs/mega.md
        "Claimed units"; off by default: within the run-to-run spread on
        the Llama-3.2-1B generation).
    wgmma: lower the gemms tile::chooseWgmma accepts to Hopper's
        wgmma.mma_async; None (the default) does so on sm_90a, the chip that
        has it (resolve_wgmma); False keeps every gemm on mma.sync.
    wgmma_in_flight: in tile.pipelined loops of 3 or more stages, let each
        iteration's wgmma run on into the next (tile-pipeline
        wgmma-in-flight; needs wgmma). None (the default): wherever the
        gemms take wgmma (resolve_wgmma_in_flight); False keeps every loop
        but those marked `T.Pipelined(..., wgmma_in_flight=True)` waiting
        for its wgmma in the iteration.
    tma: pipeline the global-to-shared tiles with TMA bulk copies completing
        on mbarriers where every copy of a loop qualifies (tile-pipeline
        tma; the kernel then takes tensor maps the runtime encodes); None
        (the default) does so on sm_90a (resolve_tma); False keeps cp.async.
    """
    from .ir import Context, Location, Module, MLIRError
    from .passmanager import PassManager
    from .dialects import gpu

    if not isinstance(chip, str) or not re.fullmatch(r"sm_\d+a?", chip):
        raise ValueError(f"chip must look like 'sm_90a', got {chip!r}")
    target = target_info(chip)
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0-3, got {opt_level!r}")

    if isinstance(module, str):
        text, context = module, None
    elif hasattr(module, "operation"):
        text, context = str(module.operation), module.context
    else:
        raise TypeError("module must be a tilemega.ir.Module or MLIR text, "
                        f"got {type(module).__name__}")

    if mega_policy not in ("auto", "aot", "jit"):
        raise ValueError(f"mega_policy must be auto, aot or jit, got {mega_policy!r}")
    if int(mega_watchdog_ms) < 1:
        raise ValueError(f"mega_watchdog_ms must be >= 1, got {mega_watchdog_ms!r}")
    # None passes 0: convert-mega-to-gpu then admits the SM count x the
    # graph's own ctas_per_sm (an explicit SM count would cap a graph of two
    # CTAs an SM at one as soon as any other mega option is given).
    max_ctas = 0 if mega_max_ctas is None else int(mega_max_ctas)
    if not isinstance(mega_early_depth, int) or mega_early_depth < 0:
        raise ValueError(f"mega_early_depth must be an int >= 0, got {mega_early_depth!r}")
    if mega_max_ctas is not None and max_ctas < 1:
        raise ValueError(f"mega_max_ctas must be >= 1, got {mega_max_ctas!r}")
    wgmma = resolve_wgmma(wgmma, chip)
    wgmma_in_flight = resolve_wgmma_in_flight(wgmma_in_flight, wgmma)
    options = f"chip={chip} features={features} opt-level={opt_level}"
    if wgmma:
        options += " wgmma=1"
    if wgmma_in_flight:
        options += " wgmma-in-flight=1"
    if resolve_tma(tma, chip):
        options += " tma=1"
    if mega_early_depth:
        options += f" mega-early-depth={mega_early_depth}"
    if not isinstance(mega_bulk_copies, bool):
        raise ValueError(f"mega_bulk_copies must be a bool, got {mega_bulk_copies!r}")
    # Streamed units ring cp.async stages across a task's units; a loop of
    # bulk copies does not stream (tile-pipeline).
    if mega_stream_units and mega_bulk_copies:
        raise ValueError("mega_stream_units streams cp.async stages: it needs "
                         "mega_bulk_copies=False")
    if _resolve_hopper_option(mega_bulk_copies, "mega_bulk_copies", "the 1-D bulk copy", chip):
        options += " mega-bulk-copies=1"
    if not isinstance(mega_pair_entries, bool):
        raise ValueError(f"mega_pair_entries must be a bool, got {mega_pair_entries!r}")
    if mega_pair_entries:
        options += " mega-pair-entries=1"
    if not isinstance(mega_claim_units, bool):
        raise ValueError(f"mega_claim_units must be a bool, got {mega_claim_units!r}")
    if mega_claim_units:
        options += " mega-claim-units=1"
    mega = (mega_policy, bool(mega_timeline), int(mega_watchdog_ms), max_ctas,
            int(mega_prefetch_bytes), int(mega_prefetch_depth), bool(mega_early_loads),
            bool(mega_stream_units), bool(mega_fresh_thread_ids))
    if mega != ("auto", False, 2000, 0, 0, 1, True, False, True):
        options += (f" mega-policy={mega_policy} mega-timeline={int(bool(mega_timeline))}"
                    f" mega-watchdog-ms={int(mega_watchdog_ms)} mega-max-ctas={max_ctas}"
                    f" mega-prefetch-bytes={int(mega_prefetch_bytes)}"
                    f" mega-prefetch-depth={int(mega_prefetch_depth)}"
                    f" mega-early-loads={int(bool(mega_early_loads))}"
                    f" mega-stream-units={int(bool(mega_stream_units))}"
                    f" mega-fresh-thread-ids={int(bool(mega_fresh_thread_ids))}")
    ctx = context or Context()
    reject_parser_hazards(text)
    with ctx, Location.unknown():
        try:
            work = Module.parse(text)
        except MLIRError as e:
            raise CompileError(f"the module does not parse:\n{e}") from None
        pm = PassManager.parse(f"builtin.module({PIPELINE}{{{options}}})")
        dump_dir = os.environ.get("TILEMEGA_DUMP_IR")
        if dump_dir:
            pm.enable_ir_printing(print_after_all=True,
                                  tree_printing_dir_path=dump_dir)
        # Warnings (not silently slow code) reach Python as CompileWarning;
        # errors keep flowing into the MLIRError below.
        from .ir import DiagnosticSeverity
        compiler_warnings = []

        def on_diagnostic(diag):
            if diag.severity != DiagnosticSeverity.WARNING:
                return False
            compiler_warnings.append(f"{diag.location}: {diag.message}")
            return True

        handler = ctx.attach_diagnostic_handler(on_diagnostic)
        try:
            pm.run(work.operation)
        except MLIRError as e:
            handler.detach()
            raise CompileError(f"{PIPELINE} failed:\n{e}\n"
                               f"{_write_repro(text, options)}") from None
        handler.detach()
        for message in compiler_warnings:
            warnings.warn(message, CompileWarning, stacklevel=2)

        kernels_attr = attr_names()["kernels_metadata"]
        if kernels_attr not in work.operation.attributes:
            raise CompileError("the module holds no tile.kernel to compile")
        kernels = _attr_to_python(work.operation.attributes[kernels_attr])
        for kernel in kernels:
            if "mega" in kernel:
                _expand_mega_tables(kernel["mega"])
        barriers_attr = attr_names()["aligned_barriers"]
        handed_to_llvm = _attr_to_python(work.operation.attributes[barriers_attr]) \
            if barriers_attr in work.operation.attributes else None
        ptx_parts = []
        for op in work.body.operations:
            if op.operation.name == "gpu.binary":
                for obj in op.attributes["objects"]:
                    ptx_parts.append(gpu.ObjectAttr(obj).object.decode())
    if len(ptx_parts) != 1:
        raise CompileError(f"expected one gpu.binary object, got {len(ptx_parts)}")
    ptx = ptx_parts[0]
    check_aligned_barriers(ptx, handed_to_llvm,
                           persistent=any("mega" in kernel for kernel in kernels))

    cubin, log = None, ""
    toolchain = {"tilemega": __version__, "mlir": MLIR_VERSION}
    ptxas = find_ptxas() if assemble else None
    if ptxas:
        cubin, log = _assemble(ptx, chip, ptxas)
        # The version, not the path: the same PTX assembled by another ptxas
        # can behave differently on the GPU (docs/toolchain.md).
        toolchain["ptxas"] = ptxas_version(ptxas)
        for kernel_name, regs in _REGISTERS.findall(log):
            for k in kernels:
                if k["name"] == kernel_name:
                    k["registers"] = int(regs)
        for message in spill_warnings(ptx, log):
            warnings.warn(message, CompileWarning, stacklevel=2)
    if name is None:
        name = kernels[0]["name"] if len(kernels) == 1 else "module"
    return CompiledModule(name=name, chip=chip, ptx=ptx, cubin=cubin,
                          kernels=kernels, ptxas_log=log, toolchain=toolchain)


def main(argv=None) -> int:
    """`tilemega-compile IN.mlir -o DIR [--chip sm_90a]`: writes an artifact."""
    import argparse

    parser = argparse.ArgumentParser(prog="tilemega-compile",
                                     description=main.__doc__)
    parser.add_argument("input", help="MLIR file with tile functions")
    parser.add_argument("-o", "--output", required=True, help="artifact folder")
    parser.add_argument("--chip", default="sm_90a")
    parser.add_argument("--name", default=None)
    parser.add_argument("--opt-level", type=int, default=3)
    args = parser.parse_args(argv)
    with open(args.input) as f:
        text = f.read()
    try:
        result = compile(text, args.chip, name=args.name, opt_level=args.opt_level)
    except CompileError as e:
        print(f"tilemega-compile: error: {e}", file=__import__("sys").stderr)
        return 1
    print(result.save(args.output))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
