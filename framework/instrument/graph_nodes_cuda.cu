// GraphNodeMap with CUPTI's callback API: the resource domain's GRAPHNODE_CREATED (stream capture
// creates each node inside the launching call, on the capturing thread: the op scope open there is
// the node's op) and GRAPHNODE_CLONED (instantiation copies every node; the replays' records carry
// the copies' ids). One subscriber per process (cuptiSubscribe), held while the map lives.
#include <cupti.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/op_record.h"
#include "instrument/cupti_result.cuh"
#include "instrument/graph_nodes.h"

namespace loupe::instrument {
namespace {

struct Nodes {
  std::mutex mu;
  std::unordered_map<uint64_t, uint64_t> op;      // a created node's id -> its op record's id
  std::unordered_map<uint64_t, uint64_t> origin;  // a clone's id -> the id of the node it copies
};

uint64_t node_id(CUgraphNode n) {
  uint64_t id = 0;
  return n && cuptiGetGraphNodeId(n, &id) == CUPTI_SUCCESS ? id : 0;
}

void CUPTIAPI on_resource(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !cbdata) return;
  const auto* rd = static_cast<const CUpti_ResourceData*>(cbdata);
  const auto* g = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  if (!g) return;
  auto* n = static_cast<Nodes*>(user);
  const uint64_t id = node_id(g->node), original = node_id(g->originalNode);
  if (!id) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    const uint64_t op = op_record_current_id();  // this thread's: the one capturing
    std::lock_guard<std::mutex> lock(n->mu);
    if (op) n->op[id] = op;
    if (original && original != id) n->origin[id] = original;
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && original && original != id) {
    std::lock_guard<std::mutex> lock(n->mu);
    n->origin[id] = original;
  }
}

class CuptiNodeMap final : public GraphNodeMap {
 public:
  CuptiNodeMap(CUpti_SubscriberHandle sub, std::unique_ptr<Nodes> nodes) : sub_(sub), nodes_(std::move(nodes)) {}
  ~CuptiNodeMap() override { cuptiUnsubscribe(sub_); }  // no callback runs after it returns
  uint64_t op_of(uint64_t node) override {
    std::lock_guard<std::mutex> lock(nodes_->mu);
    for (int hops = 0; hops < 8 && node; ++hops) {  // a clone's clone: follow it back to the capture
      if (auto o = nodes_->op.find(node); o != nodes_->op.end()) return o->second;
      auto c = nodes_->origin.find(node);
      node = c == nodes_->origin.end() ? 0 : c->second;
    }
    return 0;
  }

 private:
  CUpti_SubscriberHandle sub_;
  std::unique_ptr<Nodes> nodes_;
};

std::unique_ptr<GraphNodeMap> make_cupti_node_map(std::string* why) {
  auto nodes = std::make_unique<Nodes>();
  CUpti_SubscriberHandle sub = nullptr;
  if (CUptiResult r = cuptiSubscribe(&sub, on_resource, nodes.get()); r != CUPTI_SUCCESS) {
    *why = cupti_failed(r, "cuptiSubscribe") + " (CUPTI takes one subscriber per process: is another profiler attached?)";
    return nullptr;
  }
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED}) {
    if (CUptiResult r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, id); r != CUPTI_SUCCESS) {
      *why = cupti_failed(r, "cuptiEnableCallback(GRAPHNODE)");
      cuptiUnsubscribe(sub);
      return nullptr;
    }
  }
  return std::make_unique<CuptiNodeMap>(sub, std::move(nodes));
}

struct Registrar {
  Registrar() { register_graph_node_map_factory(make_cupti_node_map); }
} g_registrar;

}  // namespace
}  // namespace loupe::instrument
