"""Mega-kernel graphs: task bodies (bodies.py), the graph builder (graph.py)
and model graphs (models.py); reference.py is the PyTorch reference.

Importing this package needs no native code; building IR does."""

from .bodies import Access, Body
from .graph import Graph, Task, Tensor
from .models import LlamaConfig, ModelConfig, decode_graph, generation_graph, mlp_graph

__all__ = ["Access", "Body", "Graph", "Task", "Tensor", "LlamaConfig",
           "ModelConfig", "decode_graph", "generation_graph", "mlp_graph"]
