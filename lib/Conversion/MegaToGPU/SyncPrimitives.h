//===- SyncPrimitives.h - PTX memory operations of the mega runtime -*- C++ -*-===//
//
// The persistent kernel synchronises CTAs through global counters with the
// PTX memory model's scoped operations (acquire loads, release stores,
// fences, atomics at gpu scope) and reads %globaltimer for its watchdogs.
// MLIR has no ops for scoped loads and stores, so these are one-instruction
// inline-asm calls on 64-bit global addresses; every one clobbers memory so
// that LLVM keeps the surrounding loads and stores on their side of it.
//
//===----------------------------------------------------------------------===//

#ifndef TILEMEGA_LIB_CONVERSION_MEGATOGPU_SYNCPRIMITIVES_H
#define TILEMEGA_LIB_CONVERSION_MEGATOGPU_SYNCPRIMITIVES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

namespace mlir::tilemega::mega_to_gpu {

class SyncPrimitives {
public:
  SyncPrimitives(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// The 64-bit address of a global memref's first element.
  Value baseAddress(Value memref);
  /// `base + index * elementBytes` for an i32 or index `index`.
  Value address(Value base, Value index, int64_t elementBytes);

  Value loadAcquire(Value addr);  // ld.acquire.gpu.b32
  Value loadVolatile(Value addr); // ld.volatile.b32: sees other CTAs' writes
  void storeRelease(Value addr, Value value); // st.release.gpu.b32
  void storeVolatile(Value addr, Value value); // st.volatile.b32
  void storeVolatile64(Value addr, Value value);
  /// fence.acq_rel.gpu, then red.relaxed.gpu.add: a release increment.
  void releaseIncrement(Value addr);
  void fence(); // fence.acq_rel.gpu
  Value atomicAdd(Value addr, Value value);            // returns the old value
  Value atomicCas(Value addr, Value expected, Value desired); // the old value
  /// cp.async.bulk.prefetch.L2: `bytes` (a multiple of 16) from a 16-byte
  /// aligned address into L2, without waiting.
  void prefetchL2(Value addr, Value bytes);
  /// vote.sync.ballot over the full warp: bit i is lane i's `flag`.
  Value ballot(Value flag);
  /// Number of consecutive set bits from bit 0 of an i32.
  Value countTrailingOnes(Value bits);
  Value globalTimer(); // %globaltimer, ns, i64
  Value smId();        // %smid, i32

private:
  Value asmCall(Type result, ValueRange operands, StringRef text,
                StringRef constraints);

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::tilemega::mega_to_gpu

#endif // TILEMEGA_LIB_CONVERSION_MEGATOGPU_SYNCPRIMITIVES_H
