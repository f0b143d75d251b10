"""Mega-kernel graphs: task bodies (bodies.py), the graph builder (graph.py)
and model graphs (models.py); reference.py is the PyTorch reference.

Importing this package needs no native code; building IR does."""

from .bodies import Access, Body
from .graph import Graph, Task, Tensor
from .models import LlamaConfig, ModelConfig, decode_graph, generation_graph, mlp_graph

__all__ = ["Access", "Body", "Graph", "Task", "Tensor", "LlamaConfig",
           "ModelConfig", "decode_graph", "generation_graph", "mlp_graph", "Engine",
           "TensorParallelEngine"]

# The engines, imported when first used (tilemega.mega.Engine, as the docs
# spell it): their modules need torch only once an engine is built.
_LAZY = {"Engine": "engine", "TensorParallelEngine": "tp_engine"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
