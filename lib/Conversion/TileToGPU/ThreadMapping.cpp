//===- ThreadMapping.cpp - which thread touches which element ---------------===//

#include "TileToGPUInternal.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

void tile_to_gpu::forEachOwnedChunk(OpBuilder &b, Location loc,
                                    BlockedLayoutAttr layout,
                                    ArrayRef<int64_t> shape, int64_t width,
                                    function_ref<void(const OwnedChunk &)> fn) {
  unsigned rank = shape.size();
  ArrayRef<int64_t> spt = layout.getSizePerThread();
  ArrayRef<int64_t> tpw = layout.getThreadsPerWarp();
  ArrayRef<int64_t> wpb = layout.getWarpsPerBlock();

  // Split lane and warp ids over the dimensions, fastest dimension first.
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, loc, tid, cIndex(b, loc, 32));
  Value warp = arith::DivUIOp::create(b, loc, tid, cIndex(b, loc, 32));
  SmallVector<Value> laneOf(rank), warpOf(rank);
  for (int64_t d : layout.getOrder()) {
    laneOf[d] = tpw[d] == 1 ? cIndex(b, loc, 0)
                            : arith::RemUIOp::create(b, loc, lane,
                                                     cIndex(b, loc, tpw[d]))
                                  .getResult();
    lane = arith::DivUIOp::create(b, loc, lane, cIndex(b, loc, tpw[d]));
    warpOf[d] = wpb[d] == 1 ? cIndex(b, loc, 0)
                            : arith::RemUIOp::create(b, loc, warp,
                                                     cIndex(b, loc, wpb[d]))
                                  .getResult();
    warp = arith::DivUIOp::create(b, loc, warp, cIndex(b, loc, wpb[d]));
  }
  // base[d] = (warp_d * tpw_d + lane_d) * spt_d: the thread's first element.
  SmallVector<Value> base(rank);
  SmallVector<int64_t> reps(rank);
  bool exact = true;
  for (unsigned d = 0; d < rank; ++d) {
    Value w = arith::MulIOp::create(b, loc, warpOf[d], cIndex(b, loc, tpw[d]));
    Value t = arith::AddIOp::create(b, loc, w, laneOf[d]);
    base[d] = arith::MulIOp::create(b, loc, t, cIndex(b, loc, spt[d]));
    int64_t chunk = layout.getChunkExtent(d);
    reps[d] = (shape[d] + chunk - 1) / chunk;
    exact &= shape[d] % chunk == 0;
  }

  int64_t sptProduct = 1;
  for (int64_t s : spt)
    sptProduct *= s;
  // Enumerate (rep, element) tuples row-major; the innermost element index
  // steps by `width` so one chunk is one vector access.
  SmallVector<int64_t> rep(rank, 0), elem(rank, 0);
  int64_t numReps = 1;
  for (int64_t r : reps)
    numReps *= r;
  for (int64_t repLinear = 0; repLinear < numReps; ++repLinear) {
    int64_t rem = repLinear;
    for (int d = rank - 1; d >= 0; --d) {
      rep[d] = rem % reps[d];
      rem /= reps[d];
    }
    for (int64_t elemLinear = 0; elemLinear < sptProduct;
         elemLinear += width) {
      int64_t erem = elemLinear;
      for (int d = rank - 1; d >= 0; --d) {
        elem[d] = erem % spt[d];
        erem /= spt[d];
      }
      OwnedChunk chunk;
      chunk.slot = repLinear * sptProduct + elemLinear;
      for (unsigned d = 0; d < rank; ++d) {
        int64_t offset = rep[d] * layout.getChunkExtent(d) + elem[d];
        Value idx = offset == 0 ? base[d]
                                : arith::AddIOp::create(
                                      b, loc, base[d], cIndex(b, loc, offset))
                                      .getResult();
        chunk.indices.push_back(idx);
        if (!exact && shape[d] % layout.getChunkExtent(d) != 0) {
          Value in = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           idx, cIndex(b, loc, shape[d]));
          chunk.inTile = andConditions(b, loc, chunk.inTile, in);
        }
      }
      fn(chunk);
    }
  }
}

void tile_to_gpu::emitGuarded(OpBuilder &b, Location loc, Value cond,
                              function_ref<void(OpBuilder &)> body) {
  if (!cond) {
    body(b);
    return;
  }
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body(b);
}

Value tile_to_gpu::andConditions(OpBuilder &b, Location loc, Value a,
                                 Value c) {
  if (!a)
    return c;
  if (!c)
    return a;
  return arith::AndIOp::create(b, loc, a, c);
}

static constexpr int64_t kDivisorCap = int64_t(1) << 20;

int64_t tile_to_gpu::knownDivisor(Value value) {
  if (auto cst = getConstantIntValue(value)) {
    if (*cst == 0)
      return kDivisorCap;
    int64_t v = *cst < 0 ? -*cst : *cst;
    return v & -v; // Lowest set bit.
  }
  Operation *def = value.getDefiningOp();
  if (!def)
    return 1;
  if (auto mul = dyn_cast<arith::MulIOp>(def))
    return std::min(kDivisorCap,
                    knownDivisor(mul.getLhs()) * knownDivisor(mul.getRhs()));
  if (auto add = dyn_cast<arith::AddIOp>(def))
    return std::min(knownDivisor(add.getLhs()), knownDivisor(add.getRhs()));
  if (auto shl = dyn_cast<arith::ShLIOp>(def))
    if (auto amount = getConstantIntValue(shl.getRhs()))
      return std::min(kDivisorCap, knownDivisor(shl.getLhs()) << *amount);
  return 1;
}

int64_t tile_to_gpu::knownDivisor(OpFoldResult value) {
  if (auto v = dyn_cast<Value>(value))
    return knownDivisor(v);
  int64_t c = *getConstantIntValue(value);
  if (c == 0)
    return kDivisorCap;
  c = c < 0 ? -c : c;
  return c & -c;
}

SmallVector<Value> tile_to_gpu::addOffsets(OpBuilder &b, Location loc,
                                           ArrayRef<OpFoldResult> offsets,
                                           ArrayRef<Value> rel) {
  SmallVector<Value> result;
  for (auto [off, r] : llvm::zip_equal(offsets, rel)) {
    std::optional<int64_t> cst = getConstantIntValue(off);
    if (cst && *cst == 0) {
      result.push_back(r);
      continue;
    }
    Value offValue = cst ? cIndex(b, loc, *cst) : cast<Value>(off);
    result.push_back(arith::AddIOp::create(b, loc, offValue, r));
  }
  return result;
}

Value tile_to_gpu::boundsCheck(OpBuilder &b, Location loc, MemRefType type,
                               ArrayRef<OpFoldResult> offsets,
                               ArrayRef<Value> indices,
                               ArrayRef<int64_t> sizes) {
  Value cond;
  for (unsigned d = 0; d < indices.size(); ++d) {
    std::optional<int64_t> cst = getConstantIntValue(offsets[d]);
    // Static offsets were checked in bounds by the verifier.
    if (cst && *cst + sizes[d] <= type.getDimSize(d))
      continue;
    Value in = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                     indices[d],
                                     cIndex(b, loc, type.getDimSize(d)));
    cond = andConditions(b, loc, cond, in);
  }
  return cond;
}

tile::SwizzleAttr tile_to_gpu::getSwizzle(Value original) {
  if (auto alloc = original.getDefiningOp<tile::AllocSharedOp>())
    if (tile::SwizzleAttr swizzle = alloc.getSwizzleAttr())
      if (swizzle.getBits() > 0)
        return swizzle;
  return nullptr;
}

SmallVector<Value> tile_to_gpu::swizzleIndices(OpBuilder &b, Location loc,
                                               Value original,
                                               ArrayRef<Value> indices) {
  tile::SwizzleAttr swizzle = getSwizzle(original);
  if (!swizzle)
    return SmallVector<Value>(indices);
  auto type = cast<MemRefType>(original.getType());
  // Linearise, permute the element offset, and split it back into indices.
  Value linear = cIndex(b, loc, 0);
  for (unsigned d = 0; d < indices.size(); ++d) {
    Value scaled =
        arith::MulIOp::create(b, loc, linear, cIndex(b, loc, type.getDimSize(d)));
    linear = arith::AddIOp::create(b, loc, scaled, indices[d]);
  }
  int64_t mask = ((int64_t(1) << swizzle.getBits()) - 1) << swizzle.getBase();
  Value shifted = arith::ShRUIOp::create(b, loc, linear,
                                         cIndex(b, loc, swizzle.getShift()));
  Value bits = arith::AndIOp::create(b, loc, shifted, cIndex(b, loc, mask));
  Value permuted = arith::XOrIOp::create(b, loc, linear, bits);
  SmallVector<Value> result(indices.size());
  for (int d = indices.size() - 1; d >= 0; --d) {
    Value size = cIndex(b, loc, type.getDimSize(d));
    result[d] = arith::RemUIOp::create(b, loc, permuted, size);
    permuted = arith::DivUIOp::create(b, loc, permuted, size);
  }
  return result;
}

Value tile_to_gpu::loadElements(OpBuilder &b, Location loc, Value memref,
                                ArrayRef<Value> indices, int64_t width) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  if (width == 1)
    return memref::LoadOp::create(b, loc, memref, indices);
  return vector::LoadOp::create(b, loc, VectorType::get({width}, elem), memref,
                                indices);
}

void tile_to_gpu::storeElements(OpBuilder &b, Location loc, Value value,
                                Value memref, ArrayRef<Value> indices) {
  if (isa<VectorType>(value.getType()))
    vector::StoreOp::create(b, loc, value, memref, indices);
  else
    memref::StoreOp::create(b, loc, value, memref, indices);
}

Value tile_to_gpu::convertElements(OpBuilder &b, Location loc, Value value,
                                   Type toElement) {
  Type from = getElementTypeOrSelf(value.getType());
  if (from == toElement)
    return value;
  Type to = toElement;
  if (auto vec = dyn_cast<VectorType>(value.getType()))
    to = VectorType::get(vec.getShape(), toElement);
  if (isa<FloatType>(from)) {
    if (from.getIntOrFloatBitWidth() < toElement.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, to, value);
    if (from.getIntOrFloatBitWidth() > toElement.getIntOrFloatBitWidth())
      return arith::TruncFOp::create(b, loc, to, value);
    // Same width, different format (f16 <-> bf16): go through f32.
    Type f32 = b.getF32Type();
    Type mid = f32;
    if (auto vec = dyn_cast<VectorType>(value.getType()))
      mid = VectorType::get(vec.getShape(), f32);
    Value wide = arith::ExtFOp::create(b, loc, mid, value);
    return arith::TruncFOp::create(b, loc, to, wide);
  }
  if (from.getIntOrFloatBitWidth() < toElement.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(b, loc, to, value);
  return arith::TruncIOp::create(b, loc, to, value);
}
