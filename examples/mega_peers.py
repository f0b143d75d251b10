"""Graphs of several ranks on one GPU: the all-reduce of Graph.all_reduce,
R persistent kernels (one per rank) that synchronise through peer events,
run side by side on one H200 (loopback: each rank's "peer memory" is this
GPU's memory, reached through the same addresses and the same system-scope
signals and waits as over NVLink).

    python examples/mega_peers.py out       # compile (needs the compiler)

The GPU check (gpu_check.py, kind "peers"): every rank's output against the
float64 sum of the ranks' inputs, all ranks' outputs bit-identical; then a
rank that never launches: the other rank's watchdog must stop it with an
error naming the peer event and the missing sender.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (ranks, elements, workers a rank)
GRAPHS = {"mega_peers_allreduce_r2": (2, 4096, 4)}
WATCHDOG_MS = 200


def graph(name):
    from tilemega.mega.graph import Graph

    ranks, n, workers = GRAPHS[name]
    g = Graph("allreduce", workers=workers, threads=256, schedulers=0, ranks=ranks)
    x = g.input("x", [n])
    out = g.output("out", [n])
    g.all_reduce(x, out, name="ar")
    return g


def build_all(out):
    import tilemega

    paths = []
    for name in GRAPHS:
        art = tilemega.compile(graph(name).to_mlir(), chip="sm_90a", name=name,
                               mega_watchdog_ms=WATCHDOG_MS)
        paths.append(art.save(out))
    return paths


def _kernels(path, ranks, torch, n):
    """One MegaKernel a rank, bound to its x, rank word, inbox, the other
    ranks' inboxes and its output, and to every rank's events buffer."""
    from tilemega.runtime import load_mega

    gen = torch.Generator(device="cpu").manual_seed(0)
    xs = [torch.randn(n, generator=gen).to(torch.bfloat16).cuda() for _ in range(ranks)]
    inboxes = [torch.zeros(ranks, n, dtype=torch.bfloat16, device="cuda") for _ in range(ranks)]
    outs = [torch.full((n,), float("nan"), dtype=torch.bfloat16, device="cuda")
            for _ in range(ranks)]
    kernels = []
    for r in range(ranks):
        mk = load_mega(path)
        named = {"x": xs[r], "ar.rank": torch.tensor([r], dtype=torch.int32, device="cuda"),
                 "ar.inbox": inboxes[r], "out": outs[r]}
        named.update({f"ar.to{q}": inboxes[q] for q in range(ranks)})
        mk.bind(named)
        kernels.append(mk)
    events = [mk.events_address for mk in kernels]
    for r, mk in enumerate(kernels):
        mk.bind_peers(r, events)
        # Tables uploaded and residency checked now: a first launch does it
        # synchronously, which would wait for the rank launched before it
        # (measured on the H200: rank 1's kernel started only after rank
        # 0's watchdog had stopped it).
        mk.prepare()
    torch.cuda.synchronize()
    return kernels, xs, outs


def check_artifact(path, torch):
    """The float64 verdict of one loopback run, and the dead-peer check."""
    from tilemega.runtime import MegaKernelError

    name = os.path.basename(path)[:-len(".json")]
    ranks, n, _ = GRAPHS[name]
    kernels, xs, outs = _kernels(path, ranks, torch, n)
    streams = [torch.cuda.Stream() for _ in range(ranks)]
    torch.cuda.synchronize()
    for mk, s in zip(kernels, streams):
        mk.launch(stream=s)
    torch.cuda.synchronize()
    for mk in kernels:
        mk.check()
    want = sum(x.double() for x in xs)
    errors = [float((o.double() - want).norm() / want.norm()) for o in outs]
    same = all(torch.equal(outs[0], o) for o in outs[1:])
    details = {"ranks": ranks, "elements": n, "per_rank_rel_l2": errors,
               "ranks_bit_identical": same}
    # A rank that never launches: rank 0 alone must stop on its watchdog,
    # naming the peer event's word of the missing sender.
    lonely, _, _ = _kernels(path, ranks, torch, n)
    try:
        lonely[0].launch()
        lonely[0].check()
        details["dead_peer"] = "no error: rank 0 finished without rank 1"
        named = False
    except MegaKernelError as exc:
        details["dead_peer"] = str(exc)[:400]
        named = "from rank 1" in str(exc) and "ar_pushed" in str(exc)
    torch.cuda.synchronize()
    error = max(errors)
    return {"error": error, "tolerance": 0.01, "details": details,
            "passed": error <= 0.01 and same and named}


if __name__ == "__main__":
    for p in build_all(sys.argv[1] if len(sys.argv) > 1 else "out"):
        print("built", p)
