# RUN: %python %s | FileCheck %s
# REQUIRES: python

# The Python package embeds MLIR and our dialects: build tile IR with the
# generated builders, print it, and run the registered pipeline by name.

from tilemega.dialects import func, mega, tile
from tilemega.ir import (Attribute, Context, F32Type, InsertionPoint, Location,
                         MemRefType, Module)
from tilemega.passmanager import PassManager

with Context(), Location.unknown():
    f32 = F32Type.get()
    fragment = Attribute.parse("#tile.fragment")
    module = Module.create()
    with InsertionPoint(module.body):
        t = MemRefType.get([128], f32)
        fn = func.FuncOp("copy128", ([t, t], []))
        with InsertionPoint(fn.add_entry_block()):
            a, b = fn.arguments
            k = tile.kernel(grid=[1], threads=32)
            with InsertionPoint(k.body.blocks[0]):
                frag = tile.alloc_fragment(MemRefType.get([128], f32, memory_space=fragment))
                tile.copy(a, frag)
                tile.copy(frag, b)
            func.ReturnOp([])
    # CHECK-LABEL: func.func @copy128
    # CHECK: tile.kernel blocks(%{{.*}}) in [1] threads 32
    # CHECK: tile.alloc_fragment : memref<128xf32, #tile.fragment>
    # CHECK: tile.copy %{{.*}}[0] to %{{.*}}[0] sizes [128]
    print(module)
    assert module.operation.verify()

    # The mega dialect is registered too.
    # CHECK: mega_dialect_loaded
    assert Context.current.dialects["mega"] is not None
    print("mega_dialect_loaded")

    PassManager.parse("builtin.module(tilemega-tile-to-ptx-pipeline{chip=sm_90a})").run(module.operation)
    # CHECK: gpu.binary @tilemega_kernels
    # CHECK-SAME: .entry copy128
    print(module)
