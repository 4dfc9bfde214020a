"""Planted replay case: a CUDA extension built lazily, on the module's first call, and plain torch
for good once that build fails (a module-level flag remembers the failure).

The build fails in the first call the replay makes (the check's); every later call, the kernel
trace's included, takes the torch path without raising anything.  That path is still not the
graded one: the failure in the first call is kept, so the trace stays `pending: gpu` (on a GPU
the same record makes `replay-fallback-path`), never `replay-work-by-library`."""
import torch
import torch.nn as nn

CPP = "std::vector<torch::Tensor> topk_cuda(torch::Tensor x, int64_t k);"
CUDA = r"""
#include <torch/extension.h>
__global__ void topk_lazy_kernel(const float* x, float* v, long* i, int n, int k) {}
std::vector<torch::Tensor> topk_cuda(torch::Tensor x, int64_t k) {
    auto v = torch::empty({x.size(0), k}, x.options());
    auto i = torch::empty({x.size(0), k}, x.options().dtype(torch::kLong));
    topk_lazy_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), v.data_ptr<float>(), i.data_ptr<long>(), x.size(1), k);
    return {v, i};
}
"""

_state = {"ext": None, "failed": False}


def _extension():
    if _state["ext"] is None and not _state["failed"]:
        try:
            from torch.utils.cpp_extension import load_inline
            _state["ext"] = load_inline(name="topk_lazy_ext", cpp_sources=CPP, cuda_sources=CUDA,
                                        functions=["topk_cuda"], verbose=False)
        except Exception:   # no CUDA toolkit here: remembered, never tried again
            _state["failed"] = True
    return _state["ext"]


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        ext = _extension()
        if ext is not None:
            return tuple(ext.topk_cuda(x, self.k))
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
