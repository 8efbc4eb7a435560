// Tests of SPARSERING_CUDA_CHECK (kernels/cuda/cuda_check.hpp): a failing status throws CudaError
// whose message names the expression, the file:line, the device and the error, and whose code()
// is the status; cudaSuccess passes. No GPU needed (the statuses are constructed directly).
#include "kernels/cuda/cuda_check.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sparsering {
namespace {

cudaError_t fail_with(cudaError_t status) { return status; }

TEST(CudaCheck, ThrowsWithExpressionLocationAndCode) {
  try {
    SPARSERING_CUDA_CHECK(fail_with(cudaErrorInvalidValue));
    FAIL() << "no exception";
  } catch (const CudaError& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.code(), cudaErrorInvalidValue);
    EXPECT_NE(message.find("fail_with(cudaErrorInvalidValue)"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda_check_test.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("cudaErrorInvalidValue"), std::string::npos) << message;
    EXPECT_NE(message.find("on device"), std::string::npos) << message;
  }
}

TEST(CudaCheck, SuccessDoesNotThrow) { EXPECT_NO_THROW(SPARSERING_CUDA_CHECK(fail_with(cudaSuccess))); }

TEST(CudaCheck, EvaluatesTheExpressionOnce) {
  int calls = 0;
  auto counted = [&calls] {
    ++calls;
    return cudaSuccess;
  };
  SPARSERING_CUDA_CHECK(counted());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace sparsering
