"""The example kernels, run from their artifacts on a real GPU.

The artifacts come from `scripts/tilemega.sh main` (compiled on a machine with
the compiler) in out/ or $TILEMEGA_ARTIFACTS; this test needs only the
runtime, so it runs on a GPU machine that has no compiler.
"""

import importlib
import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ARTIFACTS = os.environ.get("TILEMEGA_ARTIFACTS", os.path.join(ROOT, "out"))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def _gpu_reason():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    try:
        import cuda.bindings  # noqa: F401
    except ImportError:
        return "cuda-python is not installed"
    return None


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(_gpu_reason() is not None,
                                 reason=f"needs a CUDA GPU: {_gpu_reason()}")]


import run_examples  # noqa: E402  (examples/ is on sys.path above)


@pytest.mark.parametrize("name, module",
                         [(name, module) for name, module, _ in run_examples.EXAMPLES])
def test_example_matches_torch(name, module):
    import torch
    from tilemega.runtime import load_artifact

    path = os.path.join(ARTIFACTS, f"{name}.json")
    assert os.path.exists(path), (
        f"{path} is missing: build the artifacts with scripts/tilemega.sh main "
        "(or point TILEMEGA_ARTIFACTS at them)")
    check = importlib.import_module(f"examples_gpu.{module}")
    artifact = load_artifact(path)
    tolerance = (check.tolerance(artifact) if hasattr(check, "tolerance")
                 else check.TOLERANCE)
    for _ in range(3):  # Fresh random inputs each time.
        err = check.check(artifact, torch)
        assert err <= tolerance, f"{name}: relative error {err}"
