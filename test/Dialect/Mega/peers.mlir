// RUN: tilemega-opt %s | tilemega-opt | FileCheck %s

// A graph of several ranks and its peer events round-trip.

func.func @copy(%a: memref<64xf32>, %b: memref<64xf32>) {
  tile.kernel blocks(%i) in [1] threads 64 {
  }
  return
}

// CHECK-LABEL: mega.graph @tp(
// CHECK-SAME:    workers 4 schedulers 0 ranks 4 {
// CHECK-NEXT:    mega.event @pushed trigger 1 peers
// CHECK-NEXT:    mega.event @local trigger 1{{$}}
// CHECK-NEXT:    mega.task @push body @copy(%{{.*}}) count 1 signals [@pushed, @local]
// CHECK-NEXT:    mega.task @sum body @copy(%{{.*}}) count 1 waits [@pushed, @local]
mega.graph @tp(%x: memref<64xf32>, %y: memref<64xf32>) workers 4 schedulers 0 ranks 4 {
  mega.event @pushed trigger 1 peers
  mega.event @local trigger 1
  mega.task @push body @copy(%x, %y : memref<64xf32>, memref<64xf32>) count 1
      signals [@pushed, @local]
  mega.task @sum body @copy(%y, %x : memref<64xf32>, memref<64xf32>) count 1
      waits [@pushed, @local]
}

// One rank is the default and is not printed.
// CHECK-LABEL: mega.graph @one(
// CHECK-SAME:    workers 1 {
mega.graph @one(%x: memref<64xf32>, %y: memref<64xf32>) workers 1 ranks 1 {
  mega.task @t body @copy(%x, %y : memref<64xf32>, memref<64xf32>) count 1
}
