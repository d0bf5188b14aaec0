// Which op captured each node of a CUDA graph (docs/profiling.md, "The graphed step, node by node:
// `loupe profile MODEL --graph on`"): a replayed graph runs without its ops on the host, so its
// kernels' activity records carry no op's correlation id, only the graph node that ran them
// (ActivityRecord::graph_node). While a map lives, CUPTI's resource callbacks report every node a
// stream capture creates, inside the call that launched it, so the op scope open on that thread
// then (core/op_record.h, recording on) is the node's op; and the nodes instantiation clones from
// them, whose ids the replays' records carry. The interface is plain C++; graph_nodes_cuda.cu
// implements it with CUPTI's callback API.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/op_record.h"
#include "instrument/busy_tracker.h"

namespace loupe::instrument {

class GraphNodeMap {
 public:
  virtual ~GraphNodeMap() = default;
  // The op record id (OpRecord::id) whose scope was open when the node with CUPTI id `node` (an
  // instantiated graph's, as activity records carry it, or a captured one's) was created; 0: none
  // (created outside any op scope, or not seen).
  virtual uint64_t op_of(uint64_t node) = 0;
};

// nullptr with *why set without CUDA, or when CUPTI's callbacks cannot be subscribed (one
// subscriber per process: another tool holds it).
std::unique_ptr<GraphNodeMap> make_graph_node_map(std::string* why);
using GraphNodeMapFactory = std::unique_ptr<GraphNodeMap> (*)(std::string* why);
void register_graph_node_map_factory(GraphNodeMapFactory f);

// The window's graph-launched records given their op's id through `map` (records with no node or
// whose node has no op keep external 0, "unattributed"), and how many times the graph ran in it:
// the most records any one node has (every replay runs each node once).
int64_t attribute_graph_nodes(std::vector<ActivityRecord>& activity, GraphNodeMap& map);

// A graphed window's op records, from every record since recording began (`ops`: the eager steps
// before the capture, the capture's, the window's host-side ones): the window's own (steps first..
// last), and `replays` times each record of the capture whose nodes ran in the window (the
// attributed `activity`), so that calls, FLOPs and bytes per step count every replay.
std::vector<OpRecord> graph_window_ops(std::vector<OpRecord> ops, const std::vector<ActivityRecord>& activity,
                                       int64_t first, int64_t last, int64_t replays);

}  // namespace loupe::instrument
