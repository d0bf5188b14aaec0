#include "instrument/graph_nodes.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "instrument/cuda_factory.h"

namespace loupe::instrument {

void register_graph_node_map_factory(GraphNodeMapFactory f) { CudaFactory<GraphNodeMap>::set(f); }

std::unique_ptr<GraphNodeMap> make_graph_node_map(std::string* why) {
  return CudaFactory<GraphNodeMap>::make(why,
                                         "this loupe was built without CUDA, so there are no CUDA graphs to profile",
                                         "CUPTI's callbacks could not be subscribed (no reason given)");
}

int64_t attribute_graph_nodes(std::vector<ActivityRecord>& activity, GraphNodeMap& map) {
  std::unordered_map<uint64_t, int64_t> runs;
  for (ActivityRecord& a : activity) {
    if (!a.graph_node) continue;
    ++runs[a.graph_node];
    if (!a.external) a.external = map.op_of(a.graph_node);
  }
  int64_t most = 0;
  for (const auto& [node, n] : runs) most = std::max(most, n);
  return most;
}

std::vector<OpRecord> graph_window_ops(std::vector<OpRecord> ops, const std::vector<ActivityRecord>& activity,
                                       int64_t first, int64_t last, int64_t replays) {
  std::unordered_set<uint64_t> captured;
  for (const ActivityRecord& a : activity)
    if (a.graph_node && a.external) captured.insert(a.external);
  std::vector<OpRecord> out;
  for (OpRecord& o : ops) {
    if (captured.count(o.id)) {
      for (int64_t i = 0; i < replays; ++i) out.push_back(o);
    } else if (o.step >= first && o.step <= last) {
      out.push_back(std::move(o));
    }
  }
  return out;
}

}  // namespace loupe::instrument
