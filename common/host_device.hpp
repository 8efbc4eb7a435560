// SPARSERING_HD marks small pure functions that both host code and CUDA kernels call
// (token layouts, tile arithmetic), so there is one copy of each rule.
#pragma once

#if defined(__CUDACC__)
#define SPARSERING_HD __host__ __device__
#else
#define SPARSERING_HD
#endif
