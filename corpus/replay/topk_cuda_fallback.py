"""Planted replay case: a CUDA extension built at import, and plain torch where the build fails.

On a CPU machine the build fails (no CUDA toolkit) and the solution falls back to Tensor.sort: the
kernel trace sees only torch's operators, but that branch is not the graded path (an exception went
through the solution's code): `replay-kernel-trace` with `pending: gpu`, never `replay-work-by-library`."""
import torch
import torch.nn as nn

CPP = "std::vector<torch::Tensor> topk_cuda(torch::Tensor x, int64_t k);"
CUDA = r"""
#include <torch/extension.h>
__global__ void topk_rows_kernel(const float* x, float* v, long* i, int n, int k) {}
std::vector<torch::Tensor> topk_cuda(torch::Tensor x, int64_t k) {
    auto v = torch::empty({x.size(0), k}, x.options());
    auto i = torch::empty({x.size(0), k}, x.options().dtype(torch::kLong));
    topk_rows_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), v.data_ptr<float>(), i.data_ptr<long>(), x.size(1), k);
    return {v, i};
}
"""

try:
    from torch.utils.cpp_extension import load_inline
    _ext = load_inline(name="topk_rows_ext", cpp_sources=CPP, cuda_sources=CUDA, functions=["topk_cuda"],
                       verbose=False)
except Exception:   # no CUDA toolkit here: the torch path below
    _ext = None


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        if _ext is not None:
            return tuple(_ext.topk_cuda(x, self.k))
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
