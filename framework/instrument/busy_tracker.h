// GPU busy time from CUPTI activity records (docs/design.md principle 5): CUPTI timestamps every kernel,
// memcpy and memset as the GPU ran it; the busy time of a window is the length of the union of
// those intervals inside it. The interface is plain C++; busy_tracker_cuda.cu implements it with
// CUPTI's activity API and registers itself when loupe is built with CUDA.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loupe::instrument {

struct ActivityRecord {
  std::string name;         // kernel name (demangled), "memcpy HtoD", ..., "memset"
  uint64_t begin_ns, end_ns;  // on the now_ns() clock
  int kind;                 // 0 kernel, 1 memcpy, 2 memset
  uint32_t stream;          // CUPTI's stream id
  uint64_t external = 0;    // the op record (core/op_record.h) that launched it; 0: none, or not correlating
  uint32_t correlation = 0;  // CUPTI's id of the API call that launched it: increases in launch order
  uint64_t graph_node = 0;   // CUPTI's id of the graph node that ran it; 0: not launched by a graph
};

// CUPTI's activity callbacks are process-wide, so at most one tracker lives at a time.
class BusyTracker {
 public:
  virtual ~BusyTracker() = default;
  virtual void start() = 0;       // enable the activity kinds; throws loupe::Error on failure
  virtual void stop() = 0;        // flush (forced) and disable; records stay queryable
  // Hands CUPTI's completed buffers over: records so far become visible. Records of work still
  // running are not complete; wait for the window's work (e.g. an event) before flushing.
  virtual void flush() = 0;
  virtual uint64_t now_ns() = 0;  // cuptiGetTimestamp, the records' clock
  // Length of the union of the activity intervals clipped to [t0, t1) (ns); call flush() first.
  virtual uint64_t busy_ns(uint64_t t0, uint64_t t1) = 0;
  // Records that overlap [t0, t1), unclipped, in order of begin (for the Chrome trace).
  virtual std::vector<ActivityRecord> records(uint64_t t0, uint64_t t1) = 0;
  virtual void discard_before(uint64_t t) = 0;  // bound memory: forget records ending before t
  // Records CUPTI dropped for lack of buffer space since start(): busy time is a lower bound if > 0.
  virtual uint64_t dropped_records() = 0;
  // Ties the work launched inside op scopes (core/op_record.h) to them: while on, each record
  // launched from an op scope carries the scope's id (ActivityRecord::external). It records every
  // CUDA API call too, so only `loupe profile` turns it on, for its window. Throws on failure.
  virtual void correlate(bool on) = 0;
};

// nullptr with *why set when CUPTI is not built in ("this loupe was built without CUDA") or
// cannot start here (no driver or device, another profiler holds CUPTI, a tracker already lives).
std::unique_ptr<BusyTracker> make_busy_tracker(std::string* why);

// Used by the CUDA implementation to register its factory at load time.
using BusyTrackerFactory = std::unique_ptr<BusyTracker> (*)(std::string* why);
void register_busy_tracker_factory(BusyTrackerFactory f);

}  // namespace loupe::instrument
