// Copyright (c) 2031, Tinylib Authors (a fixture library written for the forensics tests)
// A made-up library CUDA kernel: gather pages through a table and reduce them with a running
// rescale, one warp per (sequence, head).  Written for tests/test_pasted.py.
#include <cuda_bf16.h>
#include <stdint.h>

namespace tinylib {

template <int PAGE, int HEAD_DIM, int WARPS>
__global__ void tinylib_page_gather_reduce_kernel(const __nv_bfloat16* __restrict__ pool,
                                                  const int32_t* __restrict__ table,
                                                  const int32_t* __restrict__ lengths,
                                                  const float* __restrict__ weights, float* __restrict__ out,
                                                  int pages_per_seq, int heads, float temperature) {
  const int seq = blockIdx.x;
  const int head = blockIdx.y * WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (head >= heads) return;
  const int len = lengths[seq];
  float running_max = -1e30f, running_sum = 0.f;
  float acc[HEAD_DIM / 32];
#pragma unroll
  for (int j = 0; j < HEAD_DIM / 32; ++j) acc[j] = 0.f;
  for (int tok = 0; tok < len; ++tok) {
    const int page = table[seq * pages_per_seq + tok / PAGE];
    const __nv_bfloat16* row = pool + ((int64_t)page * PAGE + tok % PAGE) * heads * HEAD_DIM + head * HEAD_DIM;
    float score = 0.f;
#pragma unroll
    for (int j = 0; j < HEAD_DIM / 32; ++j) score += __bfloat162float(row[lane + 32 * j]) * weights[head * HEAD_DIM + lane + 32 * j];
    for (int off = 16; off > 0; off >>= 1) score += __shfl_xor_sync(0xffffffff, score, off);
    score *= temperature;
    const float new_max = fmaxf(running_max, score);
    const float rescale = __expf(running_max - new_max);
    const float p = __expf(score - new_max);
    running_sum = running_sum * rescale + p;
#pragma unroll
    for (int j = 0; j < HEAD_DIM / 32; ++j) acc[j] = acc[j] * rescale + p * __bfloat162float(row[lane + 32 * j]);
    running_max = new_max;
  }
  const float inv = running_sum > 0.f ? 1.f / running_sum : 0.f;
#pragma unroll
  for (int j = 0; j < HEAD_DIM / 32; ++j) out[((int64_t)seq * heads + head) * HEAD_DIM + lane + 32 * j] = acc[j] * inv;
}

}  // namespace tinylib
