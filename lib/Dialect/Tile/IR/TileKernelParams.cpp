//===- TileKernelParams.cpp - how a kernel's parameters are described ------===//

#include "tilemega/Dialect/Tile/IR/TileKernelParams.h"

#include "tilemega/Dialect/Tile/IR/TileDialect.h"

using namespace mlir;
using namespace mlir::tilemega;

StringRef tile::getDTypeName(Type type) {
  if (type.isF16())
    return "float16";
  if (type.isBF16())
    return "bfloat16";
  if (type.isF32())
    return "float32";
  if (isa<Float8E4M3FNType>(type))
    return "float8_e4m3fn";
  if (isa<Float8E5M2Type>(type))
    return "float8_e5m2";
  if (type.isF64())
    return "float64";
  if (type.isIndex() || type.isInteger(64))
    return "int64";
  if (type.isInteger(32))
    return "int32";
  if (type.isInteger(16))
    return "int16";
  if (type.isInteger(8))
    return "int8";
  return "";
}

bool tile::isKernelTensorType(MemRefType type) {
  return isGlobal(type) && type.hasStaticShape() &&
         type.getLayout().isIdentity() &&
         !getDTypeName(type.getElementType()).empty();
}

DictionaryAttr tile::buildParamMetadata(Builder &b, StringRef name,
                                        StringAttr role, Type type) {
  SmallVector<NamedAttribute> entries;
  entries.push_back(b.getNamedAttr("name", b.getStringAttr(name)));
  if (role)
    entries.push_back(b.getNamedAttr("role", role));
  if (auto memref = dyn_cast<MemRefType>(type)) {
    entries.push_back(b.getNamedAttr("kind", b.getStringAttr("tensor")));
    entries.push_back(b.getNamedAttr(
        "dtype", b.getStringAttr(getDTypeName(memref.getElementType()))));
    entries.push_back(
        b.getNamedAttr("shape", b.getDenseI64ArrayAttr(memref.getShape())));
    SmallVector<int64_t> strides(memref.getRank(), 1);
    for (int d = memref.getRank() - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * memref.getDimSize(d + 1);
    entries.push_back(
        b.getNamedAttr("strides", b.getDenseI64ArrayAttr(strides)));
    // The lowering emits up to 16-byte vector accesses assuming the base
    // address is 16-byte aligned (cudaMalloc gives 256); the runtime checks.
    entries.push_back(b.getNamedAttr("alignment", b.getI64IntegerAttr(16)));
  } else {
    entries.push_back(b.getNamedAttr("kind", b.getStringAttr("scalar")));
    entries.push_back(
        b.getNamedAttr("dtype", b.getStringAttr(getDTypeName(type))));
  }
  return b.getDictionaryAttr(entries);
}
