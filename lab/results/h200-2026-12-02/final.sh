#!/usr/bin/env bash
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
T0=$SECONDS
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
echo "built at $((SECONDS-T0)) s"
build-gpu/tests/test_ops_cuda --gtest_filter='CudaFusion.*:CudaCopy.*' > "$O/ops-cuda.log" 2>&1; tail -3 "$O/ops-cuda.log"
build-gpu/tests/test_autograd --gtest_filter='*FreshGrads*' 2>&1 | tail -2
build-gpu/tests/test_copy --gtest_filter='CudaCopy.*' 2>&1 | tail -2
echo "tests at $((SECONDS-T0)) s"
MODELS="mnist_cnn cifar10_cnn" PRECISIONS=fp16,bf16 dev/device_check_compiled.sh
echo "done at $((SECONDS-T0)) s"
