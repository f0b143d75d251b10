//===- Passes.td - TileMega conversions --------------------*- tablegen -*-===//

#ifndef TILEMEGA_CONVERSION_PASSES_TD
#define TILEMEGA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTileToGPU : Pass<"convert-tile-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower tile kernels to gpu.func kernels over scf/memref/vector";
  let description = [{
    Turns every `func.func` that holds a `tile.kernel` into a `gpu.func`
    kernel in the `gpu.module @tilemega_kernels`, and records its launch
    configuration (grid, block, dynamic shared memory, parameters) in the
    module attribute `tilemega.kernels`, which the artifact writer reads.

    Inside the kernel, tile ops become per-thread code: `tile.alloc_shared`
    becomes a view into the dynamic shared memory, `tile.alloc_fragment` a
    per-thread register array sized by its layout, `tile.copy` /
    `tile.parallel` / `tile.fill` loops over the elements each thread owns
    (vectorised and, for global memory, masked), with `gpu.barrier`s where
    shared memory changes hands. Fragments must have layouts: run
    `tile-infer-layouts` first.

    `tile.copy async` becomes one `nvgpu.device_async_copy` (cp.async) per
    4-, 8- or 16-byte chunk a thread owns, with a source count of 0 (a
    zero-filled chunk) outside the global buffer; no barriers go around it.
    `tile.async_commit` and `tile.async_wait pending N` become
    `nvvm.cp.async.commit.group` and `nvvm.cp.async.wait.group N`.

    ```mlir
    func.func @k(%A: memref<64xf32>) {
      tile.kernel blocks(%b) in [1] threads 32 { ... }
      return
    }
    // becomes
    gpu.module @tilemega_kernels {
      gpu.func @k(%A: memref<64xf32>) kernel attributes {...} { ... }
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::memref::MemRefDialect", "::mlir::vector::VectorDialect",
    "::mlir::arith::ArithDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect"
  ];
}

#endif // TILEMEGA_CONVERSION_PASSES_TD
