"""An access-policy window set through a CUDA library loaded with ctypes (issue 35, found by hand): what
it does is the hit and miss properties the window carries, read from the structure the call passes, not
the call alone.  Persisting hits (or misses) are L2-PERSISTING-WINDOW (high: the lines outlive the deck's
L2 flush); a window whose properties are normal or streaming pins nothing (info); a property the source
does not give keeps the call's reading (high).  None of the forms below is the bench's
(`cudart_access_window`: positional construction, hitProp 2).

The host is test_memo_gaps' small Triton GEMM; PRE is module-level code, BODY the first lines of forward.
"""

from __future__ import annotations

import pytest

from lint_util import worst_rules
from test_memo_gaps import solution

STRUCT = """
import ctypes

class _Win(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]

class _AttrValue(ctypes.Structure):
    _fields_ = [("accessPolicyWindow", _Win)]

_RT = ctypes.CDLL("libcudart.so")
_DRV = ctypes.CDLL("libcuda.so.1")
PERSISTING = 2
STREAMING = 1
"""
STREAM = "ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)"

PERSISTENT = {
    "keywords_and_a_named_constant": f"""
        w = _Win(base_ptr=x.data_ptr(), num_bytes=x.numel() * x.element_size(), hitRatio=0.9, hitProp=PERSISTING,
                 missProp=0)
        _RT.cudaStreamSetAttribute({STREAM}, 1, ctypes.byref(w))""",
    "field_set_after_construction": f"""
        w = _Win()
        w.base_ptr = x.data_ptr()
        w.hitProp = 2
        _RT.cudaStreamSetAttribute({STREAM}, 1, ctypes.pointer(w))""",
    "driver_union_nested_field": f"""
        v = _AttrValue()
        v.accessPolicyWindow.num_bytes = 1 << 24
        v.accessPolicyWindow.hitProp = ctypes.c_int(2)
        _DRV.cuStreamSetAttribute({STREAM}, 1, ctypes.byref(v))""",
    "missing_value_keeps_the_call": f"""
        w = _Win(x.data_ptr(), 1 << 24, 1.0, self.K % 3, 0)
        _RT.cudaStreamSetAttribute({STREAM}, 1, ctypes.byref(w))""",
}

NOT_PERSISTENT = {
    "reset_window": f"""
        w = _Win(0, 0, 0.0, 0, 0)
        _RT.cudaStreamSetAttribute({STREAM}, 1, ctypes.byref(w))""",
    "streaming_by_field": f"""
        w = _Win()
        w.base_ptr = x.data_ptr()
        w.hitProp = STREAMING
        w.missProp = STREAMING
        _RT.cudaStreamSetAttribute({STREAM}, 1, ctypes.byref(w))""",
}


@pytest.mark.parametrize("name", sorted(PERSISTENT))
def test_a_window_with_persisting_hits_is_decided(name):
    got = worst_rules(solution(pre=STRUCT, body=PERSISTENT[name]))
    assert got.get("L2-PERSISTING-WINDOW") == "high", got


@pytest.mark.parametrize("name", sorted(NOT_PERSISTENT))
def test_a_window_that_pins_nothing_is_not(name):
    got = worst_rules(solution(pre=STRUCT, body=NOT_PERSISTENT[name]))
    assert "L2-PERSISTING-WINDOW" not in got and "CAP-NATIVE" not in got, got
