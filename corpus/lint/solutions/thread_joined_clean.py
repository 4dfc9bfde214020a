# look-alike of work outliving the timer: the batch is split over a thread pool whose with block waits
# for every task, and a warm-up thread started at import is joined before the first launch
import concurrent.futures
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rowscale(x_ptr, w_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(2):
        acc += tl.load(x_ptr + row * N + cols, mask=m, other=0.0) * tl.load(w_ptr + cols, mask=m, other=0.0)
    tl.store(y_ptr + row * N + cols, acc, mask=m)


def _launch(x, w, y):
    _rowscale[(x.shape[0],)](x, w, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def _warm():
    torch.empty(1)


_WARM = threading.Thread(target=_warm, daemon=True)
_WARM.start()


class Model(nn.Module):
    def __init__(self, N):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(N))

    def forward(self, x):
        _WARM.join()
        y = torch.empty_like(x)
        halves = list(zip(x.chunk(2), y.chunk(2)))
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(_launch, xs, self.weight, ys) for xs, ys in halves]
            for f in futures:
                f.result()
        return y
