//===- SyncPrimitives.cpp - PTX memory operations of the mega runtime -----===//

#include "SyncPrimitives.h"

using namespace mlir;
using namespace mlir::tilemega::mega_to_gpu;

Value SyncPrimitives::asmCall(Type result, ValueRange operands, StringRef text,
                              StringRef constraints) {
  std::string all = constraints.str();
  all += all.empty() ? "~{memory}" : ",~{memory}";
  auto op = LLVM::InlineAsmOp::create(
      b, loc, result ? TypeRange(result) : TypeRange(), operands, text, all,
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
  return result ? op.getResult(0) : Value();
}

Value SyncPrimitives::baseAddress(Value memref) {
  Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), ptr);
}

Value SyncPrimitives::address(Value base, Value index, int64_t elementBytes) {
  Value wide = index.getType().isIndex()
                   ? arith::IndexCastOp::create(b, loc, b.getI64Type(), index)
                         .getResult()
                   : arith::ExtSIOp::create(b, loc, b.getI64Type(), index)
                         .getResult();
  Value bytes = arith::MulIOp::create(
      b, loc, wide, arith::ConstantIntOp::create(b, loc, b.getI64Type(), elementBytes));
  return arith::AddIOp::create(b, loc, base, bytes);
}

Value SyncPrimitives::loadAcquire(Value addr) {
  return asmCall(b.getI32Type(), addr, "ld.acquire.gpu.global.b32 $0, [$1];",
                 "=r,l");
}

Value SyncPrimitives::loadVolatile(Value addr) {
  return asmCall(b.getI32Type(), addr, "ld.volatile.global.b32 $0, [$1];",
                 "=r,l");
}

void SyncPrimitives::storeRelease(Value addr, Value value) {
  asmCall(Type(), {addr, value}, "st.release.gpu.global.b32 [$0], $1;", "l,r");
}

void SyncPrimitives::storeVolatile(Value addr, Value value) {
  asmCall(Type(), {addr, value}, "st.volatile.global.b32 [$0], $1;", "l,r");
}

void SyncPrimitives::storeVolatile64(Value addr, Value value) {
  asmCall(Type(), {addr, value}, "st.volatile.global.b64 [$0], $1;", "l,l");
}

void SyncPrimitives::releaseIncrement(Value addr) {
  Value one = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 1);
  asmCall(Type(), {addr, one},
          "fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u32 [$0], $1;",
          "l,r");
}

void SyncPrimitives::fence() {
  asmCall(Type(), {}, "fence.acq_rel.gpu;", "");
}

Value SyncPrimitives::atomicAdd(Value addr, Value value) {
  return asmCall(b.getI32Type(), {addr, value},
                 "atom.acq_rel.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r");
}

Value SyncPrimitives::atomicCas(Value addr, Value expected, Value desired) {
  return asmCall(b.getI32Type(), {addr, expected, desired},
                 "atom.acq_rel.gpu.global.cas.b32 $0, [$1], $2, $3;",
                 "=r,l,r,r");
}

Value SyncPrimitives::globalTimer() {
  return asmCall(b.getI64Type(), {}, "mov.u64 $0, %globaltimer;", "=l");
}

Value SyncPrimitives::smId() {
  return asmCall(b.getI32Type(), {}, "mov.u32 $0, %smid;", "=r");
}

void SyncPrimitives::prefetchL2(Value addr, Value bytes) {
  asmCall(Type(), {addr, bytes}, "cp.async.bulk.prefetch.L2.global [$0], $1;",
          "l,r");
}

Value SyncPrimitives::ballot(Value flag) {
  Value word = arith::ExtUIOp::create(b, loc, b.getI32Type(), flag);
  return asmCall(b.getI32Type(), word,
                 "{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $1, 0;\n\t"
                 "vote.sync.ballot.b32 $0, p, 0xffffffff;\n\t}",
                 "=r,r");
}

Value SyncPrimitives::countTrailingOnes(Value bits) {
  // ctz(~x) = clz(brev(~x)); clz of 0 is 32.
  return asmCall(b.getI32Type(), bits,
                 "{\n\t.reg .b32 t;\n\tnot.b32 t, $1;\n\tbrev.b32 t, t;\n\t"
                 "clz.b32 $0, t;\n\t}",
                 "=r,r");
}
