"""TileMega runtime: load a compiled artifact and launch its kernels.

Pure Python: needs only the standard library to load and check, and
cuda-python (`cuda.bindings.driver`) to launch. No MLIR, no native extension;
cuda and torch are imported only when a launch needs them.

    from tilemega.runtime import load_artifact
    art = load_artifact("out/add_one.json")
    art.add_one(a, 2.0)                  # or art(a, 2.0) with a single kernel

See docs/artifact-format.md for the artifact, and `python -m tilemega.runtime
info ART.json` to inspect one. Persistent mega-kernels (docs/mega.md) run
through `MegaKernel`; `mega_sim` simulates their schedule on the CPU and
`mega_timeline` summarises and draws their timelines.
"""

from .artifact import Artifact, load_artifact
from .errors import ArgumentError, LaunchError, MegaKernelError, RuntimeUnavailable
from .kernel import Kernel
from .mega import MegaKernel, load_mega

__all__ = ["load_artifact", "Artifact", "Kernel", "ArgumentError", "LaunchError",
           "RuntimeUnavailable", "MegaKernel", "MegaKernelError", "load_mega"]
