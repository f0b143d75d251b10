"""Artifacts of a graph: the persistent mega-kernel, the same bodies as one
kernel per operator (the baseline a mega-kernel must beat), and graphs of
empty tasks that measure the per-task dispatch cost."""

import json
import os

from .graph import Graph

#: The body of an empty task: a kernel that does nothing.
_EMPTY_BODY = """  func.func @empty_task() {{
    tile.kernel blocks(%u) in [{units}] threads {threads} {{
    }}
    return
  }}"""


def compile_graph(graph: Graph, out: str, name: str = None, **options) -> str:
    """Compiles `graph` to one persistent kernel; returns the artifact path.
    `options` are tilemega.compile's mega_* options."""
    import tilemega

    art = tilemega.compile(graph.to_mlir(), chip="sm_90a", name=name or graph.name,
                           **options)
    return art.save(out)


def compile_per_operator(graph: Graph, out: str, name: str) -> str:
    """The graph's bodies as standalone kernels (grid = units) in one
    artifact, and `<name>.launches.json`: the tasks in graph order as
    launches over named tensors. Returns the launch list's path."""
    import tilemega

    text = graph.to_mlir()
    funcs = text[:text.index("  mega.graph")] + "}\n"
    art = tilemega.compile(funcs, chip="sm_90a", name=name)
    path = art.save(out)
    launches = {
        "artifact": os.path.basename(path),
        "tensors": {t.name: {"dtype": t.dtype, "shape": list(t.shape)}
                    for t in graph.tensors if t.role in ("scratch", "output")},
        "launches": [{"kernel": task.body.name, "args": [t.name for t in task.args]}
                     for task in graph.tasks],
        "output": next(t.name for t in graph.tensors if t.role == "output"),
    }
    launch_path = os.path.join(out, f"{name}.launches.json")
    with open(launch_path, "w") as f:
        json.dump(launches, f, indent=1)
    return launch_path


def empty_graph_mlir(tasks: int, workers: int = 131, threads: int = 256) -> str:
    """A graph of `tasks` independent empty task instances (one unit each):
    its run time is launch + ceil(tasks / workers) dispatches."""
    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    body = _EMPTY_BODY.format(units=tasks, threads=threads)
    graph = (f"  mega.graph @empty() workers {workers} schedulers 1 {{\n"
             f"    mega.task @nop body @empty_task() count {tasks} "
             f"{{units_per_task = 1 : i64}}\n  }}")
    return "module {\n" + body + "\n" + graph + "\n}\n"


def compile_empty(tasks: int, out: str, workers: int = 131, **options) -> str:
    import tilemega

    art = tilemega.compile(empty_graph_mlir(tasks, workers), chip="sm_90a",
                           name=f"mega_empty_{tasks}", **options)
    return art.save(out)
