//===- TileOps.cpp - tile dialect operations --------------------------------===//

#include "tilemega/Dialect/Tile/IR/TileDialect.h"
#include "tilemega/Dialect/Tile/IR/TileBulkCopies.h"
#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"
#include "tilemega/Dialect/Tile/IR/TileLayouts.h"
#include "tilemega/Dialect/Tile/IR/TileAsyncGemms.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile;

/// The hardware limits the verifiers check. An op cannot see the chip the
/// pipeline compiles for (it is a pipeline option, not IR), so they are those
/// of the default chip; the passes that know the chip (tile-pipeline,
/// convert-mega-to-gpu) check against its own description.
static const TargetInfo &getVerifierTarget() { return getDefaultTargetInfo(); }

/// "232448-byte (227 KiB)": how shared-memory limits are printed.
static std::string formatSharedLimit(int64_t bytes) {
  return std::to_string(bytes) + "-byte (" + std::to_string(bytes / 1024) +
         " KiB)";
}

static int64_t getNumElements(MemRefType type) {
  int64_t n = 1;
  for (int64_t d : type.getShape())
    n *= d;
  return n;
}

/// True when the static dimensions of `type` hold at most 2^63 - 1 bytes:
/// every size after the buffer's verifier (registers, shared memory,
/// layouts, boxes) is int64 arithmetic on them.
static bool bytesFitInt64(MemRefType type) {
  int64_t bytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  for (int64_t d : type.getShape())
    if (!ShapedType::isDynamic(d) && llvm::MulOverflow(bytes, d, bytes))
      return false;
  return true;
}

static int64_t getByteSize(MemRefType type) {
  return getNumElements(type) *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}


AllocSharedOp mlir::tilemega::tile::getMultiBufferedAlloc(Value value) {
  auto subview = value.getDefiningOp<memref::SubViewOp>();
  if (!subview)
    return nullptr;
  auto alloc = subview.getSource().getDefiningOp<AllocSharedOp>();
  if (!alloc)
    return nullptr;
  MemRefType bufferType = alloc.getType(), stageType = subview.getType();
  ArrayRef<int64_t> stageShape = stageType.getShape();
  if (bufferType.getRank() != stageType.getRank() + 1 ||
      bufferType.getShape().drop_front() != stageShape)
    return nullptr;
  // [stage, 0, ...] [1, d0, ...] [1, ...]: one whole slice.
  ArrayRef<int64_t> offsets = subview.getStaticOffsets();
  ArrayRef<int64_t> sizes = subview.getStaticSizes();
  ArrayRef<int64_t> strides = subview.getStaticStrides();
  if (sizes.front() != 1 || sizes.drop_front() != stageShape ||
      !llvm::all_of(offsets.drop_front(), [](int64_t o) { return o == 0; }) ||
      !llvm::all_of(strides, [](int64_t s) { return s == 1; }))
    return nullptr;
  // Row-major and contiguous; only the offset (the stage) may vary.
  SmallVector<int64_t> layoutStrides;
  int64_t layoutOffset;
  if (failed(stageType.getStridesAndOffset(layoutStrides, layoutOffset)))
    return nullptr;
  int64_t expected = 1;
  for (int64_t d = stageType.getRank() - 1; d >= 0; --d) {
    if (layoutStrides[d] != expected)
      return nullptr;
    expected *= stageShape[d];
  }
  return alloc;
}

/// Checks what every tile buffer operand needs: an identity layout and a
/// memory space that is one of our scopes. When `value` is given, a stage of
/// a multi-buffered shared tile (whose layout carries the stage offset) is
/// accepted as well.
static LogicalResult verifyTileBuffer(Operation *op, StringRef name,
                                      MemRefType type, Value value = {}) {
  if (getScope(type) == Scope::Unknown)
    return op->emitOpError() << name << " has memory space "
                             << type.getMemorySpace()
                             << ", which is not global, shared "
                                "(#gpu.address_space<workgroup>) or "
                                "#tile.fragment";
  if (!type.getLayout().isIdentity() &&
      !(value && getMultiBufferedAlloc(value)))
    return op->emitOpError() << name
                             << " must have the identity (row-major) layout";
  // Layouts, thread mappings and boxes are all at least 1-d; a 0-d buffer
  // would reach them with an empty shape.
  if (type.getRank() == 0)
    return op->emitOpError() << name << " must have rank >= 1";
  // Sizes in bytes, vector widths and layouts all start from the element's
  // bit width (found by scripts/fuzz: a memref of index aborted in it).
  if (!type.getElementType().isIntOrFloat())
    return op->emitOpError() << name << " has elements of type " << type.getElementType()
                             << "; a tile buffer holds integers or floats";
  // Found by scripts/fuzz: a [2^31, 2^40] fragment's element count wrapped
  // to 0, passed the register limit and exhausted memory in the layout
  // inference.
  if (!bytesFitInt64(type))
    return op->emitOpError() << name << " of shape " << formatShape(type.getShape())
                             << " has more than 2^63 - 1 bytes";
  return success();
}

/// Parses `[` int (`,` int)* `]`.
static ParseResult parseIntList(OpAsmParser &parser,
                                SmallVectorImpl<int64_t> &values) {
  return parser.parseCommaSeparatedList(
      OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
        int64_t v;
        if (parser.parseInteger(v))
          return failure();
        values.push_back(v);
        return success();
      });
}

static void printIntList(OpAsmPrinter &p, ArrayRef<int64_t> values) {
  p << "[";
  llvm::interleaveComma(values, p);
  p << "]";
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

void KernelOp::build(OpBuilder &builder, OperationState &result,
                     ArrayRef<int64_t> grid, int64_t threads) {
  result.addAttribute(getGridAttrName(result.name),
                      builder.getDenseI64ArrayAttr(grid));
  result.addAttribute(getThreadsAttrName(result.name),
                      builder.getI64IntegerAttr(threads));
  Region *body = result.addRegion();
  Block *block = new Block();
  for (size_t i = 0; i < grid.size(); ++i)
    block->addArgument(builder.getIndexType(), result.location);
  body->push_back(block);
}

ParseResult KernelOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument> indices;
  SmallVector<int64_t> grid;
  int64_t threads;
  if (parser.parseKeyword("blocks") ||
      parser.parseArgumentList(indices, OpAsmParser::Delimiter::Paren) ||
      parser.parseKeyword("in") || parseIntList(parser, grid) ||
      parser.parseKeyword("threads") || parser.parseInteger(threads))
    return failure();
  int64_t cluster;
  if (succeeded(parser.parseOptionalKeyword("cluster"))) {
    if (parser.parseInteger(cluster))
      return failure();
    result.addAttribute(getClusterAttrName(result.name),
                        parser.getBuilder().getI64IntegerAttr(cluster));
  }
  if (succeeded(parser.parseOptionalKeyword("resident")))
    result.addAttribute(getResidentAttrName(result.name),
                        parser.getBuilder().getUnitAttr());
  Builder &b = parser.getBuilder();
  for (OpAsmParser::Argument &arg : indices)
    arg.type = b.getIndexType();
  result.addAttribute(getGridAttrName(result.name),
                      b.getDenseI64ArrayAttr(grid));
  result.addAttribute(getThreadsAttrName(result.name),
                      b.getI64IntegerAttr(threads));
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  return parser.parseRegion(*body, indices);
}

void KernelOp::print(OpAsmPrinter &p) {
  p << " blocks(";
  llvm::interleaveComma(getBlockIndices(), p,
                        [&](BlockArgument arg) { p.printOperand(arg); });
  p << ") in ";
  printIntList(p, getGrid());
  p << " threads " << getThreads();
  if (std::optional<int64_t> cluster = getCluster())
    p << " cluster " << *cluster;
  if (getResident())
    p << " resident";
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getGridAttrName(), getThreadsAttrName(),
                            getClusterAttrName(), getResidentAttrName()});
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

LogicalResult KernelOp::verify() {
  ArrayRef<int64_t> grid = getGrid();
  if (grid.empty() || grid.size() > 3)
    return emitOpError() << "grid must have 1 to 3 dimensions, got "
                         << grid.size();
  for (int64_t g : grid)
    if (g < 1)
      return emitOpError() << "grid sizes must be >= 1, got "
                           << formatShape(grid);
  // CUDA's limits: x up to 2^31 - 1 blocks, y and z up to 65535.
  static constexpr int64_t kMaxGrid[] = {(int64_t(1) << 31) - 1, 65535, 65535};
  for (auto [d, g] : llvm::enumerate(grid))
    if (g > kMaxGrid[d])
      return emitOpError() << "grid dimension " << d << " has " << g
                           << " blocks, over CUDA's limit of " << kMaxGrid[d];
  int64_t threads = getThreads();
  int64_t maxThreads = getVerifierTarget().maxThreadsPerBlock;
  if (threads < 32 || threads % 32 != 0 || threads > maxThreads)
    return emitOpError() << "thread count must be a positive multiple of 32 "
                            "and at most "
                         << maxThreads << ", got " << threads;
  if (std::optional<int64_t> cluster = getCluster()) {
    // 8: the portable cluster size every sm_90 part launches.
    if (*cluster < 2 || *cluster > 8)
      return emitOpError() << "cluster must be 2 to 8 blocks, got " << *cluster;
    if (grid[0] % *cluster)
      return emitOpError() << "clusters of " << *cluster
                           << " blocks along the first grid dimension need it "
                              "to be a multiple of "
                           << *cluster << ", got " << grid[0];
    if ((*this)->hasAttr(TileDialect::getPersistentAttrName()))
      return emitOpError() << "is a persistent mega-kernel, which runs no "
                              "clusters";
  }
  if (getResident()) {
    if (grid.size() != 1)
      return emitOpError() << "is resident, which needs a 1-D grid (the "
                              "runtime sizes its one dimension), got "
                           << grid.size() << " dimensions";
    if ((*this)->hasAttr(TileDialect::getPersistentAttrName()))
      return emitOpError() << "is a persistent mega-kernel, whose grid its "
                              "schedule fixes; it cannot be resident";
  }
  return success();
}

LogicalResult NumBlocksOp::verify() {
  auto kernel = (*this)->getParentOfType<KernelOp>();
  if (!kernel)
    return success(); // InKernel reports it.
  int64_t rank = kernel.getGrid().size();
  if (getDim() < 0 || getDim() >= rank)
    return emitOpError() << "asks for grid dimension " << getDim()
                         << " of a " << rank << "-D grid";
  return success();
}

LogicalResult KernelOp::verifyRegions() {
  if (failed(verifyAsyncGemms(getBody())))
    return failure();
  Block &body = getBody().front();
  if (body.getNumArguments() != getGrid().size())
    return emitOpError() << "expects one block index per grid dimension ("
                         << getGrid().size() << "), got "
                         << body.getNumArguments();
  for (BlockArgument arg : body.getArguments())
    if (!arg.getType().isIndex())
      return emitOpError() << "block indices must have index type";
  // Fewer blocks than the grid may run a resident kernel: one that never
  // reads how many would leave the others' work undone.
  if (getResident()) {
    bool readsCount = false;
    body.walk([&](NumBlocksOp op) { readsCount |= op.getDim() == 0; });
    if (!readsCount)
      return emitOpError() << "is resident, so the runtime may launch fewer "
                              "than its "
                           << getGrid()[0]
                           << " blocks, but never reads how many "
                              "(tile.num_blocks 0): its work would not be "
                              "strided over the blocks launched";
  }
  SharedMemoryTally tally;
  SharedLiveness liveness(body,
                          (*this)->hasAttr(TileDialect::getPersistentAttrName()));
  for (auto alloc : body.getOps<AllocSharedOp>())
    tally.add(alloc, getByteSize(alloc.getType()), liveness.of(alloc));
  int64_t sharedBytes = tally.total();
  const TargetInfo &target = getVerifierTarget();
  if (sharedBytes > target.maxSharedBytesPerBlock)
    return emitOpError() << "allocates " << sharedBytes
                         << " bytes of shared memory, over the "
                         << formatSharedLimit(target.maxSharedBytesPerBlock)
                         << " limit of " << target.chip << " by "
                         << sharedBytes - target.maxSharedBytesPerBlock
                         << " bytes";
  return success();
}

//===----------------------------------------------------------------------===//
// Allocation
//===----------------------------------------------------------------------===//

LogicalResult AllocSharedOp::verify() {
  MemRefType type = getType();
  if (failed(verifyTileBuffer(*this, "result", type)))
    return failure();
  SwizzleAttr swizzle = getSwizzleAttr();
  if (!swizzle || swizzle.getColumns() == 0)
    return success();
  // Column blocks split rows: a 1-d tile has none, and a row must be a
  // whole number of blocks.
  int64_t row = type.getShape().back();
  if (type.getRank() < 2 || row % swizzle.getColumns() != 0)
    return emitOpError() << "swizzle splits rows into blocks of "
                         << swizzle.getColumns()
                         << " columns, but the tile's rows are " << row
                         << " elements"
                         << (type.getRank() < 2 ? " of a 1-d tile" : "");
  return success();
}

LogicalResult AllocFragmentOp::verify() {
  MemRefType type = getType();
  if (failed(verifyTileBuffer(*this, "result", type)))
    return failure();
  auto kernel = (*this)->getParentOfType<KernelOp>();
  int64_t threads = kernel.getThreads();
  int64_t numElements = getNumElements(type);
  int64_t perThread = (numElements + threads - 1) / threads;
  int64_t bytesPerElement =
      std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  int64_t registers = (perThread * bytesPerElement + 3) / 4;
  int64_t maxRegisters = getVerifierTarget().maxRegistersPerThread;
  if (registers > maxRegisters)
    return emitOpError() << "fragment of " << numElements << " elements over "
                         << threads << " threads needs " << registers
                         << " registers per thread, over the " << maxRegisters
                         << "-register limit by " << registers - maxRegisters;
  Attribute layout = getLayoutAttr();
  if (!layout)
    return success();
  if (getLayoutRank(layout) != type.getRank())
    return emitOpError() << "layout has rank " << getLayoutRank(layout)
                         << " but the fragment has rank " << type.getRank();
  if (getLayoutNumThreads(layout) != threads)
    return emitOpError() << "layout spreads the fragment over "
                         << getLayoutNumThreads(layout)
                         << " threads but the kernel has " << threads;
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout)) {
    for (unsigned d = 0; d < type.getRank(); ++d)
      if (type.getDimSize(d) % blocked.getChunkExtent(d) != 0)
        return emitOpError() << "fragment dimension " << d << " (size "
                             << type.getDimSize(d)
                             << ") is not a multiple of the layout's chunk "
                                "extent "
                             << blocked.getChunkExtent(d);
  }
  std::string why;
  FailureOr<ThreadOwnership> ownership =
      getThreadOwnership(layout, type.getShape(), &why);
  if (failed(ownership))
    return emitOpError() << "layout " << layout
                         << " cannot hold this fragment: " << why;
  if (!ownership->coversExactly())
    return emitOpError() << "layout " << layout
                         << " does not cover the fragment exactly: some "
                            "threads would hold elements outside it";
  return success();
}

//===----------------------------------------------------------------------===//
// CopyOp
//===----------------------------------------------------------------------===//

SmallVector<OpFoldResult> CopyOp::getMixedSrcOffsets() {
  return getMixedValues(getStaticSrcOffsets(), getSrcOffsets(), getContext());
}

SmallVector<OpFoldResult> CopyOp::getMixedDstOffsets() {
  return getMixedValues(getStaticDstOffsets(), getDstOffsets(), getContext());
}

/// Checks one side of a box access: offset list length, static bounds, and
/// for fragments that the whole tile is covered.
static LogicalResult verifyBox(Operation *op, StringRef name, Value buffer,
                               ValueRange dynOffsets,
                               ArrayRef<int64_t> staticOffsets,
                               ArrayRef<int64_t> sizes) {
  auto type = cast<MemRefType>(buffer.getType());
  if (failed(verifyTileBuffer(op, name, type, buffer)))
    return failure();
  if (staticOffsets.size() != static_cast<size_t>(type.getRank()))
    return op->emitOpError() << "expects " << type.getRank() << " " << name
                             << " offsets, got " << staticOffsets.size();
  if (failed(verifyListOfOperandsOrIntegers(op, (name + " offset").str(),
                                            type.getRank(), staticOffsets,
                                            dynOffsets)))
    return failure();
  if (sizes.size() != static_cast<size_t>(type.getRank()))
    return op->emitOpError() << "expects " << type.getRank()
                             << " sizes to match the rank of the " << name
                             << ", got " << sizes.size();
  for (int64_t d = 0; d < type.getRank(); ++d) {
    int64_t off = staticOffsets[d];
    if (ShapedType::isDynamic(off))
      continue;
    if (off < 0 || off + sizes[d] > type.getDimSize(d))
      return op->emitOpError()
             << name << " box [" << off << ", " << off + sizes[d]
             << ") in dimension " << d << " is out of bounds of size "
             << type.getDimSize(d);
  }
  if (isFragment(type)) {
    bool whole = llvm::all_of(staticOffsets, [](int64_t o) { return o == 0; }) &&
                 sizes == type.getShape();
    if (!whole)
      return op->emitOpError()
             << "a fragment is copied whole: " << name
             << " offsets must be 0 and sizes must equal its shape "
             << formatShape(type.getShape());
  }
  return success();
}

static bool convertibleElementTypes(Type a, Type b) {
  if (a == b)
    return true;
  return (isa<FloatType>(a) && isa<FloatType>(b)) ||
         (a.isSignlessInteger() && b.isSignlessInteger());
}

LogicalResult CopyOp::verify() {
  MemRefType srcType = getSrc().getType();
  MemRefType dstType = getDst().getType();
  ArrayRef<int64_t> sizes = getSizes();
  for (int64_t s : sizes)
    if (s < 1)
      return emitOpError() << "sizes must be >= 1, got " << formatShape(sizes);
  if (failed(verifyBox(*this, "source", getSrc(), getSrcOffsets(),
                       getStaticSrcOffsets(), sizes)) ||
      failed(verifyBox(*this, "destination", getDst(), getDstOffsets(),
                       getStaticDstOffsets(), sizes)))
    return failure();
  Scope src = getScope(srcType), dst = getScope(dstType);
  if (src == Scope::Global && dst == Scope::Global)
    return emitOpError("cannot copy global to global: stage the tile through "
                       "shared memory or a fragment");
  if (src == Scope::Fragment && dst == Scope::Fragment)
    return emitOpError("cannot copy fragment to fragment: use tile.parallel");
  if (getAsync()) {
    if (src != Scope::Global || dst != Scope::Shared)
      return emitOpError() << "async copies go from global to shared memory, "
                              "got "
                           << stringifyScope(src) << " to "
                           << stringifyScope(dst);
    if (srcType.getElementType() != dstType.getElementType())
      return emitOpError() << "async copies cannot convert elements: "
                           << srcType.getElementType() << " vs "
                           << dstType.getElementType();
  }
  if (!convertibleElementTypes(srcType.getElementType(),
                               dstType.getElementType()))
    return emitOpError() << "cannot convert element type "
                         << srcType.getElementType() << " to "
                         << dstType.getElementType()
                         << " (both must be floats or both integers)";
  return success();
}

//===----------------------------------------------------------------------===//
// Task wait
//===----------------------------------------------------------------------===//

LogicalResult TaskWaitOp::verify() {
  // The persistent kernel splits the body's top-level ops at the wait: one
  // point, which every thread passes.
  auto kernel = dyn_cast<KernelOp>((*this)->getParentOp());
  if (!kernel)
    return emitOpError() << "must be directly in a tile.kernel body (not nested in "
                            "a loop or a branch)";
  for (auto other : kernel.getBody().front().getOps<TaskWaitOp>())
    if (other != *this && other->isBeforeInBlock(*this))
      return emitOpError() << "is the second in this kernel: a task waits once";
  return success();
}

//===----------------------------------------------------------------------===//
// Bulk copies and mbarriers
//===----------------------------------------------------------------------===//

LogicalResult MbarrierArriveExpectTxOp::verify() {
  // PTX's tx-count is a 20-bit quantity per phase.
  constexpr int64_t kMaxTxBytes = (int64_t(1) << 20) - 1;
  if (getBytes() < 0 || getBytes() > kMaxTxBytes)
    return emitOpError() << "expects 0 to " << kMaxTxBytes
                         << " bytes per phase, got " << getBytes();
  return success();
}

LogicalResult MbarrierInitOp::verify() {
  // An mbarrier's expected arrival count is a 20-bit quantity.
  constexpr int64_t kMaxCount = (int64_t(1) << 20) - 1;
  int64_t count = getCountAttr().getInt();
  if (count < 1 || count > kMaxCount)
    return emitOpError() << "expects 1 to " << kMaxCount
                         << " arrivals per phase, got " << count;
  return success();
}

LogicalResult ProducerOp::verify() {
  auto kernel = (*this)->getParentOfType<KernelOp>();
  // The producer is the warpgroup after the kernel's threads: setmaxnreg
  // works on whole warpgroups.
  if (kernel.getThreads() % kThreads != 0)
    return emitOpError() << "needs a kernel of whole warpgroups (threads a "
                            "multiple of "
                         << kThreads << "), got " << kernel.getThreads();
  if (kernel->hasAttr(TileDialect::getPersistentAttrName()))
    return emitOpError("cannot be part of a persistent kernel");
  int64_t producers = 0;
  kernel.getBody().walk([&](ProducerOp) { ++producers; });
  if (producers > 1)
    return emitOpError() << "is one of " << producers
                         << " producers of its kernel; a kernel has one";
  return success();
}

SmallVector<OpFoldResult> BulkCopyOp::getMixedSrcOffsets() {
  return getMixedValues(getStaticSrcOffsets(), getSrcOffsets(), getContext());
}

int64_t BulkCopyOp::getBytes() {
  MemRefType type = getDst().getType();
  return type.getNumElements() * type.getElementTypeBitWidth() / 8;
}

LogicalResult BulkCopyOp::verify() {
  MemRefType srcType = getSrc().getType(), dstType = getDst().getType();
  if (failed(verifyListOfOperandsOrIntegers(*this, "source offset",
                                            srcType.getRank(),
                                            getStaticSrcOffsets(),
                                            getSrcOffsets())))
    return failure();
  if (getLinear()) {
    if (getMulticast())
      return emitOpError("is linear (1-D bulk copies), which do not multicast");
    LinearBulkCopyChoice choice =
        chooseLinearBulkCopy(srcType, dstType, dstType.getShape(),
                             getSharedSwizzle(getDst()), getMixedSrcOffsets());
    if (!choice.ok())
      return emitOpError() << "cannot be linear bulk copies: " << choice.whyNot;
    return success();
  }
  // The tensor map describes a kernel argument (or a reshape of one): the
  // runtime encodes it from the tensor passed there.
  if (!getBulkCopyArgument(getSrc()))
    return emitOpError("source must be an argument of the kernel's function "
                       "or a reshape (collapse_shape / expand_shape) of one "
                       "(the runtime builds its tensor map from it)");
  int64_t multicast = getMulticast().value_or(1);
  if (multicast != 1) {
    auto kernel = (*this)->getParentOfType<KernelOp>();
    if (!kernel || kernel.getCluster().value_or(1) != multicast)
      return emitOpError() << "multicasts to " << multicast
                           << " blocks, but its kernel's cluster is "
                           << (kernel ? kernel.getCluster().value_or(1) : 1);
    // Every block of the cluster must issue its share of the same box, as
    // often: else a block's barrier waits for bytes that never come.
    if (!llvm::all_of(getSrcOffsets(), [&](Value offset) {
          return isClusterUniform(offset, multicast);
        }))
      return emitOpError() << "multicasts a box whose offsets differ between "
                              "the blocks of a cluster of "
                           << multicast
                           << " (they depend on the first block index other "
                              "than through its quotient by "
                           << multicast << ")";
    if (!isRunUniformly(*this, multicast))
      return emitOpError() << "multicasts, but not every block of its cluster "
                              "runs it as often (a loop bound or branch "
                              "condition around it differs between them)";
  }
  BulkCopyChoice choice =
      chooseBulkCopy(srcType, dstType, dstType.getShape(),
                     getSharedSwizzle(getDst()), multicast);
  if (!choice.ok())
    return emitOpError() << "cannot be one TMA box: " << choice.whyNot;
  return success();
}

LogicalResult MbarrierArriveOp::verify() {
  std::optional<int64_t> cluster = getCluster();
  if (!cluster)
    return success();
  auto kernel = (*this)->getParentOfType<KernelOp>();
  if (kernel && kernel.getCluster() != cluster)
    return emitOpError() << "arrives on the barriers of a cluster of "
                         << *cluster << " blocks, but its kernel's cluster is "
                         << kernel.getCluster().value_or(1);
  return success();
}

LogicalResult ClusterSyncOp::verify() {
  auto kernel = (*this)->getParentOfType<KernelOp>();
  if (kernel && !kernel.getCluster())
    return emitOpError("synchronises a cluster, but its kernel has none (no "
                       "`cluster`)");
  return success();
}

//===----------------------------------------------------------------------===//
// AtomicOp
//===----------------------------------------------------------------------===//

LogicalResult AtomicOp::verify() {
  MemRefType srcType = getSrc().getType();
  MemRefType dstType = getDst().getType();
  if (failed(verifyTileBuffer(*this, "source", srcType, getSrc())))
    return failure();
  if (!isGlobal(dstType))
    return emitOpError() << "destination must be global, got "
                         << stringifyScope(getScope(dstType));
  if (isGlobal(srcType))
    return emitOpError("source must be a shared or fragment tile, got global");
  if (srcType.getElementType() != dstType.getElementType())
    return emitOpError() << "element types differ: " << srcType.getElementType()
                         << " vs " << dstType.getElementType();
  Type elem = srcType.getElementType();
  if (!elem.isF32() && !elem.isF64() && !elem.isF16() && !elem.isBF16() &&
      !elem.isInteger(32) && !elem.isInteger(64))
    return emitOpError() << "atomics support f16, bf16, f32, f64, i32 and i64, "
                            "got "
                         << elem;
  return verifyBox(*this, "destination", getDst(), getOffsets(),
                   getStaticOffsets(), srcType.getShape());
}

//===----------------------------------------------------------------------===//
// BlockAtomicAddOp
//===----------------------------------------------------------------------===//

LogicalResult BlockAtomicAddOp::verify() {
  MemRefType dstType = getDst().getType();
  if (!isGlobal(dstType))
    return emitOpError() << "destination must be global, got "
                         << stringifyScope(getScope(dstType));
  Type elem = dstType.getElementType();
  if (!elem.isInteger(32) && !elem.isInteger(64))
    return emitOpError() << "adds to i32 or i64 counters, got " << elem;
  if (getValue().getType() != elem)
    return emitOpError() << "value is " << getValue().getType()
                         << " but the destination holds " << elem;
  if (static_cast<int64_t>(getIndices().size()) != dstType.getRank())
    return emitOpError() << "expects " << dstType.getRank()
                         << " indices for the destination, got "
                         << getIndices().size();
  MemRefType scratchType = getScratch().getType();
  if (scratchType.getNumElements() != 1 || scratchType.getElementType() != elem)
    return emitOpError() << "scratch must be one shared " << elem
                         << " word, got " << scratchType;
  // Its barriers need every thread of the block.
  for (Operation *parent = (*this)->getParentOp(); parent && !isa<KernelOp>(parent);
       parent = parent->getParentOp())
    if (isa<ParallelOp, ProducerOp>(parent))
      return emitOpError() << "must be reached by every thread of the block, "
                              "not inside "
                           << parent->getName();
  return success();
}

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::verify() {
  MemRefType aType = getA().getType(), bType = getB().getType(),
             cType = getC().getType();
  for (auto [name, value] : {std::pair<StringRef, Value>{"A", getA()},
                             {"B", getB()}, {"C", getC()}}) {
    auto type = cast<MemRefType>(value.getType());
    if (failed(verifyTileBuffer(*this, name, type, value)))
      return failure();
    if (type.getRank() != 2)
      return emitOpError() << name << " must be a 2-d tile, got rank "
                           << type.getRank();
  }
  for (auto [name, type] :
       {std::pair<StringRef, MemRefType>{"A", aType}, {"B", bType}})
    if (isGlobal(type))
      return emitOpError() << "operand " << name
                           << " must be in shared memory or a fragment, got "
                              "global";
  int64_t m = getTransposeA() ? aType.getDimSize(1) : aType.getDimSize(0);
  int64_t ka = getTransposeA() ? aType.getDimSize(0) : aType.getDimSize(1);
  int64_t kb = getTransposeB() ? bType.getDimSize(1) : bType.getDimSize(0);
  int64_t n = getTransposeB() ? bType.getDimSize(0) : bType.getDimSize(1);
  if (ka != kb)
    return emitOpError() << "reduction sizes differ: A gives K = " << ka
                         << ", B gives K = " << kb;
  if (cType.getDimSize(0) != m || cType.getDimSize(1) != n)
    return emitOpError() << "C must be " << m << "x" << n << " (M x N), got "
                         << cType.getDimSize(0) << "x" << cType.getDimSize(1);
  Type in = aType.getElementType(), acc = cType.getElementType();
  if (in != bType.getElementType())
    return emitOpError() << "A and B element types differ: " << in << " vs "
                         << bType.getElementType();
  std::string unsupported = getUnsupportedAccumulationReason(in, acc);
  if (!unsupported.empty())
    return emitOpError() << "unsupported accumulation: " << in << " inputs into "
                         << acc << " (" << unsupported << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::verify() {
  MemRefType srcType = getSrc().getType(), dstType = getDst().getType();
  if (failed(verifyTileBuffer(*this, "source", srcType, getSrc())) ||
      failed(verifyTileBuffer(*this, "destination", dstType, getDst())))
    return failure();
  if (isGlobal(srcType) || isGlobal(dstType))
    return emitOpError("reduces shared or fragment tiles, not global ones");
  int64_t dim = getDim();
  if (dim < 0 || dim >= srcType.getRank())
    return emitOpError() << "dim " << dim << " is out of range for a rank-"
                         << srcType.getRank() << " source";
  SmallVector<int64_t> expected(srcType.getShape());
  expected.erase(expected.begin() + dim);
  if (expected.empty())
    expected.push_back(1);
  if (dstType.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "destination shape must be "
                         << formatShape(expected) << ", got "
                         << formatShape(dstType.getShape());
  if (srcType.getElementType() != dstType.getElementType())
    return emitOpError() << "element types differ: " << srcType.getElementType()
                         << " vs " << dstType.getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// FillOp / ClearOp
//===----------------------------------------------------------------------===//

static LogicalResult verifyWritableTile(Operation *op, Value tile) {
  auto type = cast<MemRefType>(tile.getType());
  if (failed(verifyTileBuffer(op, "destination", type, tile)))
    return failure();
  if (isGlobal(type))
    return op->emitOpError("writes shared or fragment tiles; use tile.copy to "
                           "write global memory");
  return success();
}

LogicalResult FillOp::verify() {
  MemRefType type = getDst().getType();
  if (failed(verifyWritableTile(*this, getDst())))
    return failure();
  if (getValue().getType() != type.getElementType())
    return emitOpError() << "value type " << getValue().getType()
                         << " differs from the element type "
                         << type.getElementType();
  return success();
}

LogicalResult ClearOp::verify() {
  return verifyWritableTile(*this, getDst());
}

//===----------------------------------------------------------------------===//
// ParallelOp
//===----------------------------------------------------------------------===//

void ParallelOp::build(OpBuilder &builder, OperationState &result,
                       ArrayRef<int64_t> extents) {
  result.addAttribute(getExtentsAttrName(result.name),
                      builder.getDenseI64ArrayAttr(extents));
  Region *body = result.addRegion();
  Block *block = new Block();
  for (size_t i = 0; i < extents.size(); ++i)
    block->addArgument(builder.getIndexType(), result.location);
  body->push_back(block);
}

ParseResult ParallelOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument> indices;
  SmallVector<int64_t> extents;
  if (parser.parseArgumentList(indices, OpAsmParser::Delimiter::Paren) ||
      parser.parseKeyword("in") || parseIntList(parser, extents))
    return failure();
  Builder &b = parser.getBuilder();
  for (OpAsmParser::Argument &arg : indices)
    arg.type = b.getIndexType();
  result.addAttribute(getExtentsAttrName(result.name),
                      b.getDenseI64ArrayAttr(extents));
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  return parser.parseRegion(*result.addRegion(), indices);
}

void ParallelOp::print(OpAsmPrinter &p) {
  p << " (";
  llvm::interleaveComma(getIndices(), p,
                        [&](BlockArgument arg) { p.printOperand(arg); });
  p << ") in ";
  printIntList(p, getExtents());
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                     {getExtentsAttrName()});
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

LogicalResult ParallelOp::verify() {
  ArrayRef<int64_t> extents = getExtents();
  if (extents.empty())
    return emitOpError("needs at least one extent");
  for (int64_t e : extents)
    if (e < 1)
      return emitOpError() << "extents must be >= 1, got "
                           << formatShape(extents);
  // The lowering gives each thread its iterations unrolled: a tile, not a
  // whole tensor (2^20 elements is 4 MiB of f32, beyond any block's shared
  // memory and registers). Unbounded, it ran out of memory enumerating
  // them (found by fuzzing). Checked per extent first against overflow.
  constexpr int64_t kMaxIterations = 1 << 20;
  int64_t iterations = 1;
  for (int64_t e : extents) {
    if (e > kMaxIterations || iterations * e > kMaxIterations)
      return emitOpError() << "iteration space " << formatShape(extents)
                           << " is over the " << kMaxIterations
                           << " elements a tile may have";
    iterations *= e;
  }
  if (Attribute layout = getLayoutAttr()) {
    if (getLayoutRank(layout) != extents.size())
      return emitOpError() << "layout has rank " << getLayoutRank(layout)
                           << " but the iteration space has rank "
                           << extents.size();
    // The InKernel trait has checked that there is a kernel.
    int64_t threads = (*this)->getParentOfType<KernelOp>().getThreads();
    if (getLayoutNumThreads(layout) != threads)
      return emitOpError() << "layout spreads the iterations over "
                           << getLayoutNumThreads(layout)
                           << " threads but the kernel has " << threads;
  }
  return success();
}

LogicalResult ParallelOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getExtents().size())
    return emitOpError() << "expects one index per extent ("
                         << getExtents().size() << "), got "
                         << body.getNumArguments();
  for (BlockArgument arg : body.getArguments())
    if (!arg.getType().isIndex())
      return emitOpError("indices must have index type");
  // A fragment element lives in one thread's registers: the body may touch
  // it only at the parallel's own indices, which that thread runs.
  WalkResult walk = getBody().walk([&](Operation *op) -> WalkResult {
    std::optional<MemRefAccess> access = getMemRefAccess(op);
    if (!access || !isFragmentValue(access->memref))
      return WalkResult::advance();
    auto type = cast<MemRefType>(access->memref.getType());
    ValueRange indices = access->indices;
    // The parallel's own indices, in order; some may be left out (a
    // fragment sliced from the iteration space, e.g. row_max[i]).
    SmallVector<int64_t> expectedShape;
    unsigned next = 0;
    bool ok = true;
    for (Value index : indices) {
      while (next < body.getNumArguments() && body.getArgument(next) != index)
        ++next;
      if (next == body.getNumArguments()) {
        ok = false;
        break;
      }
      expectedShape.push_back(getExtents()[next++]);
    }
    if (!ok || type.getShape() != ArrayRef<int64_t>(expectedShape)) {
      op->emitOpError() << "accesses a fragment inside tile.parallel with "
                           "indices other than the parallel's own ("
                        << "fragment shape " << formatShape(type.getShape())
                        << ", iteration space " << formatShape(getExtents())
                        << ")";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// PipelinedOp
//===----------------------------------------------------------------------===//

void PipelinedOp::build(OpBuilder &builder, OperationState &result,
                        Value lowerBound, Value upperBound, Value step,
                        int64_t numStages, bool wgmmaInFlight) {
  result.addOperands({lowerBound, upperBound, step});
  result.addAttribute(getNumStagesAttrName(result.name),
                      builder.getI64IntegerAttr(numStages));
  if (wgmmaInFlight)
    result.addAttribute(getWgmmaInFlightAttrName(result.name),
                        builder.getUnitAttr());
  Region *body = result.addRegion();
  Block *block = new Block();
  block->addArgument(builder.getIndexType(), result.location);
  body->push_back(block);
}

ParseResult PipelinedOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::Argument iv;
  OpAsmParser::UnresolvedOperand lb, ub, step;
  int64_t numStages;
  if (parser.parseArgument(iv) || parser.parseEqual() ||
      parser.parseOperand(lb) || parser.parseKeyword("to") ||
      parser.parseOperand(ub) || parser.parseKeyword("step") ||
      parser.parseOperand(step) || parser.parseKeyword("num_stages") ||
      parser.parseInteger(numStages))
    return failure();
  Type index = parser.getBuilder().getIndexType();
  iv.type = index;
  if (parser.resolveOperand(lb, index, result.operands) ||
      parser.resolveOperand(ub, index, result.operands) ||
      parser.resolveOperand(step, index, result.operands))
    return failure();
  result.addAttribute(getNumStagesAttrName(result.name),
                      parser.getBuilder().getI64IntegerAttr(numStages));
  if (succeeded(parser.parseOptionalKeyword("wgmma_in_flight")))
    result.addAttribute(getWgmmaInFlightAttrName(result.name),
                        parser.getBuilder().getUnitAttr());
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  return parser.parseRegion(*result.addRegion(), {iv});
}

void PipelinedOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printOperand(getInductionVar());
  p << " = " << getLowerBound() << " to " << getUpperBound() << " step "
    << getStep() << " num_stages " << getNumStages();
  if (getWgmmaInFlight())
    p << " wgmma_in_flight";
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getNumStagesAttrName(), getWgmmaInFlightAttrName()});
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

LogicalResult PipelinedOp::verify() {
  // I64Attr reads back unsigned: a negative count must not pass as huge.
  int64_t numStages = getNumStagesAttr().getInt();
  if (numStages < 1)
    return emitOpError() << "num_stages must be >= 1, got " << numStages;
  // tile-pipeline unrolls a prologue of num_stages - 1 copies and sizes
  // num_stages-fold buffers: an unbounded count hangs or overflows there
  // (found by fuzzing). No kernel keeps more than a few stages in flight;
  // 32 leaves room for any that shared memory can hold.
  constexpr int64_t kMaxStages = 32;
  if (numStages > kMaxStages)
    return emitOpError() << "num_stages must be <= " << kMaxStages << ", got "
                         << numStages;
  // The refill of an in-flight loop takes the stage two iterations back:
  // with fewer than 3 stages that is the one its pending wgmma reads.
  if (getWgmmaInFlight() && numStages < 3)
    return emitOpError() << "wgmma_in_flight needs num_stages >= 3 (a stage "
                            "that neither the pending wgmma nor the current "
                            "iteration reads), got "
                         << numStages;
  if (getWarpSpecialize() && getTma() == false)
    return emitOpError("warp_specialize needs TMA (its producer issues bulk "
                       "copies), but the loop says tma = false");
  return success();
}

LogicalResult PipelinedOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || !body.getArgument(0).getType().isIndex())
    return emitOpError("body must have exactly one index argument (the "
                       "induction variable)");
  return success();
}

//===----------------------------------------------------------------------===//
// AsyncWaitOp
//===----------------------------------------------------------------------===//

/// A wait's `pending` count: I64Attr reads back unsigned, so the
/// attribute's signed value is the one to check.
static LogicalResult verifyPending(Operation *op, IntegerAttr pending) {
  if (pending.getInt() < 0)
    return op->emitOpError() << "pending must be >= 0, got " << pending.getInt();
  return success();
}

/// The result types of an op whose results are its operands passed through.
static LogicalResult operandTypes(ValueRange operands, SmallVectorImpl<Type> &inferred) {
  for (Value v : operands)
    inferred.push_back(v.getType());
  return success();
}

LogicalResult AsyncWaitOp::verify() { return verifyPending(*this, getPendingAttr()); }

//===----------------------------------------------------------------------===//
// WgmmaWaitOp, WgmmaWaitRegistersOp
//===----------------------------------------------------------------------===//

LogicalResult WgmmaWaitOp::verify() {
  if (failed(verifyPending(*this, getPendingAttr())))
    return failure();
  for (auto [i, v] : llvm::enumerate(getFragments()))
    if (llvm::is_contained(getFragments().take_front(i), v))
      return emitOpError() << "lists fragment #" << i << " twice";
  return success();
}

LogicalResult WgmmaWaitRegistersOp::verify() {
  return verifyPending(*this, getPendingAttr());
}

LogicalResult WgmmaWaitRegistersOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  return operandTypes(operands, inferred);
}

//===----------------------------------------------------------------------===//
// WgmmaFenceRegistersOp
//===----------------------------------------------------------------------===//

LogicalResult WgmmaFenceRegistersOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  return operandTypes(operands, inferred);
}

//===----------------------------------------------------------------------===//
// WgmmaRegisterAOp
//===----------------------------------------------------------------------===//

int64_t WgmmaRegisterAOp::getN() {
  auto d = dyn_cast<LLVM::LLVMStructType>(getD().getType());
  return d ? 2 * static_cast<int64_t>(d.getBody().size()) : 0;
}

LogicalResult WgmmaRegisterAOp::verify() {
  auto d = dyn_cast<LLVM::LLVMStructType>(getD().getType());
  if (!d || d.isIdentified() ||
      !llvm::all_of(d.getBody(), [](Type t) { return t.isF32(); }))
    return emitOpError() << "d must be a literal LLVM struct of f32 (wgmma's D "
                            "fragment), got "
                         << getD().getType();
  int64_t n = getN();
  if (n < 8 || n > kWgmmaMaxN || n % 8 != 0)
    return emitOpError() << "d holds " << n / 2 << " f32, so N = " << n
                         << ", which is not a wgmma N (a multiple of 8 up to "
                         << kWgmmaMaxN << ")";
  Type in = getInputType();
  if (!in.isBF16() && !in.isF16())
    return emitOpError() << "A in registers takes 16-bit inputs (bf16, f16), got "
                         << in;
  return success();
}

#define GET_OP_CLASSES
#include "tilemega/Dialect/Tile/IR/TileOps.cpp.inc"
