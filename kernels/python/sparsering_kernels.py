"""Former home of the ctypes binding of libsparsering_kernels.so; it now lives in the sparsering
package (python/sparsering/capi.py). This module re-exports it for scripts that put
kernels/python on sys.path."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from sparsering.capi import (LAYOUTS, SR_CUDA_ERROR, SR_INPUT_ERROR, SR_OK, DeviceIndex, GpuIndex,  # noqa: E402,F401
                             RingPosition, SparseringError, SparseringKernels)
