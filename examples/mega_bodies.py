"""The mega-kernel task bodies (tilemega.mega.bodies) as standalone kernels.

A body is a tile function whose grid is its number of units, so compiled on
its own it is an ordinary kernel: launching it runs every unit once, which
checks the body's math and its unit -> data mapping without the persistent
kernel. run_examples.py compiles the Llama-shaped bodies listed there;
examples_gpu/mega_bodies.py checks them against float64 torch.

    python examples/mega_bodies.py OUT_DIR     # the EXAMPLES entries "mega_*"
"""

import sys


def build(body, name=None, threads=256, **params):
    """A module holding the one body function `tilemega.mega.bodies.<body>(**params)`
    (its function keeps the body's own name; `name` names the artifact)."""
    from tilemega.ir import InsertionPoint, Module
    from tilemega.mega import bodies

    module = Module.create()
    with InsertionPoint(module.body):
        getattr(bodies, body)(**params, threads=threads)
    return module


if __name__ == "__main__":
    import os

    import tilemega
    from tilemega.ir import Context, Location

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_examples

    out = sys.argv[1] if len(sys.argv) > 1 else "out"
    for name, module, config in run_examples.EXAMPLES:
        if module == "mega_bodies":
            with Context(), Location.unknown():
                print(tilemega.compile(build(**config, name=name), chip="sm_90a",
                                       name=name).save(out))
