"""scale_add written with the TileLang-style frontend `tilemega.language`.

B = alpha * A + 1 over a 256x1024 float32 matrix, the same kernel that
examples/scale_add.py builds with the raw IR builders: each block moves a
64x128 tile global -> shared -> registers, computes the elementwise body with
T.Parallel, and writes the tile back.

    python examples/scale_add_lang.py OUT_DIR   # print the IR, save the artifact
    scale_add(a, b, 0.75)                       # on a GPU: compile (cached) + launch
"""

import sys

import tilemega
import tilemega.language as T

M, N = 256, 1024
BLOCK_M, BLOCK_N = 64, 128


@tilemega.jit
def scale_add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
              alpha: T.float32):
    with T.Kernel(M // BLOCK_M, N // BLOCK_N, threads=128) as (bx, by):
        A_s = T.alloc_shared((BLOCK_M, BLOCK_N), "float32")
        A_f = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
        T.copy(A[bx * BLOCK_M, by * BLOCK_N], A_s)    # region start; extent = A_s's shape
        T.copy(A_s, A_f)
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            A_f[i, j] = A_f[i, j] * alpha + 1.0
        T.copy(A_f, B[bx * BLOCK_M, by * BLOCK_N])


def reference(a, alpha):
    return a * alpha + 1.0


if __name__ == "__main__":
    print(scale_add.ir())
    compiled = scale_add.compile()
    print(compiled.save(sys.argv[1] if len(sys.argv) > 1 else "out"))
