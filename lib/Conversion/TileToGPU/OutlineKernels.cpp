//===- OutlineKernels.cpp - tile functions to gpu.func kernels -------------===//
//
// A tile function (a func.func around one tile.kernel) becomes a gpu.func
// kernel; its launch configuration goes into the module attribute
// `tilemega.kernels`, which is what the artifact writer turns into JSON.
//
//===----------------------------------------------------------------------===//

#include "TileToGPUInternal.h"

#include "tilemega/Dialect/Mega/IR/MegaDialect.h"
#include "tilemega/Dialect/Tile/IR/TileBulkCopies.h"
#include "tilemega/Dialect/Tile/IR/TileKernelParams.h"
#include "tilemega/Dialect/Tile/IR/TileSharedMemory.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"
#include "tilemega/Target/TargetInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::tilemega;
using namespace mlir::tilemega::tile_to_gpu;

/// Shared tiles start on 128-byte boundaries: enough for 128-bit accesses and
/// for the swizzle patterns' bank arithmetic.
static constexpr int64_t kSharedAlignment = 128;

/// The gpu.module that receives every kernel of a module.
static constexpr llvm::StringLiteral kKernelModuleName = "tilemega_kernels";

static DictionaryAttr buildParamMetadata(Builder &b, func::FuncOp func,
                                         unsigned i) {
  std::string name = "arg" + std::to_string(i);
  if (auto attr = func.getArgAttrOfType<StringAttr>(
          i, tile::TileDialect::getArgNameAttrName()))
    name = attr.str();
  return tile::buildParamMetadata(
      b, name,
      func.getArgAttrOfType<StringAttr>(i, mega::MegaDialect::getRoleAttrName()),
      func.getArgumentTypes()[i]);
}

/// Checks that a tile function can become a kernel: memref arguments are
/// global, statically shaped and row-major; scalars have an artifact dtype;
/// the body is the kernel and a return.
static LogicalResult verifyTileFunction(func::FuncOp func,
                                        tile::KernelOp kernel) {
  if (func.getNumResults() != 0)
    return func.emitOpError("holds a tile.kernel and so cannot return values");
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    if (auto memref = dyn_cast<MemRefType>(type)) {
      if (!tile::isKernelTensorType(memref))
        return func.emitOpError() << "argument " << i << " has type " << type
                                  << ": " << tile::kKernelTensorRule;
      continue;
    }
    if (tile::getDTypeName(type).empty())
      return func.emitOpError()
             << "argument " << i << " has type " << type
             << ": kernel scalars must be f16, bf16, f32, f64, i8-i64 or index";
  }
  for (Operation &op : func.getBody().front()) {
    if (&op == kernel.getOperation() || isa<func::ReturnOp>(op))
      continue;
    return op.emitOpError("cannot stand beside a tile.kernel in its function: "
                          "move it into the kernel body");
  }
  return success();
}

/// The exclusive shared-memory group of an op: `tile.exclusive_group` on a
/// hoisted allocation, or the case region of an enclosing switch marked
/// `tile.exclusive_cases`.
/// A persistent kernel (convert-mega-to-gpu) keeps mega.ctas_per_sm CTAs
/// resident on each SM for its whole life: their shared memory must fit
/// one SM's, or the launch could never start them all (the runtime's
/// occupancy check would refuse it; this says so at compile time, with the
/// numbers).
static LogicalResult checkResidentShared(func::FuncOp func, int64_t sharedBytes) {
  auto perSm = func->getAttrOfType<IntegerAttr>(mega::MegaDialect::getCtasPerSmAttrName());
  if (!perSm || perSm.getInt() < 2)
    return success();
  const TargetInfo &target = getDefaultTargetInfo();
  int64_t need = perSm.getInt() * (sharedBytes + kReservedSharedBytesPerCta);
  if (need <= target.sharedBytesPerSm)
    return success();
  return func.emitError() << "persistent kernel keeps " << perSm.getInt()
                          << " CTAs resident on each SM, each with " << sharedBytes
                          << " bytes of shared memory (and "
                          << kReservedSharedBytesPerCta
                          << " the driver reserves a CTA): " << need << " bytes, over the "
                          << target.sharedBytesPerSm << " of an SM of " << target.chip
                          << " by " << need - target.sharedBytesPerSm
                          << "; use fewer CTAs an SM (the graph's ctas_per_sm) or task bodies "
                             "with smaller tiles";
}

static std::optional<int64_t> getExclusiveGroup(Operation *op) {
  if (std::optional<int64_t> group = tile::getExclusiveGroupAttr(op))
    return group;
  for (Operation *child = op, *parent = op->getParentOp(); parent;
       child = parent, parent = parent->getParentOp())
    if (isa<scf::IndexSwitchOp>(parent) &&
        parent->hasAttr(tile::TileDialect::getExclusiveCasesAttrName()))
      return child->getParentRegion()->getRegionNumber();
  return std::nullopt;
}

/// The TMA box of a `tma_store` copy: a synchronous copy of a whole shared
/// tile into a box of an argument of the kernel's function (or a row-major
/// reshape of one) that tile::chooseBulkCopy accepts (the same box rules as
/// a load, the roles swapped: out-of-bounds parts of the box are not
/// written), on a chip and pipeline with TMA; else the reason.
static tile::BulkCopyChoice chooseBulkStore(tile::CopyOp copy, func::FuncOp func,
                                            bool tma, bool persistent) {
  MemRefType src = copy.getSrc().getType(), dst = copy.getDst().getType();
  tile::BulkCopyChoice no;
  if (!tma)
    no.whyNot = "there is no TMA path here (sm_90a with tilemega.compile's "
                "tma is needed)";
  else if (persistent ||
           func->hasAttr(mega::MegaDialect::getMegaMetadataAttrName()))
    no.whyNot = "a persistent mega-kernel takes no tensor maps";
  else if (copy.getAsync() || !tile::isShared(src) || !tile::isGlobal(dst))
    no.whyNot = "a TMA store copies a shared tile to global memory";
  else if (copy.getSizes() != src.getShape() || !copy.getSrcOffsets().empty() ||
           llvm::any_of(copy.getStaticSrcOffsets(),
                        [](int64_t o) { return o != 0; }))
    no.whyNot = "a TMA store copies a whole shared tile";
  else if (BlockArgument arg = tile::getBulkCopyArgument(copy.getDst());
           !arg || arg.getOwner() != &func.getBody().front())
    no.whyNot = "the destination is no argument of the kernel's function (nor "
                "a reshape of one)";
  else
    return tile::chooseBulkCopy(dst, src, copy.getSizes(),
                                tile::getSharedSwizzle(copy.getSrc()));
  return no;
}

LogicalResult tile_to_gpu::outlineTileKernels(
    ModuleOp module, DenseMap<Operation *, KernelLoweringState> &states,
    bool wgmma, bool tma) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  SmallVector<Attribute> kernelsMetadata;
  if (auto existing = module->getAttrOfType<ArrayAttr>(
          tile::TileDialect::getKernelsMetadataAttrName()))
    kernelsMetadata.append(existing.begin(), existing.end());

  gpu::GPUModuleOp gpuModule;
  SmallVector<func::FuncOp> funcs;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.getBody().empty() &&
        !func.getBody().getOps<tile::KernelOp>().empty())
      funcs.push_back(func);

  for (func::FuncOp func : funcs) {
    auto kernels = func.getBody().getOps<tile::KernelOp>();
    if (std::next(kernels.begin()) != kernels.end())
      return func.emitOpError("holds more than one tile.kernel; put each "
                              "kernel in a function of its own");
    tile::KernelOp kernel = *kernels.begin();
    bool persistent =
        kernel->hasAttr(tile::TileDialect::getPersistentAttrName());
    if (failed(verifyTileFunction(func, kernel)))
      return failure();

    // One tensor map per (argument, shape seen, box, swizzle) the kernel's
    // bulk copies read through, passed after the function's own parameters.
    // A copy from a view (`shape`, a row-major reshape of the argument)
    // reads a map of the view's shape.
    struct TensorMap {
      unsigned arg;
      ArrayRef<int64_t> shape;
      SmallVector<int64_t> box;
      int64_t swizzleBytes;
    };
    SmallVector<TensorMap> tensorMaps;
    SmallVector<std::pair<tile::BulkCopyOp, unsigned>> bulkCopies;
    kernel.walk([&](tile::BulkCopyOp copy) {
      if (copy.getLinear())                    // 1-D bulk copies: no map
        return;
      unsigned arg = tile::getBulkCopyArgument(copy.getSrc()).getArgNumber();
      ArrayRef<int64_t> shape = copy.getSrc().getType().getShape();
      tile::BulkCopyChoice choice = tile::chooseBulkCopy(
          copy.getSrc().getType(), copy.getDst().getType(),
          copy.getDst().getType().getShape(),
          tile::getSharedSwizzle(copy.getDst()),
          copy.getMulticast().value_or(1));
      ArrayRef<int64_t> box = choice.box;
      int64_t swizzleBytes = choice.swizzleBytes;
      auto *found = llvm::find_if(tensorMaps, [&](const TensorMap &m) {
        return m.arg == arg && m.shape == shape && m.box == box &&
               m.swizzleBytes == swizzleBytes;
      });
      unsigned index = found - tensorMaps.begin();
      if (found == tensorMaps.end())
        tensorMaps.push_back({arg, shape, SmallVector<int64_t>(box),
                              swizzleBytes});
      bulkCopies.push_back({copy, index});
    });
    // Bulk stores (tma; not in a persistent mega-kernel, whose runtime
    // binds no tensor maps) read their box through a map the same way.
    SmallVector<std::pair<tile::CopyOp, unsigned>> bulkStores;
    WalkResult storesOk = kernel.walk([&](tile::CopyOp copy) {
        if (!copy.getTmaStore())
          return WalkResult::advance();
        tile::BulkCopyChoice chosen =
            chooseBulkStore(copy, func, tma, persistent);
        if (!chosen.ok()) {
          copy.emitOpError() << "asks for a TMA store (tma_store), but "
                             << chosen.whyNot;
          return WalkResult::interrupt();
        }
        std::optional<tile::BulkCopyChoice> choice = chosen;
        unsigned arg = tile::getBulkCopyArgument(copy.getDst()).getArgNumber();
        ArrayRef<int64_t> shape = copy.getDst().getType().getShape();
        auto *found = llvm::find_if(tensorMaps, [&](const TensorMap &m) {
          return m.arg == arg && m.shape == shape && m.box == choice->box &&
                 m.swizzleBytes == choice->swizzleBytes;
        });
        unsigned index = found - tensorMaps.begin();
        if (found == tensorMaps.end())
          tensorMaps.push_back({arg, shape, choice->box, choice->swizzleBytes});
        bulkStores.push_back({copy, index});
        return WalkResult::advance();
      });
    if (storesOk.wasInterrupted())
      return failure();
    SmallVector<Type> inputs(func.getArgumentTypes());
    inputs.append(tensorMaps.size(), LLVM::LLVMPointerType::get(ctx));

    // All kernels of a module share one gpu.module, so they end up in one
    // PTX file that the runtime loads once.
    if (!gpuModule) {
      b.setInsertionPointToEnd(module.getBody());
      gpuModule = gpu::GPUModuleOp::create(b, func.getLoc(), kKernelModuleName);
    }
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto gpuFunc = gpu::GPUFuncOp::create(
        b, func.getLoc(), func.getName(), b.getFunctionType(inputs, {}));
    gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                     b.getUnitAttr());
    ArrayRef<int64_t> gridRef = kernel.getGrid();
    // A warp-specialised kernel launches its producer warpgroup too.
    bool producer = false;
    kernel.walk([&](tile::ProducerOp) { producer = true; });
    int64_t launched =
        kernel.getThreads() + (producer ? tile::ProducerOp::kThreads : 0);
    SmallVector<int32_t> grid(3, 1),
        block = {static_cast<int32_t>(launched), 1, 1};
    for (auto [i, g] : llvm::enumerate(gridRef))
      grid[i] = static_cast<int32_t>(g);
    gpuFunc.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(block));
    // A resident kernel's grid is the runtime's choice, at most `grid`: a
    // known grid size would let the lowering fold %nctaid.x to the bound.
    if (!kernel.getResident())
      gpuFunc.setKnownGridSizeAttr(b.getDenseI32ArrayAttr(grid));
    // Clusters along the first grid dimension (.reqnctapercluster: a plain
    // launch groups the blocks so).
    if (std::optional<int64_t> cluster = kernel.getCluster())
      gpuFunc.setKnownClusterSizeAttr(b.getDenseI32ArrayAttr(
          {static_cast<int32_t>(*cluster), 1, 1}));
    // A persistent kernel (convert-mega-to-gpu) keeps its CTAs resident for
    // its whole life, usually one an SM: telling ptxas so lets it use every
    // register. Left to its own occupancy guess it may cap a large one at
    // 128 and spill (measured on the generation kernel: 224 bytes of
    // spills, none with the hint); with two an SM it must cap it.
    if (func->hasAttr(mega::MegaDialect::getMegaMetadataAttrName())) {
      auto perSm = func->getAttrOfType<IntegerAttr>(
          mega::MegaDialect::getCtasPerSmAttrName());
      gpuFunc->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                       b.getI32IntegerAttr(perSm ? perSm.getInt() : 1));
    }

    // Move the kernel body in; block indices become gpu.block_id.
    Block &entry = gpuFunc.getBody().front();
    Block &body = kernel.getBody().front();
    b.setInsertionPointToStart(&entry);
    static const gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                                          gpu::Dimension::z};
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      arg.replaceAllUsesWith(
          gpu::BlockIdOp::create(b, kernel.getLoc(), dims[i]).getResult());
    // The launched grid: the compiled one, but a resident kernel's first
    // dimension, which the runtime sizes to what stays resident.
    SmallVector<tile::NumBlocksOp> numBlocks;
    body.walk([&](tile::NumBlocksOp op) { numBlocks.push_back(op); });
    for (tile::NumBlocksOp op : numBlocks) {
      OpBuilder nb(op);
      int64_t dim = op.getDim();
      Value count =
          kernel.getResident() && dim == 0
              ? gpu::GridDimOp::create(nb, op.getLoc(), dims[dim]).getResult()
              : arith::ConstantIndexOp::create(nb, op.getLoc(), gridRef[dim])
                    .getResult();
      op.replaceAllUsesWith(count);
      op.erase();
    }
    for (auto [from, to] : llvm::zip(func.getArguments(), entry.getArguments()))
      from.replaceAllUsesWith(to);
    entry.getOperations().splice(entry.end(), body.getOperations());
    b.setInsertionPointToEnd(&entry);
    gpu::ReturnOp::create(b, func.getLoc());

    // Lay out shared memory: one dynamic buffer, tiles at aligned offsets.
    // Tiles of different exclusive groups (the cases of a persistent
    // kernel's task switch, which never run at once) share one region.
    KernelLoweringState &state = states[gpuFunc];
    state.numThreads = kernel.getThreads();
    state.producer = producer;
    state.wgmma = wgmma;
    unsigned numParams = func.getNumArguments();
    SmallVector<int64_t> tensorMapParams;
    for (unsigned j = 0; j < tensorMaps.size(); ++j)
      tensorMapParams.push_back(numParams + j);
    for (auto [copy, index] : bulkCopies)
      state.tensorMaps[copy] = entry.getArgument(numParams + index);
    for (auto [copy, index] : bulkStores) {
      state.tensorMaps[copy] = entry.getArgument(numParams + index);
      state.bulkStores.insert(copy);
    }
    if (!tensorMaps.empty())
      gpuFunc->setAttr(kTensorMapParamsAttrName,
                       b.getDenseI64ArrayAttr(tensorMapParams));
    // wgmma reads its operand tiles by absolute shared address under the
    // 128-byte swizzle: they start on the swizzle's 1024-byte period, and so
    // must the buffer (tilemega-align-dynamic-shared-memory).
    llvm::SmallPtrSet<Operation *, 4> periodAligned;
    // A bulk store's source, like a TMA destination, starts on its swizzle
    // atom.
    for (auto [copy, index] : bulkStores)
      if (tile::AllocSharedOp alloc =
              KernelLoweringState::sharedAlloc(copy.getSrc())) {
        state.bulkStoreTiles.insert(alloc);
        if (tensorMaps[index].swizzleBytes)
          periodAligned.insert(alloc);
      }
    if (wgmma)
      gpuFunc.walk([&](tile::GemmOp gemm) {
        if (!tile::chooseWgmma(gemm, getFragmentLayout(gemm.getC()))
                 .usesTensorCores())
          return;
        for (Value operand : {gemm.getA(), gemm.getB()})
          if (tile::AllocSharedOp alloc =
                  KernelLoweringState::sharedAlloc(operand))
            periodAligned.insert(alloc);
      });
    // A swizzled TMA destination starts on its swizzle atom (at most the
    // 1024 bytes of the 128-byte swizzle), as wgmma operands do.
    for (auto [copy, index] : bulkCopies) {
      tile::AllocSharedOp alloc =
          KernelLoweringState::sharedAlloc(copy.getDst());
      if (!alloc)
        continue;
      state.bulkCopyTiles.insert(alloc);
      if (tensorMaps[index].swizzleBytes)
        periodAligned.insert(alloc);
    }
    // Linear bulk copies' tiles too (their mbarrier orders the rows a
    // thread fills with zeros as well: it arrives after them).
    gpuFunc.walk([&](tile::BulkCopyOp copy) {
      if (copy.getLinear())
        if (tile::AllocSharedOp alloc =
                KernelLoweringState::sharedAlloc(copy.getDst()))
          state.bulkCopyTiles.insert(alloc);
    });
    if (!periodAligned.empty())
      gpuModule->setAttr(kSharedAlignmentAttrName,
                         b.getI64IntegerAttr(tile::kWgmmaSwizzleAlign));
    // Tiles whose live ranges do not overlap may share bytes
    // (TileSharedMemory.h): each goes to the lowest aligned offset clear of
    // the tiles placed so far that are live with it. A tile laid over another
    // one's bytes starts after a barrier (and an async-proxy fence: TMA or
    // wgmma may have been the last to touch them).
    tile::SharedLiveness liveness(entry, persistent);
    struct Placed {
      int64_t begin, end;
      tile::LiveRange range;
    };
    SmallVector<Placed> placed;
    llvm::SetVector<Operation *> reusing;
    int64_t sharedBytes = 0;
    auto reserve = [&](Operation *op, int64_t bytes) {
      int64_t align = periodAligned.contains(op) ? tile::kWgmmaSwizzleAlign
                                                 : kSharedAlignment;
      if (!liveness.sharesBytes()) { // One after the other (a group's from
                                     // the group base).
        sharedBytes = llvm::alignTo(sharedBytes, align);
        state.sharedOffsets[op] = sharedBytes;
        sharedBytes += bytes;
        return;
      }
      tile::LiveRange range = liveness.of(op);
      int64_t offset = 0;
      for (bool moved = true; moved;) {
        moved = false;
        offset = llvm::alignTo(offset, align);
        for (const Placed &p : placed)
          if (p.range.overlaps(range) && offset < p.end &&
              p.begin < offset + bytes) {
            offset = p.end;
            moved = true;
          }
      }
      for (const Placed &p : placed)
        if (offset < p.end && p.begin < offset + bytes)
          reusing.insert(liveness.at(range.first));
      placed.push_back({offset, offset + bytes, range});
      state.sharedOffsets[op] = offset;
      sharedBytes = std::max(sharedBytes, offset + bytes);
    };
    auto allocBytes = [](tile::AllocSharedOp alloc) {
      MemRefType type = alloc.getType();
      return type.getNumElements() *
             std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    };
    std::map<int64_t, SmallVector<Operation *>> groups;
    auto layOut = [&](Operation *op, int64_t bytes) {
      if (std::optional<int64_t> group = getExclusiveGroup(op))
        groups[*group].push_back(op);
      else
        reserve(op, bytes);
    };
    gpuFunc.walk([&](tile::AllocSharedOp alloc) { layOut(alloc, allocBytes(alloc)); });
    // Reductions across warps exchange partial results through shared
    // scratch of their own.
    gpuFunc.walk([&](tile::ReduceOp reduce) {
      if (int64_t bytes = getReduceScratchBytes(reduce))
        layOut(reduce, bytes);
    });
    int64_t groupBase = sharedBytes, groupEnd = sharedBytes;
    for (auto &[group, ops] : groups) {
      sharedBytes = groupBase;
      for (Operation *op : ops) {
        if (auto alloc = dyn_cast<tile::AllocSharedOp>(op))
          reserve(op, allocBytes(alloc));
        else
          reserve(op, getReduceScratchBytes(cast<tile::ReduceOp>(op)));
      }
      groupEnd = std::max(groupEnd, sharedBytes);
    }
    sharedBytes = groupEnd;
    if (failed(checkResidentShared(func, sharedBytes)))
      return failure();
    for (Operation *first : reusing) {
      b.setInsertionPoint(first);
      NVVM::FenceProxyOp::create(
          b, first->getLoc(), NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      gpu::BarrierOp::create(b, first->getLoc());
    }

    SmallVector<Attribute> params;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      params.push_back(buildParamMetadata(b, func, i));
    SmallVector<Attribute> tensorMapsMetadata;
    for (const TensorMap &m : tensorMaps) {
      SmallVector<NamedAttribute> fields = {
          b.getNamedAttr("param", b.getI64IntegerAttr(m.arg)),
          b.getNamedAttr("box", b.getDenseI64ArrayAttr(m.box)),
          b.getNamedAttr("swizzle_bytes", b.getI64IntegerAttr(m.swizzleBytes)),
      };
      auto argType = cast<MemRefType>(func.getArgumentTypes()[m.arg]);
      if (m.shape != argType.getShape())
        fields.push_back(
            b.getNamedAttr("shape", b.getDenseI64ArrayAttr(m.shape)));
      tensorMapsMetadata.push_back(b.getDictionaryAttr(fields));
    }
    SmallVector<int64_t> grid64(grid.begin(), grid.end()),
        block64(block.begin(), block.end());
    SmallVector<NamedAttribute> entries = {
        b.getNamedAttr("name", b.getStringAttr(func.getName())),
        b.getNamedAttr("grid", b.getDenseI64ArrayAttr(grid64)),
        b.getNamedAttr("block", b.getDenseI64ArrayAttr(block64)),
        b.getNamedAttr("dynamic_shared_bytes", b.getI64IntegerAttr(sharedBytes)),
        b.getNamedAttr("params", b.getArrayAttr(params)),
    };
    if (!tensorMapsMetadata.empty())
      entries.push_back(
          b.getNamedAttr("tensor_maps", b.getArrayAttr(tensorMapsMetadata)));
    if (std::optional<int64_t> cluster = kernel.getCluster())
      entries.push_back(
          b.getNamedAttr("cluster", b.getI64IntegerAttr(*cluster)));
    if (kernel.getResident())
      entries.push_back(b.getNamedAttr("resident", b.getBoolAttr(true)));
    // A persistent kernel (convert-mega-to-gpu) brings its task tables.
    if (auto mega = func->getAttrOfType<DictionaryAttr>(
            mega::MegaDialect::getMegaMetadataAttrName()))
      entries.push_back(b.getNamedAttr("mega", mega));
    kernelsMetadata.push_back(b.getDictionaryAttr(entries));
    func.erase();
  }
  if (!funcs.empty()) {
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    module->setAttr(tile::TileDialect::getKernelsMetadataAttrName(),
                    b.getArrayAttr(kernelsMetadata));
  }
  return success();
}
