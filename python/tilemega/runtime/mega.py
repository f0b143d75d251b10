"""`MegaKernel`: bind, launch and check a persistent mega-kernel (docs/mega.md).

The kernel's params are five runtime buffers (mega_args, mega_tables,
mega_events, mega_state, mega_timeline); the graph's arguments (`mega.args`
of the artifact) are reached through the argument table, one 64-bit word
each (a tensor's address, a scalar's bits), which the runtime writes once
per binding. The user binds the graph arguments by name (once for weights,
per step for inputs); the runtime allocates the `scratch` tensors and the
buffers with torch on first launch. A launch passes the five
buffers whatever the model's size, packed once: a few microseconds of host
time.

`decode_error` turns the state words into a MegaKernelError without a GPU.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence

from . import driver, launch
from . import mega_meta as mm
from .args import check_scalar, check_tensor
from .errors import ArgumentError, LaunchError, MegaKernelError, RuntimeUnavailable
from .kernel import Kernel

ERROR_KINDS = {1: "worker wait timed out", 2: "scheduler wait timed out",
               3: "worker waited for the JIT queue too long",
               4: "step barrier timed out", 5: "no worker index left to claim"}


def _duration(ns) -> str:
    if not isinstance(ns, int) or ns <= 0:
        return "too long"
    return f"{ns / 1e9:.1f} s" if ns >= 1_000_000_000 else f"{ns / 1e6:g} ms"


def _upstream(meta, counters, event, expected, rank) -> str:
    """What a stalled event waits for, as a clause of the watchdog's message
    ("" when its producers wait for nothing unfired)."""
    chain = mm.blocking_chain(meta, counters, event, expected, rank)
    root, events = chain[-1], meta["events"]
    sender = events[root].get("sender")
    if len(chain) == 1 and sender is None:
        return ""
    rounds = max(1, expected // max(1, int(events[event].get("trigger", 1))))
    text = "".join(f"; its producers wait for '{mm.event_name(meta, w)}'" if i == 1 else
                   f", whose producers wait for '{mm.event_name(meta, w)}'"
                   for i, w in enumerate(chain) if i > 0)
    text += (f"; '{mm.event_name(meta, root)}' is at {int(counters[root])} of "
             f"{int(events[root].get('trigger', 1)) * rounds}")
    if sender is not None and sender != rank:
        text += f": rank {sender} never signalled it (is its kernel running?)"
    return text


def decode_error(words: Sequence[int], meta: Dict[str, Any], counters=None,
                 rank=None) -> Optional[MegaKernelError]:
    """The error recorded in mega_state words 0-15, or None when word 4 is 0.
    counters: the kernel's event words after it stopped (and rank, in a
    graph of several ranks): the message then follows a stalled event
    upstream to what it waits for (mega_meta.blocking_chain)."""
    code, entry, event, cta, seen, expected = (int(w) for w in words[4:10])
    if code == 0:
        return None
    kind = ERROR_KINDS.get(code, f"unknown error code {code}")
    workers = int(meta["workers"])
    who = f"worker {cta}" if 0 <= cta < workers else f"the scheduler (CTA {cta})"
    on_event = (f" on event '{mm.event_name(meta, event)}' (counter {seen}, expected {expected})"
                if event >= 0 else "")
    task = mm.entry_label(meta, entry) if entry >= 0 else ""
    if code == 1:
        what = f"{who} waited {_duration(meta.get('watchdog_ns'))}{on_event}" + \
            (f" before {task}" if task else "")
    elif code == 2:
        what = f"{who} waited {_duration(meta.get('watchdog_ns'))}{on_event}" + \
            (f" before publishing {task}" if task else "")
    elif code == 3:
        what = (f"{who} waited {_duration(meta.get('watchdog_ns'))} for the JIT queue"
                + (on_event.replace(" on", " and on", 1) if on_event
                   else f" (counter {seen}, expected {expected})")
                + (f" while {task} was not ready" if task else ""))
    elif code == 4:
        what = (f"{who} waited {_duration(meta.get('watchdog_ns'))} at the barrier after "
                f"a step for the other CTAs (epoch {seen}, expected {expected})")
    elif code == 5:
        what = (f"CTA {cta} (on SM {seen}) found every worker index claimed for launch "
                f"tag {expected}: the claim words of mega_state are ahead of its epoch "
                "(was word 0 reset without the rest? MegaKernel.reset() zeroes them all)")
    else:
        what = (f"{who} reported {kind} (entry {entry}, event {event}, counter {seen}, "
                f"expected {expected})")
    if code in (1, 2, 3) and event >= 0 and counters is not None:
        what += _upstream(meta, counters, event, expected, rank)
    message = f"mega-kernel '{mm.graph_name(meta)}' watchdog: {what}; the kernel stopped"
    return MegaKernelError(message, code, kind, cta, entry, event, seen, expected)


def residency_error(meta: Dict[str, Any], name: str, grid: int, threads: int,
                    dynamic_shared_bytes: int, sms: int, per_sm: int,
                    device: Optional[int] = None) -> Optional[LaunchError]:
    """The error for a persistent kernel whose `grid` CTAs cannot all be
    resident at once (`sms` SMs, `per_sm` CTAs an SM keeps), or None. Its
    workers would wait for CTAs that never start: a hang (or the watchdog)."""
    fits = sms * per_sm
    if grid <= fits:
        return None
    workers = int(meta["workers"])
    sched = grid - workers
    who = f"{workers} workers" + (f" + {sched} scheduler" if sched > 0 else "")
    on = f"device {device}" if device is not None else "this device"
    smem = f" and {dynamic_shared_bytes} bytes of dynamic shared memory" \
        if dynamic_shared_bytes else ""
    hint = (f"recompile with at most {fits - sched} workers (and mega_max_ctas={fits})"
            if fits > sched else "it cannot run on this device at all")
    return LaunchError(f"mega-kernel '{name}' needs all of its {grid} CTAs ({who}) resident "
                       f"at once, but {on} keeps at most {fits} ({sms} SMs x {per_sm} CTAs of "
                       f"{threads} threads{smem} per SM): {hint}")


def load_mega(path, name: Optional[str] = None, kernel: Optional[str] = None) -> "MegaKernel":
    """`MegaKernel(load_artifact(path, name), kernel)`."""
    from .artifact import load_artifact
    return MegaKernel(load_artifact(path, name), kernel)


def _pick_kernel(source, kernel: Optional[str]) -> Kernel:
    if isinstance(source, Kernel):
        return source
    if isinstance(source, (str, os.PathLike)):
        from .artifact import load_artifact
        source = load_artifact(source)
    if kernel is not None:
        return source[kernel]
    megas = [k for k in source if k.spec.mega is not None]
    if len(megas) != 1:
        raise ValueError(f"artifact {source.name}: expected one mega-kernel, found "
                         f"{[k.name for k in megas]}; pass kernel=NAME")
    return megas[0]


class MegaKernel:
    """A persistent mega-kernel with its runtime buffers.

        mk = MegaKernel(load_artifact("out/step.json"))   # or load_mega(path)
        mk.bind(weights)               # a dict, keywords, or positional in param order
        mk(x=x, out=out)               # bind + launch + check (check=False to skip)
        mk.launch(); mk.check()        # the same, in two steps

    Binding checks dtype, shape and strides at once and raises ArgumentError
    naming the parameter; launching with an unbound tensor raises one too.
    The scratch tensors and the five runtime buffers are allocated (zeroed)
    with torch at the first launch, on the device of the first bound tensor
    (or `device`). Events are never reset between launches (epochs), so
    repeated launches need no host work.
    """

    def __init__(self, source, kernel: Optional[str] = None, device: Optional[int] = None):
        self.kernel = _pick_kernel(source, kernel)
        spec = self.kernel.spec
        self.name = spec.name
        if spec.mega is None:
            raise ValueError(f"kernel {spec.name!r} has no 'mega' metadata: not a mega-kernel")
        self.meta = meta = spec.mega
        self._check_layout(spec)
        self.graph_params = list(spec.graph_args)
        self.user_params = [p for p in self.graph_params if p.role != "scratch"]
        self._by_name = {p.name: p for p in self.user_params}
        self._bound: Dict[str, Any] = {}
        self._bound_ptrs: Dict[str, int] = {}   # name -> device address, read at bind
        self._bound_devices: Dict[str, Optional[int]] = {}
        self._device = device
        self._buffers: Dict[str, Any] = {}      # name -> torch tensor we allocated
        self._given_events = None               # use_events' buffer, if any
        self._args: Optional[List[Any]] = None  # the full argument list, rebuilt after bind
        self._packed = None                      # its BoundLaunch (packed once), if any
        self._l2_window = None                   # set_l2_window's, if any
        self._resident_on: Optional[int] = None # the device whose residency was checked
        self.ranks = mm.ranks(meta)
        # A graph of several ranks: this rank and every rank's events buffer
        # address (bind_peers), the argument table's last words.
        self._peers: Optional[List[int]] = None
        # Launches share the events and state buffers, so they must not overlap:
        # one lock orders launches from several threads, and a launch on another
        # stream than the previous one first waits for that stream (_follow).
        self._launch_lock = threading.Lock()
        self._last_stream: Optional[int] = None
        self._first_is_torch = False
        self._event = None
        self.num_entries = len(meta["entries"]["task"])

    def _check_layout(self, spec):
        meta, where = spec.mega, f"{self.kernel.artifact.path}: kernel {spec.name!r}"
        for key in ("tables", "table_sections"):   # validate() checked them when present
            if key not in meta:
                raise ValueError(f"{where}: field 'mega.{key}' missing (the kernel's tables "
                                 "are only uploaded once they are checked against the lists)")
        tail = spec.params
        if tuple(p.name for p in tail) != mm.RUNTIME_PARAMS:
            raise ValueError(f"{where}: the params must be {list(mm.RUNTIME_PARAMS)} (the graph's "
                             f"arguments are in 'mega.args'), got {[p.name for p in tail]}")
        peer_words = mm.ranks(meta) + 1 if mm.ranks(meta) > 1 else 0
        sizes = {"mega_args": ("int64", max(1, len(spec.graph_args) + peer_words)),
                 "mega_tables": ("int32", len(meta["tables"])),
                 "mega_events": ("int32", max(1, len(meta["events"]))),
                 "mega_state": ("int32", mm.state_words(meta)),
                 "mega_timeline": ("int64", max(1, 4 * len(meta["entries"]["task"])))}
        for p in tail:
            dtype, size = sizes[p.name]
            if p.kind != "tensor" or p.dtype != dtype or tuple(p.shape) != (size,):
                raise ValueError(f"{where}: param '{p.name}' must be a {dtype} tensor of shape "
                                 f"[{size}], got {p.kind} {p.dtype} {list(p.shape or ())}")
        if "threads" in meta and spec.block != (meta["threads"], 1, 1):
            raise ValueError(f"{where}: block {list(spec.block)} does not match the "
                             f"{meta['threads']} threads of field 'mega.threads'")
        loop = meta.get("loop")
        if loop:
            graph = spec.graph_args
            arg, element = loop["stop_argument"], loop["stop_element"]
            param = graph[arg] if arg < len(graph) else None
            if param is None or param.kind != "tensor" or param.dtype != "int32" or \
                    len(param.shape or ()) != 1 or not element < param.shape[0]:
                raise ValueError(f"{where}: field 'mega.loop': the stop word (argument {arg}, "
                                 f"element {element}) must be an element of a 1-D int32 "
                                 "tensor of 'mega.args'")
        expected = meta["workers"] + (1 if meta["jit"] else 0)
        if spec.grid != (expected, 1, 1):
            raise ValueError(f"{where}: grid {list(spec.grid)} does not match {meta['workers']} "
                             f"workers{' + 1 scheduler' if meta['jit'] else ''}")

    def __repr__(self):
        return (f"<MegaKernel {self.name}: {self.num_entries} entries on {self.meta['workers']} "
                f"workers, bound {len(self._bound)}/{len(self.user_params)}>")

    # -- binding --------------------------------------------------------------------

    def bind(self, *args, **named) -> "MegaKernel":
        """Bind graph tensors: a dict, keywords, or positional in param order (scratch
        params excluded). Everything is checked before anything is stored."""
        return self._bind(args, named, remote=False)

    def bind_remote(self, *args, **named) -> "MegaKernel":
        """For a graph of several ranks whose ranks run on different GPUs of
        one process: bind tensors (a dict or keywords) that live in another
        rank's GPU memory - its inboxes, for this rank's `to` parameters
        (tensor_parallel.bind_ranks). Their device must be reachable from
        this kernel's device, whose peer access to it is enabled here
        (LaunchError otherwise); bind this rank's own tensors first (they
        decide this kernel's device)."""
        if self.ranks == 1:
            raise ArgumentError(f"{self.name}: a graph of one rank has no remote tensors")
        if args and not (len(args) == 1 and isinstance(args[0], dict)):
            raise ArgumentError(f"{self.name}: bind_remote takes a dict or keywords")
        return self._bind(args, named, remote=True)

    def _bind(self, args, named, remote: bool) -> "MegaKernel":
        if len(args) == 1 and isinstance(args[0], dict):
            named = {**args[0], **named}
            args = ()
        if len(args) > len(self.user_params):
            raise ArgumentError(f"{self.name}: {len(args)} positional tensors for "
                                f"{len(self.user_params)} params "
                                f"({', '.join(p.name for p in self.user_params)})")
        pairs = [(p.name, a) for p, a in zip(self.user_params, args)]
        for name, value in named.items():
            if name in dict(pairs):
                raise ArgumentError(f"{self.name}: '{name}' given both by position and by name")
            pairs.append((name, value))
        ptrs = {}
        for name, value in pairs:
            param = self._by_name.get(name)
            if param is None:
                raise ArgumentError(self._unknown(name))
            where = f"{self.name}: parameter '{name}'" + (f" ({param.role})" if param.role else "")
            if param.kind != "tensor":
                ptrs[name] = (_scalar_word(check_scalar(param, value, where)), None)
                continue
            desc = check_tensor(param, value, where)
            device = self._device if self._device is not None else \
                next((d for d in self._bound_devices.values() if d is not None), None)
            if remote and device is None:
                raise ArgumentError(f"{where}: bind this rank's own tensors first (with "
                                    "bind); they decide the kernel's device")
            if desc.device is not None and device is not None and desc.device != device:
                if not remote:
                    raise ArgumentError(f"{where}: the tensor is on device {desc.device} but "
                                        f"the kernel's other tensors are on device {device} "
                                        "(another rank's memory: bind_remote)")
                driver.enable_peer_access(device, desc.device, where)
            # A remote tensor is used from this kernel's device.
            ptrs[name] = (desc.ptr, device if remote else desc.device)
        for name, (ptr, device) in ptrs.items():
            self._bound_ptrs[name] = ptr
            self._bound_devices[name] = device
            if self._device is None and device is not None:
                self._device = device
        self._bound.update(pairs)
        # The argument table is rewritten before the next launch.
        self._args = None
        self._packed = None
        return self

    def bind_peers(self, rank: int, events: Sequence[int]) -> "MegaKernel":
        """For a graph of several ranks: this kernel is rank `rank`, and
        `events[q]` is the address of rank q's `mega_events` buffer
        (`events_address` of each rank's MegaKernel; this rank's own among
        them), where this rank's peer signals go. The buffers must be
        reachable from this GPU (peer access over NVLink, or one GPU's own
        memory). Checked here; written with the argument table."""
        if self.ranks == 1:
            raise ArgumentError(f"{self.name}: a graph of one rank has no peers to bind")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.ranks:
            raise ArgumentError(f"{self.name}: rank {rank!r} is not in [0, {self.ranks})")
        words = list(events)
        if len(words) != self.ranks or any(isinstance(a, bool) or not isinstance(a, int) or
                                           a <= 0 or a % 4 for a in words):
            raise ArgumentError(f"{self.name}: events must be {self.ranks} addresses of int32 "
                                f"buffers (one per rank), got {words!r}")
        self.allocate()
        own = self._buffers["mega_events"].data_ptr()
        if words[rank] != own:
            raise ArgumentError(f"{self.name}: events[{rank}] = {words[rank]:#x} is not this "
                                f"rank's own events buffer ({own:#x})")
        self._peers = [rank] + words
        self._args = None
        self._packed = None
        return self

    def use_events(self, events) -> "MegaKernel":
        """For a graph of several ranks in several processes: this kernel's
        `mega_events` buffer is `events` (an int32 CUDA tensor of the
        kernel's event words, zeroed, on this kernel's device) rather than
        one the runtime allocates: one the other ranks can reach (symmetric
        memory), whose peers' views give bind_peers its addresses. Before
        the buffers are allocated (the first launch, prepare)."""
        if self.ranks == 1:
            raise ArgumentError(f"{self.name}: a graph of one rank has no peers to share "
                                "its events with")
        if self._buffers:
            raise ArgumentError(f"{self.name}: use_events after the buffers were allocated "
                                "(call it before the first launch or prepare)")
        torch = _torch()
        spec = next(p for p in self.kernel.spec.params if p.name == "mega_events")
        if not isinstance(events, torch.Tensor) or not events.is_cuda or \
                events.dtype != torch.int32 or tuple(events.shape) != tuple(spec.shape) or \
                not events.is_contiguous():
            raise ArgumentError(f"{self.name}: use_events needs a contiguous int32 CUDA tensor "
                                f"of shape {list(spec.shape)}, got "
                                f"{getattr(events, 'dtype', type(events).__name__)} "
                                f"{list(getattr(events, 'shape', []))}")
        if self._device is not None and events.device.index != self._device:
            raise ArgumentError(f"{self.name}: use_events: the buffer is on device "
                                f"{events.device.index}, the kernel's tensors on {self._device}")
        self._given_events = events
        return self

    @property
    def events_address(self) -> int:
        """The address of this kernel's `mega_events` buffer (allocated now
        if it was not): what the other ranks' bind_peers take."""
        self.allocate()
        return self._buffers["mega_events"].data_ptr()

    def _unknown(self, name: str) -> str:
        if name in mm.RUNTIME_PARAMS or any(p.name == name for p in self.graph_params):
            return f"{self.name}: '{name}' is allocated by the runtime; do not pass it"
        return (f"{self.name}: no graph parameter '{name}'; parameters: "
                f"{', '.join(p.name for p in self.user_params)}")

    def _arguments(self) -> List[Any]:
        missing = [p for p in self.user_params if p.name not in self._bound]
        if missing:
            listed = ", ".join(f"'{p.name}'" + (f" ({p.role})" if p.role else "") for p in missing)
            plural = "s" if len(missing) > 1 else ""
            raise ArgumentError(f"{self.name}: missing tensor for parameter{plural} {listed}; "
                                "bind with mk.bind(name=tensor) or mk(name=tensor)")
        self.allocate()
        self._first_is_torch = self._first_bound_is_torch()
        return [self._buffers[p.name] for p in self.kernel.spec.params]

    def _first_bound_is_torch(self) -> bool:
        """Whether the first graph tensor is a torch tensor (the default
        stream is then torch's current one, as Kernel.__call__ decides)."""
        first = next((self._bound.get(p.name) for p in self.user_params
                      if p.kind == "tensor"), None)
        return first is None or isinstance(first, _torch().Tensor)

    def _arg_table_words(self) -> List[int]:
        """The graph arguments' words (addresses, scalar bits), in `mega.args`
        order."""
        words = [self._bound_ptrs[p.name] if p.name in self._bound_ptrs
                 else self._buffers[p.name].data_ptr() for p in self.graph_params]
        if self.ranks > 1:
            if self._peers is None:
                raise ArgumentError(f"{self.name}: a graph of {self.ranks} ranks; call "
                                    "bind_peers(rank, events) before the launch")
            words += self._peers
        return words

    def _write_arg_table(self, stream: Optional[int]):
        """Upload the argument table, ordered on `stream` after the launches
        before it (None: now, synchronously). The pinned host copy is left to
        torch's host allocator, which keeps it until the copy is done."""
        torch = _torch()
        table = torch.tensor(self._arg_table_words() or [0], dtype=torch.int64)
        target = self._buffers["mega_args"]
        if stream is None:
            target.copy_(table)
            torch.cuda.synchronize(self._device)
            return
        pinned = table.pin_memory()
        on = torch.cuda.default_stream(self._device) if stream == 0 else \
            torch.cuda.ExternalStream(stream, device=self._device)
        with torch.cuda.stream(on):
            target.copy_(pinned, non_blocking=True)

    # -- buffers --------------------------------------------------------------------

    def allocate(self, device: Optional[int] = None):
        """Allocate scratch tensors and runtime buffers now (done by the first launch)."""
        if self._buffers:
            return
        torch = _torch()
        if device is None:
            device = self._device if self._device is not None else torch.cuda.current_device()
        self._device = device
        dev = torch.device("cuda", device)
        owned = [p for p in self.graph_params if p.role == "scratch"] + \
            list(self.kernel.spec.params)
        need = sum(_bytes(p) for p in owned)
        free = torch.cuda.mem_get_info(device)[0]
        if need > free:
            big = max(owned, key=_bytes)
            raise ValueError(f"{self.name}: the scratch and runtime buffers need {need} bytes "
                             f"but device {device} has {free} free (the largest, param "
                             f"'{big.name}' of shape {list(big.shape)}, takes {_bytes(big)})")
        bufs = {p.name: torch.zeros(tuple(p.shape), dtype=getattr(torch, p.dtype), device=dev)
                for p in owned if not (p.name == "mega_events" and self._given_events is not None)}
        if self._given_events is not None:
            bufs["mega_events"] = self._given_events
        tables = self.meta["tables"]
        if tables:
            bufs["mega_tables"].copy_(torch.tensor(tables, dtype=torch.int32))
        self._buffers = bufs

    @property
    def buffers(self) -> Dict[str, Any]:
        """The tensors the runtime allocated, by param name (empty before allocation)."""
        return dict(self._buffers)

    def _sync(self):
        torch = _torch()
        self.allocate()
        torch.cuda.synchronize(self._device)

    # -- launching --------------------------------------------------------------------

    def set_l2_window(self, window) -> "MegaKernel":
        """Launch with `window` (an l2_window.L2Window, None to stop): the
        window's bytes are marked persisting in L2 (a decode step's k/v
        caches, so that the weights streaming through do not evict them
        before the next step reads them again). Raises the context's
        persisting set-aside now; LaunchError where the device cannot.
        Needs the packed launch (torch tensors bound); a launch made while
        the device's context is not current (the general path) goes
        without it: a hint lost, never a wrong result."""
        if window is not None:
            device = self._device if self._device is not None else 0
            window = window.apply(device, f"mega-kernel '{self.name}'")
        with self._launch_lock:
            self._l2_window = window
            if self._packed is not None:
                self._packed.window = window
        return self

    def prepare(self):
        """What the first launch does besides launching: allocate the
        buffers, check residency, write the argument table (every graph
        tensor must be bound). Call it before capturing launches into a
        CUDA graph, where copies from the host are not allowed."""
        with self._launch_lock:
            self._ready(None)

    def _ready(self, stream: Optional[int], args: Optional[List[Any]] = None):
        """The argument table and the packed launch, built once per binding
        (the table's upload is ordered on `stream`, None: synchronous;
        `args`: the _arguments() the caller already built)."""
        if self._args is None:
            args = args if args is not None else self._arguments()
            if stream is not None and driver.stream_is_capturing(stream):
                raise LaunchError(f"mega-kernel '{self.name}': its tensors were bound since "
                                  "the last launch, and the new argument table cannot be "
                                  "written while the stream is captured into a CUDA graph; "
                                  "call prepare() before the capture")
            self._write_arg_table(stream)
            self._args = args
            self._packed = self.kernel.bind_launch(self._args)
            if self._l2_window is not None:
                if self._packed is None:
                    raise LaunchError(f"mega-kernel '{self.name}': an L2 window needs the "
                                      "packed launch (torch tensors bound), which these "
                                      "arguments do not take")
                self._packed.window = self._l2_window
        if self._resident_on != self._device:
            self.check_resident()

    def launch(self, stream=None):
        """Launch once, asynchronously (see Kernel.__call__ for `stream`).

        The first launch on a device checks that every CTA of the grid can be
        resident at once (LaunchError otherwise: the kernel would hang); the
        launch itself is cooperative, so the driver refuses such a grid too.
        Launches are serialised: from several threads by a lock, and a launch
        on another stream than the previous one waits (stream-ordered, no host
        sync) for the work enqueued on that stream, so two launches never run
        at once on the shared events, state and argument table (docs/mega.md)."""
        with self._launch_lock:
            # A new binding: every tensor bound, the buffers allocated
            # (and the default stream known) before anything is enqueued.
            args = self._arguments() if self._args is None else None
            handle = self._stream_handle(stream)
            if handle != self._last_stream:
                self._follow(handle)
            self._ready(handle, args)
            # Five buffers, packed once per binding: the launch is the
            # driver call alone, whatever the number of graph tensors.
            if self._packed is None or not self._packed.launch(handle):
                self.kernel(*self._args, stream=handle)

    def capture(self, stream, before=None) -> "driver.LaunchGraph":
        """One launch on `stream`, captured into a CUDA graph: its
        `launch(stream)` repeats it with one driver call. `before()`, if
        given, enqueues work on `stream` that the graph runs ahead of the
        launch (the engine's prefill kernels). Replays bypass launch()'s
        ordering, so the caller replays on `stream` (or behind it) and never
        at once with another launch of this kernel."""
        self.prepare()
        handle = self._stream_handle(stream)

        def enqueue():
            if before is not None:
                before()
            self.launch(handle)

        with driver.device_context(self._device):
            return driver.LaunchGraph(handle, enqueue)

    def _stream_handle(self, stream) -> int:
        """The stream the launch goes to, resolved as Kernel.__call__ would."""
        if type(stream) is int:
            return stream
        if stream is not None:
            return launch.stream_handle(stream)
        if not self._first_is_torch:
            return 0
        torch = _torch()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(self._device)
        return int(torch.cuda.current_stream(self._device).cuda_stream)

    def _follow(self, stream: int):
        """Make `stream` wait for everything enqueued so far on the previous
        launch's stream (which includes that launch). Skipped while either
        stream is being captured into a CUDA graph: a capture may not depend on
        uncaptured work, and the captured launch runs only when the graph is
        replayed, ordered by the stream the user replays it on."""
        previous, self._last_stream = self._last_stream, stream
        if previous is None:
            return
        with driver.device_context(self._device):
            if driver.stream_is_capturing(stream) or driver.stream_is_capturing(previous):
                return
            if self._event is None:
                self._event = driver.event_create()
                weakref.finalize(self, driver.event_destroy, self._event)
            driver.event_record(self._event, previous)
            driver.stream_wait_event(stream, self._event)

    def check_resident(self):
        """Raise LaunchError unless the device keeps the whole grid resident at
        once: SMs x cuOccupancyMaxActiveBlocksPerMultiprocessor >= grid."""
        self.allocate()
        spec, device = self.kernel.spec, self._device
        threads = spec.block[0] * spec.block[1] * spec.block[2]
        grid = spec.grid[0] * spec.grid[1] * spec.grid[2]
        with driver.device_context(device):
            if not driver.device_attribute(device, "COOPERATIVE_LAUNCH"):
                raise LaunchError(f"mega-kernel '{spec.name}': device {device} does not support "
                                  "cooperative launches (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH "
                                  "is 0), which guarantee that all CTAs of a persistent "
                                  "kernel are resident at once")
            function = self.kernel.artifact._function(device, spec.name,
                                                      spec.dynamic_shared_bytes)
            sms, per_sm = driver.resident_blocks(device, function, threads,
                                                 spec.dynamic_shared_bytes)
        error = residency_error(self.meta, spec.name, grid, threads,
                                spec.dynamic_shared_bytes, sms, per_sm, device)
        if error is not None:
            raise error
        self._resident_on = device

    def __call__(self, *args, stream=None, check: bool = True, **named):
        if args or named:
            self.bind(*args, **named)
        self.launch(stream)
        if check:
            self.check()

    # -- repeating graphs (mega.graph stop_word / max_steps) ------------------------

    @property
    def max_steps(self) -> int:
        """Steps one launch may run: the graph's max_steps, 1 unless it repeats."""
        loop = self.meta.get("loop")
        return int(loop["max_steps"]) if loop else 1

    def set_step_limit(self, steps: int, stream=None):
        """Later launches of a repeating graph run at most `steps` steps
        (stream-ordered write of the state word; 1 is the single-step mode)."""
        if not self.meta.get("loop"):
            raise ValueError(f"{self.name}: the graph does not repeat (no mega.graph "
                             "stop_word), so every launch is one step")
        if isinstance(steps, bool) or not isinstance(steps, int) or \
                not 1 <= steps <= self.max_steps:
            raise ValueError(f"{self.name}: steps must be an int in [1, {self.max_steps}] "
                             f"(max_steps), got {steps!r}")
        torch = _torch()
        self.allocate()
        word = self._buffers["mega_state"][mm.STEP_LIMIT_WORD:mm.STEP_LIMIT_WORD + 1]
        if stream is None:
            word.fill_(steps)
        else:
            with torch.cuda.stream(stream):
                word.fill_(steps)

    def steps_done(self) -> int:
        """Steps the last launch of a repeating graph completed (synchronises)."""
        return self.state()[mm.STEPS_DONE_WORD]

    def state(self) -> List[int]:
        """mega_state words 0-15 after synchronising the device."""
        self._sync()
        return [int(v) for v in self._buffers["mega_state"][:mm.STATE_WORDS].tolist()]

    def check(self):
        """Synchronise and raise MegaKernelError if the watchdog stopped the kernel."""
        words = self.state()
        if words[4] == 0:
            return
        events = (self._buffers or {}).get("mega_events")
        counters = None if events is None else [int(v) for v in events.tolist()]
        rank = self._peers[0] if getattr(self, "_peers", None) else None
        raise decode_error(words, self.meta, counters, rank)

    @property
    def epoch(self) -> int:
        """Completed launches since allocation (or the last reset)."""
        return self.state()[0]

    def reset(self):
        """Zero events, state, timeline and the scratch tensors (after an
        error, or between tests): a launch stopped half-way may leave a
        count in scratch (an attention's arrivals, merge_in_split) that the
        tasks keep at zero between launches."""
        self._sync()
        scratch = [p.name for p in self.graph_params if p.role == "scratch"]
        for name in ["mega_events", "mega_state", "mega_timeline"] + scratch:
            if name in self._buffers:
                self._buffers[name].zero_()
        self._sync()

    def timeline(self):
        """Per-entry rows (start_ns, end_ns, cta, sm) as an int64 numpy array [entries, 4]."""
        if not self.meta.get("timeline"):
            raise ValueError(f"{self.name}: compiled without a timeline (mega.timeline is false)")
        import numpy as np
        self._sync()
        if self.num_entries == 0:
            return np.zeros((0, 4), dtype=np.int64)
        return self._buffers["mega_timeline"].view(-1, 4).cpu().numpy()


def _scalar_word(packed) -> int:
    """A packed scalar (check_scalar's ctypes value) as the int64 word of the
    argument table: its bytes in the low bits (the kernel truncates)."""
    import ctypes
    raw = ctypes.string_at(ctypes.addressof(packed), ctypes.sizeof(packed))
    return int.from_bytes(raw.ljust(8, b"\0"), "little", signed=True)


def _bytes(param) -> int:
    from .dtypes import DTYPES
    count = 1
    for extent in param.shape:
        count *= extent
    return count * DTYPES[param.dtype].itemsize


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            raise RuntimeUnavailable("MegaKernel allocates its buffers with torch, which is not "
                                     "installed") from None
    return torch
