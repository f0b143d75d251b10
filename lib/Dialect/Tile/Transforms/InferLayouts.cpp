//===- InferLayouts.cpp - assign fragment and parallel layouts -------------===//
//
// Fragments and tile.parallel loops are nodes; a parallel and the fragments it
// touches at all its indices must share one layout (a thread computes an
// element only where it holds every operand), so they are grouped. Some
// groups are derived from others: the result of a tile.reduce, and a
// fragment a parallel reads with one index left out (row_max[i] inside a loop
// over (i, j)), take the slice of their source's layout along that
// dimension. Seeds are the user's annotations and tile.gemm accumulators
// (the mma layout when tensor cores apply); every other root group gets the
// default blocked layout of its shape.
//
//===----------------------------------------------------------------------===//

#include "tilemega/Dialect/Tile/IR/TileLayouts.h"
#include "tilemega/Dialect/Tile/IR/TileTensorCores.h"
#include "tilemega/Dialect/Tile/Transforms/Passes.h"

#include "llvm/ADT/EquivalenceClasses.h"

namespace mlir::tilemega::tile {
#define GEN_PASS_DEF_TILEINFERLAYOUTS
#include "tilemega/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace mlir::tilemega::tile

using namespace mlir;
using namespace mlir::tilemega::tile;

namespace {


/// A fragment access in a parallel body: which parallel indices it uses.
struct FragmentAccess {
  AllocFragmentOp alloc;
  Operation *op;
  /// Parallel dimensions the access leaves out.
  SmallVector<int64_t> droppedDims;
};

SmallVector<FragmentAccess> getFragmentAccesses(ParallelOp parallel) {
  SmallVector<FragmentAccess> result;
  Block &body = parallel.getBody().front();
  parallel.getBody().walk([&](Operation *op) {
    std::optional<MemRefAccess> memAccess = getMemRefAccess(op);
    auto alloc = memAccess ? memAccess->memref.getDefiningOp<AllocFragmentOp>()
                           : nullptr;
    if (!alloc)
      return;
    FragmentAccess access{alloc, op, {}};
    for (auto [d, arg] : llvm::enumerate(body.getArguments()))
      if (!llvm::is_contained(memAccess->indices, arg))
        access.droppedDims.push_back(d);
    result.push_back(access);
  });
  return result;
}

/// "Take the slice along `dim` of the layout of `parent`'s group."
struct Derivation {
  Operation *derived;
  Operation *parent;
  int64_t dim;
  Operation *cause;
};

/// Resolves a layout conflict on a fragment that a tile.parallel only reads
/// (e.g. row maxima of one tile rescaling another tile of a different
/// shape) by a layout conversion through shared memory: right before the
/// parallel, the fragment is copied to a shared tile and back into a new
/// fragment with the layout the parallel needs, which the parallel reads
/// instead. Fails (and leaves the IR alone) when the parallel also writes
/// the fragment.
LogicalResult convertForRead(const Derivation &d, Attribute layout) {
  auto load = dyn_cast<memref::LoadOp>(d.cause);
  auto parallel = dyn_cast<ParallelOp>(d.parent);
  auto alloc = dyn_cast<AllocFragmentOp>(d.derived);
  if (!load || !parallel || !alloc)
    return failure();
  Value fragment = alloc.getResult();
  // Another read in the same parallel was converted already.
  if (load.getMemRef() != fragment)
    return success();
  WalkResult writes = parallel.getBody().walk([&](memref::StoreOp store) {
    return store.getMemRef() == fragment ? WalkResult::interrupt()
                                         : WalkResult::advance();
  });
  if (writes.wasInterrupted())
    return failure();

  MLIRContext *ctx = alloc.getContext();
  Location loc = parallel.getLoc();
  MemRefType type = alloc.getType();
  OpBuilder b(ctx);
  b.setInsertionPointAfter(alloc);
  auto sharedType = MemRefType::get(
      type.getShape(), type.getElementType(), AffineMap(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  auto staging = AllocSharedOp::create(b, loc, sharedType, SwizzleAttr());
  auto copy = AllocFragmentOp::create(b, loc, type, layout);
  // The staging tile lives where the fragment does (tile.exclusive_group).
  staging->setDiscardableAttrs(alloc->getDiscardableAttrDictionary());
  b.setInsertionPoint(parallel);
  SmallVector<int64_t> zeros(type.getRank(), 0);
  auto zerosAttr = b.getDenseI64ArrayAttr(zeros);
  auto sizes = b.getDenseI64ArrayAttr(type.getShape());
  CopyOp::create(b, loc, fragment, ValueRange(), zerosAttr,
                 staging.getResult(), ValueRange(), zerosAttr, sizes);
  CopyOp::create(b, loc, staging.getResult(), ValueRange(), zerosAttr,
                 copy.getResult(), ValueRange(), zerosAttr, sizes);
  fragment.replaceUsesWithIf(copy.getResult(), [&](OpOperand &use) {
    return parallel->isProperAncestor(use.getOwner());
  });
  return success();
}

/// A 16-bit gemm that tensor cores cannot serve says why, instead of being
/// silently slow (f32 and i8 gemms are SIMT by design).
void warnIfSimt(GemmOp gemm, const TensorCoreChoice &choice) {
  if (choice.tensorCoreInputs && !choice.usesTensorCores())
    gemm.emitWarning() << "runs on CUDA cores, not tensor cores: "
                       << choice.whyNot;
}

//===- Shared-memory swizzles of tensor-core operands ---------------------===//
//
// ldmatrix reads 8x8 matrices of 16-bit elements: in each of its phases 8
// lanes read one 16-byte row each, 8 consecutive tile rows at the same column
// (rows 8i..8i+7 of the 16x16 A, 16x8 B or transposed tiles; the warp's
// sub-tile starts on a multiple of 8 rows). Shared memory serves 32 banks of
// 4 bytes, i.e. 8 groups of 16 bytes per 128-byte wavefront; the phase is
// conflict-free iff its 8 row addresses fall into 8 distinct groups
// (address / 16) % 8. Unswizzled, rows of R = 64 halves (128 bytes) all hit
// the same group (8-way conflict), R = 32 is 4-way, R = 16 2-way.
//
// Swizzle<bits, base = 3, shift> XORs the 16-byte chunk index c = (o >> 3) %
// 2^bits of element offset o with (o >> (3 + shift)) % 2^bits:
//  - bits = log2(min(2R, 128) / 16): a row of 2R >= 32 bytes has at least
//    2^bits chunks, so the XOR stays inside the row and permutes its 16-byte
//    chunks (which stay contiguous: base = 3 leaves the low 3 bits alone).
//  - the XOR source is the index of the 128-byte line: o / max(R, 64), so
//    shift = max(log2 R, 6) - 3. For R >= 64 that is the row r itself, and
//    group = (c ^ r) % 8 is 8 distinct values over 8 consecutive rows. For
//    R < 64 one line holds L = 64 / R rows; group = (r % L) * (8 / L) +
//    (c ^ (r / L)) % (8 / L): r % L and r / L together take 8 distinct value
//    pairs over 8 consecutive rows, so again 8 groups. (shift = log2 R - 3,
//    i.e. the row's own low bits, would leave rows r and r + 4 in one group
//    for R = 16 and R = 32: a 2-way conflict.)
// The same swizzle keeps the cooperative 16-byte copy stores (8 lanes on 8
// consecutive chunks of one line) conflict-free, since it permutes chunks
// within each line. Checked exhaustively for R = 16..512 with a small model.

/// The ldmatrix-friendly swizzle of a shared tile of 16-bit elements with
/// rows of `rowElems`, or null when the row is not a power of two of at
/// least 32 bytes.
SwizzleAttr getLdmatrixSwizzle(MLIRContext *ctx, int64_t rowElems,
                               unsigned elemBits) {
  if (elemBits != 16 || rowElems < 16 || !llvm::isPowerOf2_64(rowElems))
    return nullptr;
  int64_t rowBytes = rowElems * 2;
  int64_t bits = llvm::Log2_64(std::min<int64_t>(rowBytes, 128) / 16);
  int64_t base = 3; // 8 elements: one 16-byte ldmatrix row.
  int64_t shift = std::max<int64_t>(llvm::Log2_64(rowElems), 6) - base;
  return SwizzleAttr::get(ctx, bits, base, shift);
}

/// True when every access of `alloc`'s tile goes through tile ops (or loads
/// and stores in tile.parallel bodies), which all apply its swizzle; directly
/// or through its multi-buffered stages.
bool onlySwizzleAwareUses(AllocSharedOp alloc) {
  auto awareUser = [&](Operation *user) {
    if (isa<TileDialect>(user->getDialect()))
      return true;
    if (isa<memref::LoadOp, memref::StoreOp>(user))
      return user->getParentOfType<ParallelOp>() != nullptr;
    return false;
  };
  for (Operation *user : alloc->getUsers()) {
    if (auto subview = dyn_cast<memref::SubViewOp>(user)) {
      if (getMultiBufferedAlloc(subview.getResult()) != alloc ||
          !llvm::all_of(subview->getUsers(), awareUser))
        return false;
      continue;
    }
    if (!awareUser(user))
      return false;
  }
  return true;
}

/// Gives the shared A and B tiles of tensor-core gemms (those whose
/// accumulator got the mma layout) the ldmatrix swizzle, unless the user
/// chose one (a `swizzle` attribute, even bits = 0, is left alone).
void inferTensorCoreSwizzles(KernelOp kernel) {
  kernel.walk([&](GemmOp gemm) {
    auto c = gemm.getC().getDefiningOp<AllocFragmentOp>();
    if (!c || !chooseTensorCores(gemm, c.getLayoutAttr()).usesTensorCores())
      return;
    for (Value operand : {gemm.getA(), gemm.getB()}) {
      auto alloc = operand.getDefiningOp<AllocSharedOp>();
      if (!alloc)
        alloc = getMultiBufferedAlloc(operand);
      if (!alloc || alloc.getSwizzleAttr() || !onlySwizzleAwareUses(alloc))
        continue;
      MemRefType type = cast<MemRefType>(operand.getType());
      if (SwizzleAttr swizzle = getLdmatrixSwizzle(
              gemm.getContext(), type.getShape().back(),
              type.getElementTypeBitWidth()))
        alloc.setSwizzleAttr(swizzle);
    }
  });
}

/// Gives `gemm`'s operand tiles that have no swizzle yet
/// tile::getWgmmaOperandSwizzle's (rows of 64 16-bit elements: the 128-byte
/// swizzle; wider rows: the same in 64-column blocks) when tile::chooseWgmma
/// then accepts the gemm with the accumulator layout `layout`; true then.
/// Otherwise false, with the tiles as they were (and chooseWgmma's reason
/// in `why`, when given).
bool proposeWgmmaSwizzles(GemmOp gemm, MmaLayoutAttr layout,
                          std::string *why = nullptr) {
  SmallVector<AllocSharedOp> swizzled;
  for (Value operand : {gemm.getA(), gemm.getB()}) {
    auto alloc = operand.getDefiningOp<AllocSharedOp>();
    if (!alloc || alloc.getSwizzleAttr() || !onlySwizzleAwareUses(alloc))
      continue;
    MemRefType type = alloc.getType();
    if (SwizzleAttr swizzle = getWgmmaOperandSwizzle(
            gemm.getContext(), type.getShape().back(),
            type.getElementTypeBitWidth())) {
      alloc.setSwizzleAttr(swizzle);
      swizzled.push_back(alloc);
    }
  }
  TensorCoreChoice choice = chooseWgmma(gemm, layout);
  if (choice.usesTensorCores())
    return true;
  if (why)
    *why = choice.whyNot;
  for (AllocSharedOp alloc : swizzled)
    alloc.removeSwizzleAttr();
  return false;
}

/// The wgmma accumulator layout (16 rows a warp) for `gemm` when
/// proposeWgmmaSwizzles accepts it; null otherwise.
MmaLayoutAttr proposeWgmmaLayout(GemmOp gemm, int64_t threads,
                                 std::string *why = nullptr) {
  int64_t warps = threads / 32;
  auto layout = MmaLayoutAttr::get(gemm.getContext(), ArrayRef<int64_t>{warps, 1});
  return proposeWgmmaSwizzles(gemm, layout, why) ? layout : nullptr;
}

struct TileInferLayoutsPass
    : public mlir::tilemega::tile::impl::TileInferLayoutsBase<
          TileInferLayoutsPass> {
  using TileInferLayoutsBase::TileInferLayoutsBase;

  void runOnOperation() override {
    getOperation().walk([&](KernelOp kernel) {
      if (failed(inferKernel(kernel)))
        signalPassFailure();
    });
  }

  LogicalResult inferKernel(KernelOp kernel) {
    MLIRContext *ctx = kernel.getContext();
    int64_t threads = kernel.getThreads();

    llvm::EquivalenceClasses<Operation *> groups;
    SmallVector<ParallelOp> parallels;
    SmallVector<Derivation> derivations;
    kernel.walk([&](AllocFragmentOp alloc) { groups.insert(alloc); });
    kernel.walk([&](ParallelOp parallel) -> WalkResult {
      parallels.push_back(parallel);
      groups.insert(parallel);
      for (const FragmentAccess &access : getFragmentAccesses(parallel)) {
        if (access.droppedDims.empty()) {
          groups.unionSets(parallel.getOperation(), access.alloc);
        } else if (access.droppedDims.size() == 1) {
          derivations.push_back({access.alloc, parallel,
                                 access.droppedDims.front(), access.op});
        } else {
          access.op->emitOpError()
              << "reads a fragment with " << access.droppedDims.size()
              << " of the parallel's indices left out; only one is supported";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    kernel.walk([&](ReduceOp reduce) {
      auto src = reduce.getSrc().getDefiningOp<AllocFragmentOp>();
      auto dst = reduce.getDst().getDefiningOp<AllocFragmentOp>();
      if (src && dst)
        derivations.push_back({dst, src, reduce.getDim(), reduce});
    });

    // Seeds: annotations (which must agree within a group), then gemm
    // accumulators.
    DenseMap<Operation *, Attribute> layoutOf; // group leader -> layout
    DenseMap<Operation *, Operation *> decidedBy;
    auto seed = [&](Operation *member, Attribute layout,
                    Operation *by) -> LogicalResult {
      Operation *leader = groups.getLeaderValue(member);
      Attribute &chosen = layoutOf[leader];
      if (chosen && chosen != layout) {
        InFlightDiagnostic diag =
            by->emitOpError()
            << "layout " << layout << " conflicts with layout " << chosen
            << " of a fragment that shares tile.parallel bodies with it "
               "(directly or through other fragments)";
        diag.attachNote(decidedBy[leader]->getLoc())
            << "the other layout comes from here";
        return failure();
      }
      chosen = layout;
      decidedBy[leader] = by;
      return success();
    };
    WalkResult walk = kernel.walk([&](Operation *op) -> WalkResult {
      if (auto alloc = dyn_cast<AllocFragmentOp>(op))
        if (Attribute layout = alloc.getLayoutAttr())
          return failed(seed(alloc, layout, alloc)) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
      if (auto parallel = dyn_cast<ParallelOp>(op))
        if (Attribute layout = parallel.getLayoutAttr())
          return failed(seed(parallel, layout, parallel))
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    bool failedGemm = false;
    kernel.walk([&](GemmOp gemm) {
      auto c = gemm.getC().getDefiningOp<AllocFragmentOp>();
      if (!c)
        return;
      if (Attribute decided = layoutOf.lookup(groups.getLeaderValue(c))) {
        // A later gemm into an accumulator an earlier one laid out for
        // wgmma (Q K^T before and inside a loop): its operand tiles take
        // wgmma's swizzle too where it then applies, not the ldmatrix one
        // (which differs for rows wider than 64 elements).
        if (auto mma = dyn_cast<MmaLayoutAttr>(decided); mma && wgmma)
          proposeWgmmaSwizzles(gemm, mma);
        return;
      }
      if (isWgmmaOnlyInput(gemm.getA().getType().getElementType())) {
        // No mma.sync or SIMT form to fall back to: wgmma or an error.
        MmaLayoutAttr hopper = wgmma ? proposeWgmmaLayout(gemm, threads)
                                     : MmaLayoutAttr();
        if (!hopper) {
          std::string why =
              wgmma ? chooseWgmma(gemm, MmaLayoutAttr::get(
                                            gemm.getContext(),
                                            ArrayRef<int64_t>{threads / 32, 1}))
                          .whyNot
                    : "the wgmma lowering is off (sm_90a with wgmma needed)";
          gemm.emitOpError() << "multiplies 8-bit floats, which only wgmma "
                                "does, and cannot take it: "
                             << why;
          failedGemm = true;
          return;
        }
        layoutOf[groups.getLeaderValue(c)] = hopper;
        decidedBy[groups.getLeaderValue(c)] = gemm;
        return;
      }
      if (auto a = gemm.getA().getDefiningOp<AllocFragmentOp>();
          a && wgmma) {
        // wgmma's register form: a thread's A registers are the slots the
        // accumulator's layout gives it in A's M x K, so A's fragment (and
        // whatever shares tile.parallel bodies with it: the scores P was
        // computed from) takes the accumulator's layout.
        std::string why;
        MmaLayoutAttr hopper = proposeWgmmaLayout(gemm, threads, &why);
        if (!hopper) {
          // No other lowering multiplies a fragment A: say why this one
          // cannot, here rather than as a CUDA-core fallback that fails.
          gemm.emitOpError()
              << "takes A from registers (a fragment), which only wgmma's "
                 "register form does, and cannot: "
              << why;
          failedGemm = true;
          return;
        }
        if (failed(seed(a, hopper, gemm))) {
          failedGemm = true;
          return;
        }
        layoutOf[groups.getLeaderValue(c)] = hopper;
        decidedBy[groups.getLeaderValue(c)] = gemm;
        return;
      }
      TensorCoreChoice choice = chooseTensorCores(gemm, threads);
      if (!choice.usesTensorCores()) {
        warnIfSimt(gemm, choice);
        return;
      }
      if (wgmma)
        if (MmaLayoutAttr hopper = proposeWgmmaLayout(gemm, threads))
          choice.layout = hopper;
      layoutOf[groups.getLeaderValue(c)] = choice.layout;
      decidedBy[groups.getLeaderValue(c)] = gemm;
    });
    if (failedGemm)
      return failure();

    // Derived groups take slices of their parents; the remaining roots get
    // the default blocked layout. Repeat until everything has a layout.
    DenseSet<Operation *> derivedLeaders;
    DenseSet<Operation *> converted;
    DenseSet<Operation *> reduceTargets;
    for (const Derivation &d : derivations)
      if (isa<ReduceOp>(d.cause))
        reduceTargets.insert(groups.getLeaderValue(d.derived));
    for (const Derivation &d : derivations)
      derivedLeaders.insert(groups.getLeaderValue(d.derived));
    bool changed = true;
    while (changed) {
      changed = false;
      for (const Derivation &d : derivations) {
        if (converted.contains(d.cause))
          continue;
        Operation *leader = groups.getLeaderValue(d.derived);
        Attribute parent = layoutOf.lookup(groups.getLeaderValue(d.parent));
        if (!parent)
          continue;
        // A reduction's result must be the slice of its source (it cannot
        // be converted on the way); sliced reads can. So a reduction decides
        // first, and reads that disagree get a conversion.
        if (isa<memref::LoadOp>(d.cause) && !layoutOf.count(leader) &&
            reduceTargets.contains(leader))
          continue;
        if (getLayoutRank(parent) < 2)
          return d.cause->emitOpError()
                 << "needs a slice of the 1-d layout " << parent
                 << "; reducing a 1-d tile to one value is not supported yet";
        if (isa<SliceLayoutAttr>(parent))
          return d.cause->emitOpError()
                 << "needs a slice of the layout " << parent
                 << ", which is itself a slice; that is not supported";
        Attribute sliced = SliceLayoutAttr::get(ctx, d.dim, parent);
        Attribute existing = layoutOf.lookup(leader);
        if (existing == sliced)
          continue;
        if (existing && succeeded(convertForRead(d, sliced))) {
          converted.insert(d.cause);
          continue;
        }
        if (existing) {
          InFlightDiagnostic diag =
              d.cause->emitOpError()
              << "needs layout " << sliced << " for a fragment that has "
              << "layout " << existing
              << "; converting between them is not supported";
          diag.attachNote(decidedBy[leader]->getLoc())
              << "that layout comes from here";
          return failure();
        }
        layoutOf[leader] = sliced;
        decidedBy[leader] = d.cause;
        changed = true;
      }
      if (changed)
        continue;
      for (auto it = groups.begin(); it != groups.end(); ++it) {
        if (!(*it)->isLeader())
          continue;
        Operation *leader = (*it)->getData();
        if (layoutOf.count(leader) || derivedLeaders.contains(leader))
          continue;
        layoutOf[leader] = getDefaultForGroup(groups, **it, threads);
        decidedBy[leader] = leader;
        changed = true;
        break; // Derivations may follow from this one first.
      }
    }

    // Apply and check.
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      Operation *member = (*it)->getData();
      Attribute layout = layoutOf.lookup(groups.getLeaderValue(member));
      if (!layout)
        return member->emitOpError(
            "has no layout: its layout depends on itself through "
            "tile.reduce / tile.parallel slices");
      if (auto parallel = dyn_cast<ParallelOp>(member)) {
        parallel.setLayoutAttr(layout);
        continue;
      }
      auto alloc = cast<AllocFragmentOp>(member);
      ArrayRef<int64_t> shape = alloc.getType().getShape();
      std::string why;
      FailureOr<ThreadOwnership> ownership =
          getThreadOwnership(layout, shape, &why);
      if (failed(ownership))
        return alloc.emitOpError() << "cannot use layout " << layout << ": "
                                   << why;
      if (!ownership->coversExactly()) {
        if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout)) {
          SmallVector<int64_t> chunk;
          for (unsigned d = 0; d < blocked.getRank(); ++d)
            chunk.push_back(blocked.getChunkExtent(d));
          return alloc.emitOpError()
                 << "cannot spread a fragment of shape " << formatShape(shape)
                 << " evenly over " << threads
                 << " threads: its layout covers tiles of "
                 << formatShape(chunk)
                 << "; use a larger fragment or fewer threads";
        }
        return alloc.emitOpError()
               << "layout " << layout << " does not cover a fragment of shape "
               << formatShape(shape) << " exactly";
      }
      alloc.setLayoutAttr(layout);
    }
    inferTensorCoreSwizzles(kernel);
    return success();
  }

  /// Elements of a fragment one 128-bit access moves: by the element type of
  /// the memory it is copied from or to (a bf16 tensor loaded into an f32
  /// fragment moves 8 elements at a time), else by its own element type.
  static int64_t getAccessVectorElems(AllocFragmentOp alloc) {
    int64_t elems = 0;
    for (Operation *user : alloc->getUsers()) {
      auto copy = dyn_cast<CopyOp>(user);
      if (!copy)
        continue;
      Value other = copy.getSrc() == alloc.getResult() ? copy.getDst()
                                                       : copy.getSrc();
      int64_t v = getMaxVectorElems(
          cast<MemRefType>(other.getType()).getElementType());
      elems = elems ? std::min(elems, v) : v;
    }
    return elems; // 0: not copied, no constraint of its own.
  }

  /// The default blocked layout of a group: its shape, and one 128-bit
  /// access per thread and chunk (see getAccessVectorElems).
  static Attribute
  getDefaultForGroup(llvm::EquivalenceClasses<Operation *> &groups,
                     const llvm::EquivalenceClasses<Operation *>::ECValue &leader,
                     int64_t threads) {
    // Copied fragments decide the width (their memory accesses are what
    // vectorises); a group without copies goes by its element types.
    int64_t copiedVec = 16, ownVec = 16;
    SmallVector<int64_t> shape;
    bool hasFragment = false;
    for (auto member = groups.member_begin(leader);
         member != groups.member_end(); ++member) {
      if (auto alloc = dyn_cast<AllocFragmentOp>(*member)) {
        hasFragment = true;
        if (int64_t elems = getAccessVectorElems(alloc))
          copiedVec = std::min(copiedVec, elems);
        ownVec = std::min(ownVec,
                          getMaxVectorElems(alloc.getType().getElementType()));
        shape.assign(alloc.getType().getShape().begin(),
                     alloc.getType().getShape().end());
      } else if (shape.empty()) {
        auto extents = cast<ParallelOp>(*member).getExtents();
        shape.assign(extents.begin(), extents.end());
      }
    }
    // A parallel that touches no fragment: one element per thread and
    // neighbouring threads on neighbouring elements (coalesced scalars).
    int64_t maxVec = copiedVec < 16 ? copiedVec : ownVec;
    if (!hasFragment)
      maxVec = 1;
    return getDefaultBlockedLayout(leader.getData()->getContext(), shape,
                                   maxVec, threads);
  }
};

} // namespace
