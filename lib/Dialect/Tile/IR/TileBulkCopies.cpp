//===- TileBulkCopies.cpp - when a tile copy can be one TMA box -----------===//

#include "tilemega/Dialect/Tile/IR/TileBulkCopies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile;

static BulkCopyChoice refuse(const Twine &why) {
  BulkCopyChoice choice;
  choice.whyNot = why.str();
  return choice;
}

/// The box (or column-block boxes) of one block's whole copy.
static BulkCopyChoice chooseWholeCopy(MemRefType global, MemRefType tile,
                                      ArrayRef<int64_t> sizes,
                                      SwizzleAttr swizzle) {
  if (!isGlobal(global) || !isShared(tile))
    return refuse("TMA copies from global to shared memory");
  Type elem = global.getElementType();
  if (elem != tile.getElementType())
    return refuse("TMA does not convert element types");
  int64_t bits = elem.getIntOrFloatBitWidth();
  if (bits % 8 || !llvm::isPowerOf2_64(bits / 8) || bits > 64)
    return refuse("TMA moves elements of 1, 2, 4 or 8 bytes");
  int64_t elemBytes = bits / 8;
  int64_t rank = global.getRank();
  if (rank < 1 || rank > kTmaMaxRank)
    return refuse("TMA boxes have rank 1 to 5, the tensor has rank " +
                  Twine(rank));
  if (!global.hasStaticShape() || !global.getLayout().isIdentity())
    return refuse("the tensor is not a statically shaped row-major one");
  if (static_cast<int64_t>(sizes.size()) != rank ||
      tile.getShape() != sizes)
    return refuse("the box is not the whole destination tile");
  // Rows split into column blocks: one box per block.
  SmallVector<int64_t> box(sizes);
  int64_t boxes = 1;
  if (swizzle && swizzle.getColumns() > 0 &&
      swizzle.getColumns() < sizes.back()) {
    if (rank < 2 || sizes.back() % swizzle.getColumns())
      return refuse("the box's rows are not whole column blocks of " +
                    Twine(swizzle.getColumns()));
    box.back() = swizzle.getColumns();
    boxes = sizes.back() / swizzle.getColumns();
  }
  for (int64_t extent : box)
    if (extent < 1 || extent > kTmaMaxBoxDim)
      return refuse("a TMA box extent is at most " + Twine(kTmaMaxBoxDim) +
                    ", the box has " + Twine(extent));
  int64_t rowBytes = global.getShape().back() * elemBytes;
  if (rank > 1 && rowBytes % kTmaStrideAlign)
    return refuse("the tensor's rows are " + Twine(rowBytes) +
                  " bytes, not a multiple of " + Twine(kTmaStrideAlign) +
                  " (TMA's stride alignment)");
  int64_t innerBytes = box.back() * elemBytes;
  if (innerBytes % 16)
    return refuse("the box's rows are " + Twine(innerBytes) +
                  " bytes, not a multiple of 16");
  BulkCopyChoice choice;
  choice.box = box;
  choice.boxes = boxes;
  if (!swizzle || swizzle.getBits() == 0)
    return choice;
  // TMA's swizzle modes XOR the 16-byte chunk index (bits 4..) with the row
  // index mod 8 of rows of the span: on elements, base log2(16 / bytes).
  int64_t base = llvm::Log2_64(16 / std::min<int64_t>(elemBytes, 16));
  if (elemBytes > 16 || swizzle.getBase() != base || swizzle.getShift() != 3 ||
      swizzle.getBits() < 1 || swizzle.getBits() > 3)
    return refuse("the tile's swizzle is none of TMA's 32/64/128-byte modes");
  int64_t span = int64_t(16) << swizzle.getBits();
  if (innerBytes != span)
    return refuse("the tile's rows are " + Twine(innerBytes) +
                  " bytes, not the " + Twine(span) + " of its swizzle");
  int64_t boxBytes = tile.getNumElements() / boxes * elemBytes;
  if (boxBytes % (8 * span))
    return refuse("the tile is not a whole number of 8-row swizzle atoms");
  choice.swizzleBytes = span;
  return choice;
}

BulkCopyChoice tile::chooseBulkCopy(MemRefType global, MemRefType tile,
                                    ArrayRef<int64_t> sizes,
                                    SwizzleAttr swizzle, int64_t multicast) {
  BulkCopyChoice choice = chooseWholeCopy(global, tile, sizes, swizzle);
  if (!choice.ok() || multicast == 1 || choice.boxes % multicast == 0)
    return choice;
  // Split each box's rows among the cluster's blocks.
  int64_t elemBytes = tile.getElementTypeBitWidth() / 8;
  int64_t pieceBytes =
      tile.getNumElements() / choice.boxes / multicast * elemBytes;
  if (choice.box.size() < 2 || choice.box[0] % multicast ||
      pieceBytes % choice.sharedAlignment())
    return refuse("the box (" + Twine(choice.boxes) + " of " +
                  Twine(choice.box[0]) + " rows) does not split into " +
                  Twine(multicast) + " pieces of whole " +
                  Twine(choice.sharedAlignment()) +
                  "-byte swizzle atoms, one for each block of the cluster");
  choice.box[0] /= multicast;
  choice.rowSplit = multicast;
  return choice;
}

bool tile::isClusterUniform(Value value, int64_t cluster) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    Operation *owner = arg.getOwner()->getParentOp();
    if (isa<FunctionOpInterface>(owner))
      return true;
    if (isa<KernelOp>(owner))
      return arg.getArgNumber() != 0;
    auto boundsUniform = [&](ValueRange bounds) {
      return llvm::all_of(
          bounds, [&](Value v) { return isClusterUniform(v, cluster); });
    };
    if (auto loop = dyn_cast<scf::ForOp>(owner))
      return arg == loop.getInductionVar() &&
             boundsUniform({loop.getLowerBound(), loop.getUpperBound(),
                            loop.getStep()});
    if (auto loop = dyn_cast<PipelinedOp>(owner))
      return arg == loop.getInductionVar() &&
             boundsUniform({loop.getLowerBound(), loop.getUpperBound(),
                            loop.getStep()});
    return false;
  }
  Operation *def = value.getDefiningOp();
  if (def->getNumRegions() || !isMemoryEffectFree(def))
    return false;
  // The first block index divided by a multiple of the cluster size: the
  // cluster's index (clusters are `cluster` consecutive blocks).
  if (isa<arith::DivUIOp, arith::DivSIOp, arith::FloorDivSIOp>(def)) {
    auto arg = dyn_cast<BlockArgument>(def->getOperand(0));
    std::optional<int64_t> divisor = getConstantIntValue(def->getOperand(1));
    if (arg && isa<KernelOp>(arg.getOwner()->getParentOp()) &&
        arg.getArgNumber() == 0 && divisor && *divisor > 0 &&
        *divisor % cluster == 0)
      return true;
  }
  return llvm::all_of(def->getOperands(),
                      [&](Value v) { return isClusterUniform(v, cluster); });
}

bool tile::isRunUniformly(Operation *op, int64_t cluster) {
  auto uniform = [&](ValueRange values) {
    return llvm::all_of(values,
                        [&](Value v) { return isClusterUniform(v, cluster); });
  };
  for (Operation *parent = op->getParentOp(); parent && !isa<KernelOp>(parent);
       parent = parent->getParentOp()) {
    if (auto loop = dyn_cast<scf::ForOp>(parent)) {
      if (!uniform({loop.getLowerBound(), loop.getUpperBound(), loop.getStep()}))
        return false;
    } else if (auto loop = dyn_cast<PipelinedOp>(parent)) {
      if (!uniform({loop.getLowerBound(), loop.getUpperBound(), loop.getStep()}))
        return false;
    } else if (auto branch = dyn_cast<scf::IfOp>(parent)) {
      if (!isClusterUniform(branch.getCondition(), cluster))
        return false;
    } else if (!isa<ProducerOp>(parent)) {   // the producer: once a block
      return false;
    }
  }
  return true;
}

BlockArgument tile::getBulkCopyArgument(Value src) {
  while (Operation *def = src.getDefiningOp()) {
    if (auto collapse = dyn_cast<memref::CollapseShapeOp>(def))
      src = collapse.getSrc();
    else if (auto expand = dyn_cast<memref::ExpandShapeOp>(def))
      src = expand.getSrc();
    else
      return nullptr;
    // A reshape keeps the bytes in order only over a row-major source.
    if (!cast<MemRefType>(src.getType()).getLayout().isIdentity())
      return nullptr;
  }
  auto arg = cast<BlockArgument>(src);
  if (!isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
    return nullptr;
  return arg;
}

LinearBulkCopyChoice tile::chooseLinearBulkCopy(MemRefType global,
                                                MemRefType tile,
                                                ArrayRef<int64_t> sizes,
                                                SwizzleAttr swizzle,
                                                ArrayRef<OpFoldResult> offsets) {
  LinearBulkCopyChoice choice;
  auto refuseLinear = [&](const Twine &why) {
    choice.whyNot = why.str();
    return choice;
  };
  if (!isGlobal(global) || !isShared(tile))
    return refuseLinear("bulk copies go from global to shared memory");
  Type elem = global.getElementType();
  if (elem != tile.getElementType() || !elem.isIntOrFloat() ||
      elem.getIntOrFloatBitWidth() % 8)
    return refuseLinear("bulk copies move whole-byte elements of one type");
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  int64_t rank = global.getRank();
  if (rank < 1 || static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(offsets.size()) != rank ||
      tile.getShape() != sizes)
    return refuseLinear("the box is not the whole destination tile");
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!global.hasStaticShape() ||
      failed(global.getStridesAndOffset(strides, offset)) ||
      llvm::any_of(strides, ShapedType::isDynamic) || strides.back() != 1)
    return refuseLinear("the tensor is not statically shaped and strided with "
                        "contiguous rows");
  for (int64_t d = 0; d + 1 < rank; ++d)
    if ((strides[d] * elemBytes) % 16)
      return refuseLinear("a stride of the tensor is " +
                          Twine(strides[d] * elemBytes) +
                          " bytes, not a multiple of 16");
  if (swizzle && swizzle.getBits() != 0)
    return refuseLinear("the tile is swizzled (a bulk copy writes its bytes "
                        "in order)");
  if (!tile.getLayout().isIdentity()) {
    SmallVector<int64_t> tileStrides;
    int64_t tileOffset;
    if (failed(tile.getStridesAndOffset(tileStrides, tileOffset)) ||
        tileStrides != computeSuffixProduct(tile.getShape()))
      return refuseLinear("the tile is not contiguous");
  }
  int64_t inner = sizes.back();
  choice.rowBytes = inner * elemBytes;
  if (choice.rowBytes % 16)
    return refuseLinear("the box's rows are " + Twine(choice.rowBytes) +
                        " bytes, not a multiple of 16");
  if (global.getShape().back() % inner || knownDivisor(offsets.back()) % inner)
    return refuseLinear("the box's rows of " + Twine(inner) +
                        " may cross the end of a tensor row of " +
                        Twine(global.getShape().back()) +
                        " (its column offset is not known to be a multiple "
                        "of them)");
  choice.rows = tile.getNumElements() / inner;
  return choice;
}

static constexpr int64_t kDivisorCap = int64_t(1) << 20;

int64_t tile::knownDivisor(Value value) {
  if (auto cst = getConstantIntValue(value)) {
    if (*cst == 0)
      return kDivisorCap;
    int64_t v = *cst < 0 ? -*cst : *cst;
    return v & -v; // Lowest set bit.
  }
  Operation *def = value.getDefiningOp();
  if (!def) {
    // A loop counter is lb + i * step: divisible by what both are.
    auto arg = cast<BlockArgument>(value);
    // During conversion a block may be detached for a moment: no parent.
    Operation *parent = arg.getOwner()->getParentOp();
    if (auto loop = dyn_cast_or_null<scf::ForOp>(parent))
      if (arg == loop.getInductionVar())
        return std::min(knownDivisor(loop.getLowerBound()),
                        knownDivisor(loop.getStep()));
    if (auto loop = dyn_cast_or_null<PipelinedOp>(parent))
      if (arg == loop.getInductionVar())
        return std::min(knownDivisor(loop.getLowerBound()),
                        knownDivisor(loop.getStep()));
    return 1;
  }
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

int64_t tile::knownDivisor(OpFoldResult value) {
  if (auto v = dyn_cast<Value>(value))
    return knownDivisor(v);
  int64_t c = *getConstantIntValue(value);
  if (c == 0)
    return kDivisorCap;
  c = c < 0 ? -c : c;
  return c & -c;
}
