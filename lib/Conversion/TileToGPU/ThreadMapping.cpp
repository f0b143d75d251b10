//===- ThreadMapping.cpp - which thread touches which element ---------------===//

#include "TileToGPUInternal.h"


#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

ThreadOwnership tile_to_gpu::getOwnership(Attribute layout,
                                          ArrayRef<int64_t> shape) {
  FailureOr<ThreadOwnership> ownership =
      tile::getThreadOwnership(layout, shape);
  assert(succeeded(ownership) && "layout was checked before lowering");
  return *ownership;
}

SmallVector<Value> tile_to_gpu::getThreadBase(OpBuilder &b, Location loc,
                                              const ThreadOwnership &ownership) {
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, loc, tid, cIndex(b, loc, 32));
  Value warp = arith::DivUIOp::create(b, loc, tid, cIndex(b, loc, 32));
  auto term = [&](Value id, int64_t stride, int64_t count,
                  int64_t scale) -> Value {
    if (count == 1 || scale == 0)
      return Value();
    Value v = id;
    if (stride != 1)
      v = arith::DivUIOp::create(b, loc, v, cIndex(b, loc, stride));
    v = arith::RemUIOp::create(b, loc, v, cIndex(b, loc, count));
    if (scale != 1)
      v = arith::MulIOp::create(b, loc, v, cIndex(b, loc, scale));
    return v;
  };
  SmallVector<Value> base;
  for (const tile::DimMapping &m : ownership.dims) {
    Value laneTerm = term(lane, m.laneStride, m.laneCount, m.laneScale);
    Value warpTerm = term(warp, m.warpStride, m.warpCount, m.warpScale);
    if (laneTerm && warpTerm)
      base.push_back(arith::AddIOp::create(b, loc, laneTerm, warpTerm));
    else if (laneTerm || warpTerm)
      base.push_back(laneTerm ? laneTerm : warpTerm);
    else
      base.push_back(cIndex(b, loc, 0));
  }
  return base;
}

void tile_to_gpu::forEachOwnedChunk(OpBuilder &b, Location loc,
                                    const ThreadOwnership &ownership,
                                    ArrayRef<int64_t> shape, int64_t width,
                                    function_ref<void(const OwnedChunk &)> fn) {
  SmallVector<Value> base = getThreadBase(b, loc, ownership);
  for (size_t slot = 0; slot < ownership.elements.size(); slot += width) {
    ArrayRef<int64_t> offsets = ownership.elements[slot];
    OwnedChunk chunk;
    chunk.offsets = offsets;
    chunk.slot = slot;
    for (unsigned d = 0; d < shape.size(); ++d) {
      Value idx = offsets[d] == 0
                      ? base[d]
                      : arith::AddIOp::create(b, loc, base[d],
                                              cIndex(b, loc, offsets[d]))
                            .getResult();
      chunk.indices.push_back(idx);
      if (ownership.overhangs[d]) {
        Value in = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         idx, cIndex(b, loc, shape[d]));
        chunk.inTile = andConditions(b, loc, chunk.inTile, in);
      }
    }
    fn(chunk);
  }
}

Value tile_to_gpu::sharedAddress(OpBuilder &b, Location loc, Value tile,
                                 Value index) {
  auto type = cast<MemRefType>(tile.getType());
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, tile);
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, tile);
  Value elements = meta.getOffset();
  if (index)
    elements = arith::AddIOp::create(b, loc, elements, index);
  Value bytes = arith::MulIOp::create(
      b, loc, elements,
      arith::ConstantIndexOp::create(b, loc,
                                     type.getElementTypeBitWidth() / 8));
  Value address = arith::AddIOp::create(b, loc, base, bytes);
  return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
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
  // A stage of a multi-buffered tile is swizzled like its alloc, as a tile of
  // its own (indices within the stage).
  return tile::getSharedSwizzle(original);
}

SmallVector<Value> tile_to_gpu::swizzleIndices(OpBuilder &b, Location loc,
                                               Value original,
                                               ArrayRef<Value> indices) {
  tile::SwizzleAttr swizzle = getSwizzle(original);
  if (!swizzle)
    return SmallVector<Value>(indices);
  auto type = cast<MemRefType>(original.getType());
  // Linearise (in column-block order when the rows are split into blocks:
  // block, then row, then column within the block), permute the element
  // offset, and split it back into indices.
  int64_t columns = swizzle.getColumns();
  int64_t rank = indices.size();
  // The XOR changes bits [base, base + bits) of the element offset only.
  // When a row (and a column block) spans a multiple of 2^(base + bits)
  // elements, those bits lie in the column index, which the XOR then
  // permutes within its row: the other indices stay and no division splits
  // the permuted offset back. That matters for rows that are not a power
  // of two (a 192-column GEMM tile), where the division is a multiply-high
  // sequence per element whose results ptxas kept in registers and spilled;
  // a power-of-two row divides by shifts, which LLVM folds, so those tiles
  // keep the general form (and the PTX their GPU checks were run on). Not
  // with column blocks: their physical order (block, row, column) is what
  // TMA and wgmma read, and an in-row XOR would leave the rows whole (a
  // layout only the threads agree on: a 192-column C tile stored by TMA
  // came out wrong on the H100).
  int64_t rowElems = type.getDimSize(rank - 1);
  int64_t span = int64_t(1) << (swizzle.getBase() + swizzle.getBits());
  bool inColumn = !llvm::isPowerOf2_64(rowElems) && rowElems % span == 0 &&
                  columns == 0;
  Value linear = cIndex(b, loc, 0);
  for (int64_t d = 0; d + (columns ? 1 : 0) < rank; ++d) {
    Value scaled =
        arith::MulIOp::create(b, loc, linear, cIndex(b, loc, type.getDimSize(d)));
    linear = arith::AddIOp::create(b, loc, scaled, indices[d]);
  }
  if (columns) {
    // linear is the row; the block starts every rows * columns elements.
    int64_t rows = type.getNumElements() / type.getDimSize(rank - 1);
    Value col = indices[rank - 1];
    Value block = arith::DivUIOp::create(b, loc, col, cIndex(b, loc, columns));
    Value within = arith::RemUIOp::create(b, loc, col, cIndex(b, loc, columns));
    linear = arith::AddIOp::create(
        b, loc,
        arith::AddIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, block,
                                  cIndex(b, loc, rows * columns)),
            arith::MulIOp::create(b, loc, linear, cIndex(b, loc, columns))),
        within);
  }
  int64_t mask = ((int64_t(1) << swizzle.getBits()) - 1) << swizzle.getBase();
  Value shifted = arith::ShRUIOp::create(b, loc, linear,
                                         cIndex(b, loc, swizzle.getShift()));
  Value bits = arith::AndIOp::create(b, loc, shifted, cIndex(b, loc, mask));
  if (inColumn) {
    SmallVector<Value> result(indices);
    result[rank - 1] = arith::XOrIOp::create(b, loc, indices[rank - 1], bits);
    return result;
  }
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
  // The callers chose `width` so that the access is aligned to its size
  // (static shapes, offset divisibility, 16-byte aligned base pointers that
  // the runtime checks); saying so lets LLVM emit one vector instruction.
  auto load = vector::LoadOp::create(b, loc, VectorType::get({width}, elem),
                                     memref, indices);
  load.setAlignment(width * elem.getIntOrFloatBitWidth() / 8);
  return load;
}

void tile_to_gpu::storeElements(OpBuilder &b, Location loc, Value value,
                                Value memref, ArrayRef<Value> indices) {
  if (auto vec = dyn_cast<VectorType>(value.getType())) {
    auto store = vector::StoreOp::create(b, loc, value, memref, indices);
    store.setAlignment(vec.getNumElements() *
                       vec.getElementType().getIntOrFloatBitWidth() / 8);
  } else
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
