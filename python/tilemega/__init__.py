"""TileMega: an MLIR compiler for tile kernels and persistent mega-kernels.

Importing `tilemega` is cheap and needs no native code: the compiler
(`tilemega.compile`, `tilemega.ir`, `tilemega.dialects`) loads the embedded
MLIR only when first used, and `tilemega.runtime` never does, so the runtime
works on a GPU machine that has only the compiled artifacts.
"""

__version__ = "0.1.0"

__all__ = ["compile", "CompiledModule", "CompileError", "CompileWarning", "__version__"]


def __getattr__(name):
    # Lazy: `import tilemega.runtime` must not pull in MLIR.
    if name in ("compile", "CompiledModule", "CompileError", "CompileWarning"):
        from . import compiler

        return getattr(compiler, name)
    if name in ("jit", "autotune"):
        # The decorators (their modules are callable too, for when
        # `import tilemega.jit` has bound the attribute to the module).
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{name}"), name)
    if name == "language":
        import importlib

        return importlib.import_module(f"{__name__}.language")
    raise AttributeError(f"module 'tilemega' has no attribute {name!r}")
