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


def waited_empty_graph(tasks: int, workers: int = 131, threads: int = 256) -> Graph:
    """`tasks` empty task instances that each wait for one event, which a
    one-unit task fires at the start: past the first entries every wait
    finds its event fired, so the run time is launch + ceil(tasks /
    workers) dispatches of an entry with one satisfied wait (its acquire
    round trip included) - what an entry of a real graph pays at least,
    where empty_graph_mlir's entries wait for nothing."""
    import tilemega.language as T

    from .bodies import Access, t_body

    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")

    def start(flag: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=threads):
            pass

    def waited(flag: T.Tensor((1,), "int32")):
        with T.Kernel(tasks, threads=threads):
            pass

    g = Graph("empty_waited", workers=workers, threads=threads)
    flag = g.scratch("flag", [1], "int32")
    # The footprints make the event: the start task "writes" the flag that
    # every waited task "reads" (neither touches it).
    # One unit an instance, as empty_graph_mlir's (mega-decompose would
    # group these weightless units).
    g._task("empty", "start", t_body("empty_start_task", start, 1, [Access("write", 0, 0, 0, 1)],
                                     threads, emit_now=False), [("flag", flag)],
            units_per_task=1)
    g._task("empty", "waited", t_body("empty_waited_task", waited, tasks,
                                      [Access("read", 0, 0, 0, 1)], threads, emit_now=False),
            [("flag", flag)], units_per_task=1)
    return g


def compile_empty(tasks: int, out: str, workers: int = 131, waited: bool = False,
                  **options) -> str:
    """mega_empty_<tasks> (empty_graph_mlir), or with waited
    mega_empty_waited_<tasks> (waited_empty_graph)."""
    import tilemega

    if waited:
        return compile_graph(waited_empty_graph(tasks, workers), out,
                             name=f"mega_empty_waited_{tasks}", **options)
    art = tilemega.compile(empty_graph_mlir(tasks, workers), chip="sm_90a",
                           name=f"mega_empty_{tasks}", **options)
    return art.save(out)
