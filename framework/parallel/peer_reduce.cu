// The copy-engine all-reduce (parallel/peer_reduce.h). Per bucket, on rank r's communication stream
// (two, by the bucket's parity, so that a small bucket never waits behind a large one):
//   1. wait until every peer has consumed r's previous copy of this bucket (counter `consumed`);
//   2. copy the bucket into each peer's inbox: a copy engine (cudaMemcpyAsync), or for a bucket of
//      1 MiB or less the SMs (loupe_peer_put), whose start costs less;
//   3. add 1 to each peer's `arrived` counter (after a system fence), then wait until r's own
//      `arrived` shows every peer's copy for this step;
//   4. average the ranks' values in rank order into the gradient arena (loupe_peer_sum);
//   5. add 1 to each peer's `consumed` counter: r's inbox may be written again.
// The counters only grow, and the number each wait needs is kept on the device (`sent`, `taken`),
// so the same kernels replay in a CUDA graph step after step. A wait also ends when the
// communicator is aborted (its mapped abort word), so a lost peer never hangs a rank.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/cuda_util.cuh"
#include "core/error.h"
#include "parallel/peer_reduce.h"

namespace loupe::parallel {
namespace {

constexpr int kMaxRanks = 8;

struct Ptrs {
  unsigned* p[kMaxRanks];
  int n;
};
struct Sources {
  const float* s[kMaxRanks];
  int n;
};

__device__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// One thread: waits until *flag reaches per * (*count + ahead), then advances *count.
__global__ void loupe_peer_wait(const unsigned* flag, unsigned* count, unsigned per, unsigned ahead,
                                const volatile int* abort) {
  const unsigned need = per * (*count + ahead);
  for (unsigned i = 1; int(load_acquire(flag) - need) < 0; ++i) {
    if ((i & 255) == 0 && abort && *abort) break;
    __nanosleep(128);
  }
  *count += 1;
}

// One thread: adds 1 to each peer's counter `slot`, after this GPU's earlier writes (the copies
// before it in stream order) are visible to the system.
__global__ void loupe_peer_signal(Ptrs flags, int slot) {
  __threadfence_system();
  for (int k = 0; k < flags.n; ++k) atomicAdd_system(flags.p[k] + slot, 1u);
}

// A small bucket, copied by the SMs instead (a copy engine's start-up costs more than the copy:
// lab/benchmarks.md, "imdb_bilstm on two GPUs: the copy engines, and the epoch's end"): dst[k][i] =
// src[i] for each peer k, then the last block to finish adds 1 to each peer's counter `slot`, so a
// bucket counts one arrival per step either way.
struct Dests {
  float* d[kMaxRanks];
  int n;
};
__global__ void loupe_peer_put(Dests dst, const float* src, int64_t n, Ptrs arrived, unsigned* blocks_done,
                               int slot) {
  LOUPE_KERNEL_LOOP(i, n) {
    const float v = src[i];
    for (int k = 0; k < dst.n; ++k) dst.d[k][i] = v;
  }
  __threadfence_system();  // each thread's stores, before its block is counted
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (atomicAdd(blocks_done + slot, 1u) != gridDim.x - 1) return;
  blocks_done[slot] = 0;
  __threadfence_system();
  for (int k = 0; k < arrived.n; ++k) atomicAdd_system(arrived.p[k] + slot, 1u);
}

// out[i] = (src0[i] + src1[i] + ...) / n, in rank order on every rank. The inboxes were written by
// the peers' copy engines: read through L2 (__ldcg), never a stale L1 line.
__global__ void loupe_peer_sum(Sources src, float* out, int64_t n4, float div) {
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 a = __ldcg(reinterpret_cast<const float4*>(src.s[0]) + i);
    for (int k = 1; k < src.n; ++k) {
      const float4 b = __ldcg(reinterpret_cast<const float4*>(src.s[k]) + i);
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
    }
    reinterpret_cast<float4*>(out)[i] = make_float4(a.x / div, a.y / div, a.z / div, a.w / div);
  }
}
__global__ void loupe_peer_sum1(Sources src, float* out, int64_t n, float div) {
  LOUPE_KERNEL_LOOP(i, n) {
    float a = __ldcg(src.s[0] + i);
    for (int k = 1; k < src.n; ++k) a += __ldcg(src.s[k] + i);
    out[i] = a / div;
  }
}

// What each rank tells the others once: its host, its GPU, and its buffer.
struct Card {
  char host[96];
  char bus[32];
  cudaIpcMemHandle_t handle;
  int32_t ok;  // this rank can take part
};
static_assert(sizeof(Card) % 4 == 0, "Card travels as int32");

std::string host_key() {
  char name[64] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;  // containers of one machine share it; two machines named alike do not
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(name) + "/" + boot;
}

std::vector<Card> all_gather_cards(const Card& mine, Communicator& comm) {
  std::vector<int32_t> words(sizeof(Card) / 4);
  std::memcpy(words.data(), &mine, sizeof(Card));
  Tensor in = from_vector(words, Shape{int64_t(words.size())}, kCUDA);
  Tensor out = empty(Shape{int64_t(words.size()) * comm.world()}, DType::i32, kCUDA);
  comm.all_gather(in, out);
  const std::vector<int32_t> all = out.to_vector<int32_t>();
  std::vector<Card> cards(size_t(comm.world()));
  std::memcpy(cards.data(), all.data(), cards.size() * sizeof(Card));
  return cards;
}

bool all_agree(bool mine, Communicator& comm) {
  Card c{};
  c.ok = mine;
  for (const Card& k : all_gather_cards(c, comm))
    if (!k.ok) return false;
  return true;
}

class CopyEngineReduce final : public PeerReduce {
 public:
  CopyEngineReduce(const Tensor& grads, int slots, Communicator& comm) : grads_(grads), comm_(comm), slots_(slots) {
    rank_ = comm.rank();
    world_ = comm.world();
    bucket_bytes_ = (size_t(grads.numel()) * sizeof(float) + 255) / 256 * 256;
    flags_at_ = bucket_bytes_ * size_t(world_ - 1);
    const size_t bytes = flags_at_ + kCounters * size_t(slots) * sizeof(unsigned);
    // A failure here is voted on in connect(), never thrown: the other ranks are about to wait for
    // this one in a collective.
    if (cudaMalloc(&mine_, bytes) != cudaSuccess || cudaMemset(mine_, 0, bytes) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {  // zeroed before any peer can see the buffer
      why_ = std::string("cannot allocate its inbox: ") + cudaGetErrorString(cudaGetLastError());
      cudaFree(mine_);
      mine_ = nullptr;
    }
    int lo = 0, hi = 0;
    LOUPE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    for (Side& side : sides_) {
      LOUPE_CUDA_CHECK(cudaStreamCreateWithPriority(&side.stream, cudaStreamNonBlocking, hi));
      LOUPE_CUDA_CHECK(cudaEventCreateWithFlags(&side.ready, cudaEventDisableTiming));
      LOUPE_CUDA_CHECK(cudaEventCreateWithFlags(&side.done, cudaEventDisableTiming));
    }
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
    abort_ = comm.abort_word();
  }
  ~CopyEngineReduce() override {
    for (Side& side : sides_) cudaStreamSynchronize(side.stream);
    for (void* p : peers_)
      if (p) cudaIpcCloseMemHandle(p);
    if (mine_) cudaFree(mine_);
    for (Side& side : sides_) {
      cudaEventDestroy(side.ready);
      cudaEventDestroy(side.done);
      cudaStreamDestroy(side.stream);
    }
  }

  // Collective: whether every rank is on this host, sees every other rank's GPU and reaches it,
  // and opened every other rank's buffer. *why says what failed first on this rank.
  bool connect(std::string* why) {
    Card mine{};
    std::snprintf(mine.host, sizeof mine.host, "%s", host_key().c_str());
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.bus, sizeof mine.bus, dev));
    if (mine_ && cudaIpcGetMemHandle(&mine.handle, mine_) != cudaSuccess)
      why_ = std::string("cannot share its inbox: ") + cudaGetErrorString(cudaGetLastError());
    mine.ok = why_.empty();
    const std::vector<Card> cards = all_gather_cards(mine, comm_);
    const std::string refusal = mine.ok ? check_peers(cards, mine, dev) : why_;
    if (!all_agree(refusal.empty(), comm_)) {
      *why = refusal.empty() ? "another rank cannot reach its peers directly" : refusal;
      return false;
    }
    bool ok = true;
    peers_.assign(size_t(world_), nullptr);
    for (int k = 0; k < world_ && ok; ++k) {
      if (k == rank_) continue;
      cudaIpcMemHandle_t h = cards[size_t(k)].handle;
      if (cudaIpcOpenMemHandle(&peers_[size_t(k)], h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        *why = "cannot open rank " + std::to_string(k) + "'s buffer: " + cudaGetErrorString(cudaGetLastError());
        peers_[size_t(k)] = nullptr;
        ok = false;
      }
    }
    if (!all_agree(ok, comm_)) {
      if (ok) *why = "another rank could not open its peers' buffers";
      return false;
    }
    return true;
  }

  // Why this rank cannot reach some other rank's GPU ("" when it reaches all).
  std::string check_peers(const std::vector<Card>& cards, const Card& mine, int dev) const {
    for (int k = 0; k < world_; ++k) {
      if (k == rank_) continue;
      const Card& c = cards[size_t(k)];
      const std::string who = "rank " + std::to_string(k);
      int peer = -1, can = 0;
      if (!c.ok) return who + " cannot take part";
      if (std::strncmp(c.host, mine.host, sizeof mine.host) != 0) return who + " is on another host";
      if (cudaDeviceGetByPCIBusId(&peer, c.bus) != cudaSuccess) {
        cudaGetLastError();
        return who + "'s GPU " + c.bus + " is not visible to this rank";
      }
      if (cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess || !can) {
        cudaGetLastError();
        return "GPU " + std::to_string(dev) + " cannot reach GPU " + std::to_string(peer) + " directly (no P2P)";
      }
    }
    return "";
  }

  void reduce_async(int64_t offset, int64_t numel, int slot) override {
    if (numel == 0) return;  // every rank has the same buckets: all skip it
    LOUPE_CHECK(slot >= 0 && slot < slots_, "peer all-reduce: bucket ", slot, " of ", slots_);
    LOUPE_CHECK(offset >= 0 && offset + numel <= grads_.numel(), "peer all-reduce: outside the arena");
    // Two streams, by the bucket's parity: a bucket never waits for the one before it (the copies,
    // unlike NCCL's collectives, need no common order), and a bucket's steps stay in order.
    Side& side = sides_[size_t(slot % kSides)];
    LOUPE_CUDA_CHECK(cudaEventRecord(side.ready, cuda::stream()));
    LOUPE_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.ready, 0));
    const cudaStream_t st = side.stream;
    const unsigned per = unsigned(world_ - 1);
    float* g = static_cast<float*>(grads_.data_ptr()) + offset;
    const size_t at = size_t(offset) * sizeof(float), bytes = size_t(numel) * sizeof(float);
    loupe_peer_wait<<<1, 1, 0, st>>>(flag(mine_, kConsumed, slot), flag(mine_, kSent, slot), per, 0, abort_);
    LOUPE_CUDA_LAUNCH_CHECK();
    Ptrs arrived{}, consumed{};
    Sources src{};
    Dests dst{};
    for (int k = 0; k < world_; ++k) {
      if (k == rank_) {
        src.s[src.n++] = g;
        continue;
      }
      char* inbox = static_cast<char*>(peers_[size_t(k)]) + bucket_bytes_ * size_t(rank_ < k ? rank_ : rank_ - 1);
      dst.d[dst.n++] = reinterpret_cast<float*>(inbox + at);
      arrived.p[arrived.n++] = flag(peers_[size_t(k)], kArrived, 0);
      consumed.p[consumed.n++] = flag(peers_[size_t(k)], kConsumed, 0);
      src.s[src.n++] = reinterpret_cast<const float*>(static_cast<char*>(mine_) +
                                                      bucket_bytes_ * size_t(k < rank_ ? k : k - 1) + at);
    }
    if (bytes <= kPutBytes) {
      const int blocks = int(std::min<int64_t>(32, (numel + 4095) / 4096));
      loupe_peer_put<<<blocks, 256, 0, st>>>(dst, g, numel, arrived, flag(mine_, kBlocks, 0), slot);
    } else {
      for (int k = 0; k < dst.n; ++k)
        LOUPE_CUDA_CHECK(cudaMemcpyAsync(dst.d[k], g, bytes, cudaMemcpyDeviceToDevice, st));
      loupe_peer_signal<<<1, 1, 0, st>>>(arrived, slot);
    }
    LOUPE_CUDA_LAUNCH_CHECK();
    loupe_peer_wait<<<1, 1, 0, st>>>(flag(mine_, kArrived, slot), flag(mine_, kTaken, slot), per, 1, abort_);
    LOUPE_CUDA_LAUNCH_CHECK();
    sum(src, g, numel, st);
    loupe_peer_signal<<<1, 1, 0, st>>>(consumed, slot);
    LOUPE_CUDA_LAUNCH_CHECK();
    side.pending = true;
  }

  void join() override {
    for (Side& side : sides_) {
      if (!side.pending) continue;
      LOUPE_CUDA_CHECK(cudaEventRecord(side.done, side.stream));
      LOUPE_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(), side.done, 0));
      side.pending = false;
    }
  }

  std::string describe() const override {
    return "copy engines (" + std::to_string(world_) + " GPUs of one host, P2P)";
  }

 private:
  enum Counter { kArrived = 0, kConsumed = 1, kSent = 2, kTaken = 3, kBlocks = 4, kCounters = 5 };
  static constexpr int kSides = 2;
  static constexpr size_t kPutBytes = 1 << 20;
  struct Side {
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr, done = nullptr;
    bool pending = false;
  };
  unsigned* flag(void* base, Counter c, int slot) const {
    return reinterpret_cast<unsigned*>(static_cast<char*>(base) + flags_at_) + size_t(c) * size_t(slots_) + slot;
  }
  void sum(const Sources& src, float* out, int64_t n, cudaStream_t st) {
    bool vec = n % 4 == 0;
    for (int k = 0; k < src.n; ++k) vec = vec && reinterpret_cast<uintptr_t>(src.s[k]) % 16 == 0;
    const int64_t items = vec ? n / 4 : n;
    // Two blocks an SM: half as many ran slowly beside backward's GEMMs, and everything after
    // backward waited for them (lab/benchmarks.md, "imdb_bilstm on two GPUs: the copy engines, and
    // the epoch's end").
    const int blocks = int(std::max<int64_t>(1, std::min<int64_t>((items + 255) / 256, 2 * sms_)));
    if (vec) loupe_peer_sum<<<blocks, 256, 0, st>>>(src, out, items, float(world_));
    else loupe_peer_sum1<<<blocks, 256, 0, st>>>(src, out, items, float(world_));
    LOUPE_CUDA_LAUNCH_CHECK();
  }

  Tensor grads_;
  Communicator& comm_;
  int slots_, rank_ = 0, world_ = 1, sms_ = 1;
  size_t bucket_bytes_ = 0, flags_at_ = 0;
  void* mine_ = nullptr;
  std::string why_;  // why this rank cannot take part
  std::vector<void*> peers_;
  const int* abort_ = nullptr;
  Side sides_[kSides];
};

std::unique_ptr<PeerReduce> make_copy_engine_reduce(const Tensor& grads, int slots, Communicator& comm,
                                                    std::string* why) {
  LOUPE_CHECK(grads.is_cuda() && grads.dtype() == DType::f32 && grads.is_contiguous(),
              "the copy-engine all-reduce takes a contiguous float32 CUDA arena");
  if (comm.world() > kMaxRanks) {
    *why = "more than " + std::to_string(kMaxRanks) + " ranks";
    return nullptr;
  }
  auto r = std::make_unique<CopyEngineReduce>(grads, std::max(1, slots), comm);
  if (!r->connect(why)) return nullptr;
  cuda::set_comm_sms(0);  // no SM is held beside backward now: its GEMMs may plan for all
  return r;
}

struct Registrar {
  Registrar() { register_peer_reduce_factory(make_copy_engine_reduce); }
} g_registrar;

}  // namespace
}  // namespace loupe::parallel
