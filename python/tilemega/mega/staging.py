"""A generation's inputs on their way to the device: one pinned host buffer
holding the prompt, the state words, the sampling settings and the prefill
spans, copied into their device tensors by asynchronous copies that a CUDA
graph can hold.

Why: torch's copy of a pageable CPU tensor blocks until the stream has
caught up, and a generation made four of them before its launch (174 us
of host time with the launch on the H200,
docs/results/generate_launch_prefill_h200.json). Written here, the inputs
travel inside the generation's one graph launch (engine.py captures the
copies ahead of the prefill kernels and the persistent kernel), and the
host's part is a few memmoves.

The buffer is reused: write() waits until the copies of the previous
round have run (`consumed()` records that point on the stream that
launched them), so a new prompt never overwrites one still in flight.
"""

import array
import ctypes

ALIGN = 16


class HostStaging:
    """Regions of one pinned host buffer, one per device tensor of
    `targets` ({name: contiguous CUDA tensor of 4-byte elements}), each
    copied whole by enqueue()."""

    def __init__(self, targets):
        import torch

        self._torch = torch
        self._regions = {}
        offset = 0
        for name, tensor in targets.items():
            if not tensor.is_cuda or not tensor.is_contiguous() or tensor.element_size() != 4:
                raise ValueError(f"staging target {name!r}: a contiguous CUDA tensor of 4-byte "
                                 f"elements, got {tensor.dtype} on {tensor.device}")
            nbytes = tensor.numel() * 4
            self._regions[name] = (offset, nbytes, tensor)
            offset += -(-nbytes // ALIGN) * ALIGN
        self._host = torch.zeros(max(offset, ALIGN), dtype=torch.uint8).pin_memory()
        self._base = self._host.data_ptr()
        self._consumed = torch.cuda.Event()
        self._free = True               # no recorded copies pending since the last wait

    def write(self, name, values, typecode="i", at=0):
        """Put `values` (ints for "i", floats for "f") at element `at` of
        region `name`, after the previous round's copies ran."""
        offset, nbytes, _ = self._regions[name]
        data = array.array(typecode, values)
        size = len(data) * data.itemsize
        if data.itemsize != 4 or at < 0 or at * 4 + size > nbytes:
            raise ValueError(f"staging {name!r}: {len(data)} values at {at} do not fit "
                             f"{nbytes // 4} elements")
        if not self._free:              # one wait a round, not one a region
            self._consumed.synchronize()
            self._free = True
        ctypes.memmove(self._base + offset + at * 4, data.buffer_info()[0], size)

    def enqueue(self, stream: int):
        """The copies of every region into its tensor, on the raw stream
        `stream` (inside a capture: the graph's memcpy nodes, which copy
        what the buffer holds when the graph runs)."""
        from ..runtime import driver

        for offset, nbytes, tensor in self._regions.values():
            driver.copy_to_device(tensor.data_ptr(), self._base + offset, nbytes, stream)

    def consumed(self, stream):
        """Marks on torch stream `stream` the point after which the copies
        enqueued there (directly or by a graph) have run."""
        self._consumed.record(stream)
        self._free = False
