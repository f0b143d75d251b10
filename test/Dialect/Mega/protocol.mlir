// RUN: tilemega-opt %s | tilemega-opt | FileCheck %s
// RUN: tilemega-opt %s -cse -canonicalize | FileCheck %s --check-prefix=KEEP

// The runtime protocol's ops print and parse back, and, since each orders
// memory, neither CSE nor canonicalisation merges or drops one.

// CHECK-LABEL: func.func @protocol
// KEEP-LABEL:  func.func @protocol
func.func @protocol(%events: memref<8xi32>, %state: memref<16xi32>,
                    %times: memref<4x8xi64>, %w: memref<64x64xbf16>,
                    %e: index, %start: i64, %stamp: i64) -> (i32, i32, i1, i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %one = arith.constant 1 : i32
  %off = arith.constant 256 : i64
  %bytes = arith.constant 4096 : i32
  // CHECK: mega.poll %{{.*}}[%{{.*}}] : memref<8xi32>
  // KEEP-COUNT-2: mega.poll
  %a = mega.poll %events[%e] : memref<8xi32>
  %b = mega.poll %events[%e] : memref<8xi32>
  // CHECK: mega.peek %{{.*}}[%{{.*}}] : memref<16xi32>
  // KEEP-COUNT-2: mega.peek
  %p = mega.peek %state[%c0] : memref<16xi32>
  %q = mega.peek %state[%c0] : memref<16xi32>
  // CHECK: mega.signal %{{.*}}[%{{.*}}] : memref<8xi32>
  mega.signal %events[%e] : memref<8xi32>
  // CHECK: mega.claim %{{.*}}[%{{.*}}], %{{.*}} : memref<16xi32>
  %t = mega.claim %state[%c1], %one : memref<16xi32>
  // CHECK: mega.stake %{{.*}}[%{{.*}}], %{{.*}} : memref<16xi32>
  // KEEP-COUNT-2: mega.stake
  %k0 = mega.stake %state[%c3], %one : memref<16xi32>
  %k1 = mega.stake %state[%c3], %one : memref<16xi32>
  // CHECK: mega.arrive %{{.*}}[%{{.*}}], %{{.*}} : memref<16xi32>
  %d = mega.arrive %state[%c3], %one : memref<16xi32>
  // CHECK: mega.publish %{{.*}}[%{{.*}}], %{{.*}} : memref<16xi32>
  mega.publish %state[%c1], %t : memref<16xi32>
  // CHECK: mega.post %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}} : memref<4x8xi64>, i64
  // KEEP-COUNT-2: mega.post
  mega.post %times[%c1, %c3], %stamp : memref<4x8xi64>, i64
  mega.post %times[%c1, %c3], %stamp : memref<4x8xi64>, i64
  // CHECK: mega.raise_flag %{{.*}}[%{{.*}}] : memref<16xi32>
  %raised = mega.raise_flag %state[%c3] : memref<16xi32>
  // CHECK: mega.fence
  mega.fence
  // CHECK: mega.watchdog_expired %{{.*}} {limit_ns = 2000000 : i64} : i64
  %late = mega.watchdog_expired %start {limit_ns = 2000000} : i64
  // CHECK: mega.prefetch_l2 %{{.*}}, %{{.*}}, %{{.*}} : memref<64x64xbf16>
  mega.prefetch_l2 %w, %off, %bytes : memref<64x64xbf16>
  %s0 = arith.addi %a, %b : i32
  %s1 = arith.addi %p, %q : i32
  %s2a = arith.addi %s0, %d : i32
  %s2b = arith.addi %s2a, %k0 : i32
  %s2 = arith.addi %s2b, %k1 : i32
  return %s2, %s1, %raised, %late : i32, i32, i1, i1
}
