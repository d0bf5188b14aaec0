// Communicator with NCCL (built where CMake finds it: LOUPE_WITH_NCCL). Each rank's GPU is its
// LOCAL_RANK, made current before any other CUDA work; the unique id crosses the rendezvous
// (parallel/launch.h), everything else is NCCL's. Collectives run on loupe's compute stream.
#if LOUPE_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda_util.cuh"
#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/launch.h"

namespace loupe::parallel {
namespace {

#define LOUPE_NCCL_CHECK(call)                                                                         \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) LOUPE_FAIL(#call, " failed: ", ncclGetErrorString(r_), " (", int(r_), ")"); \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    default: LOUPE_FAIL("NCCL collectives take float32, float64, float16, bfloat16 or int32, got ", dtype_name(t));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int world, ncclComm_t c, std::unique_ptr<Lifelines> lifelines)
      : rank_(rank), world_(world), comm_(c), lifelines_(std::move(lifelines)) {
    // The communication stream at the highest priority (as PyTorch's NCCL streams): a bucket's
    // kernels start ahead of the backward kernels queued beside them.
    int lo = 0, hi = 0;
    LOUPE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    LOUPE_CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, hi));
    LOUPE_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    LOUPE_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  ~NcclCommunicator() override {
    if (!aborted_) ncclCommDestroy(comm_);
    cudaEventDestroy(ready_);
    cudaEventDestroy(done_);
    cudaStreamDestroy(side_);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void all_reduce(const Tensor& t, ReduceOp op) override { reduce_on(t, op, cuda::stream()); }
  void broadcast(const Tensor& t, int root) override {
    LOUPE_CHECK(t.is_cuda() && t.is_contiguous(), "broadcast needs a contiguous CUDA tensor");
    LOUPE_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t.dtype()), root, comm_,
                                   cuda::stream()));
  }
  void all_gather(const Tensor& in, const Tensor& out) override {
    LOUPE_CHECK(in.is_cuda() && out.is_cuda() && in.is_contiguous() && out.is_contiguous() &&
                    in.dtype() == out.dtype() && out.numel() == in.numel() * world_,
                "all_gather needs contiguous CUDA tensors of one dtype, the output world times the input");
    LOUPE_NCCL_CHECK(ncclAllGather(in.data_ptr(), out.data_ptr(), size_t(in.numel()), nccl_type(in.dtype()), comm_,
                                   cuda::stream()));
  }
  void all_reduce_async(const Tensor& t, ReduceOp op) override {
    // The gradients are written on the compute stream: the side stream waits for them there.
    LOUPE_CUDA_CHECK(cudaEventRecord(ready_, cuda::stream()));
    LOUPE_CUDA_CHECK(cudaStreamWaitEvent(side_, ready_, 0));
    reduce_on(t, op, side_);
    pending_ = true;
  }
  void join() override {
    if (!pending_) return;  // nothing on the side stream (and in a capture, nothing to join)
    LOUPE_CUDA_CHECK(cudaEventRecord(done_, side_));
    LOUPE_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(), done_, 0));
    pending_ = false;
  }
  std::string async_error() override {
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) return "ncclCommGetAsyncError failed";
    return r == ncclSuccess || r == ncclInProgress ? "" : ncclGetErrorString(r);
  }
  std::string lost_peer() override { return lifelines_->lost(); }
  void goodbye() override { lifelines_->goodbye(); }
  void abort() override {
    if (aborted_) return;
    aborted_ = true;
    ncclCommAbort(comm_);
  }

 private:
  void reduce_on(const Tensor& t, ReduceOp op, cudaStream_t s) {
    LOUPE_CHECK(t.is_cuda() && t.is_contiguous(), "all_reduce needs a contiguous CUDA tensor");
    LOUPE_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t.dtype()),
                                   op == ReduceOp::Sum ? ncclSum : ncclAvg, comm_, s));
  }
  int rank_, world_;
  ncclComm_t comm_;
  std::unique_ptr<Lifelines> lifelines_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  bool pending_ = false, aborted_ = false;
};

std::unique_ptr<Communicator> join_nccl(std::string* why) {
  try {
    const RankEnv env = rank_env();
    int devices = 0;
    LOUPE_CHECK(cudaGetDeviceCount(&devices) == cudaSuccess, "rank ", env.rank, " sees no GPU");
    // An srun task bound to its own GPU (--gpus-per-task) sees that one only, whatever its local id.
    const int device = env.launcher == "srun" && devices == 1 ? 0 : env.local_rank;
    LOUPE_CHECK(device < devices, "rank ", env.rank, " is local rank ", env.local_rank, " but this host shows ",
                devices, " GPU(s)");
    LOUPE_CHECK(cudaSetDevice(device) == cudaSuccess, "cannot make GPU ", device, " current");
    ncclUniqueId id{};
    if (env.rank == 0) LOUPE_NCCL_CHECK(ncclGetUniqueId(&id));
    RendezvousOptions ro;
    ro.addr = env.master_addr;
    ro.port = env.rdzv_port;
    ro.rank = env.rank;
    ro.world = env.world;
    auto lifelines = std::make_unique<Lifelines>();
    std::string blob = rendezvous(ro, std::string(reinterpret_cast<const char*>(&id), sizeof id), lifelines.get());
    LOUPE_CHECK(blob.size() == sizeof id, "rendezvous: an id of ", blob.size(), " bytes, NCCL's has ", sizeof id);
    std::memcpy(&id, blob.data(), sizeof id);
    // NVLink multicast (NVLS) off unless asked for, whoever started this rank (torchrun too): on
    // shared hosts it can take GPUs out of service.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclComm_t comm = nullptr;
    LOUPE_NCCL_CHECK(ncclCommInitRank(&comm, env.world, id, env.rank));
    return std::make_unique<NcclCommunicator>(env.rank, env.world, comm, std::move(lifelines));
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

struct Registrar {
  Registrar() { register_communicator_factory(join_nccl); }
} g_registrar;

}  // namespace
}  // namespace loupe::parallel
#endif  // LOUPE_WITH_NCCL
