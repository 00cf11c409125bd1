// Stream capture and CUDA graphs.
//
// While a stream captures, everything submitted to it (kernels, host
// functions, async copies and memsets) is appended to the capture's graph as
// a node instead of running (see submit() in streams.cpp). A graph is a
// linear list of nodes; cuGraphLaunch queues the executable graph as one item
// that runs its nodes in order (each kernel still writes its own trace line).
// Another stream joins a capture by waiting on an event recorded in it.
#include <cstring>

#include "fake_cuda_internal.h"

using namespace fakecuda;

namespace {

CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, CUgraph into, bool ptsz) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  // The legacy stream cannot be captured.
  if (h == CU_STREAM_LEGACY || (h == nullptr && !ptsz)) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  if (st->capture_graph) return CUDA_ERROR_ILLEGAL_STATE;
  std::shared_ptr<CUgraph_st> graph;
  if (into != nullptr) {
    auto it = s.graphs.find(into);
    if (it == s.graphs.end()) return CUDA_ERROR_INVALID_VALUE;
    graph = it->second;
  } else {
    graph = std::make_shared<CUgraph_st>();
    s.graphs[graph.get()] = graph;
  }
  st->capture_graph = graph;
  st->capture_id = s.next_id++;
  st->capture_origin = true;
  st->capture_invalidated = false;
  st->capture_mode = mode;
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream h, CUgraph* phGraph) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  if (!st->capture_graph) return CUDA_ERROR_ILLEGAL_STATE;
  if (!st->capture_origin) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  std::shared_ptr<CUgraph_st> graph = st->capture_graph;
  const unsigned long long id = st->capture_id;
  const bool invalidated = st->capture_invalidated;
  // End the capture on every stream that joined it.
  auto end_on = [id](CUstream_st* x) {
    if (x->capture_graph && x->capture_id == id) {
      x->capture_graph.reset();
      x->capture_id = 0;
      x->capture_origin = false;
      x->capture_invalidated = false;
    }
  };
  for (auto& kv : s.streams) end_on(kv.second.get());
  for (CUctx_st* c : s.contexts) {
    if (c->default_stream) end_on(c->default_stream.get());
  }
  for (auto& kv : s.events) {
    if (kv.second->capture_id == id) {
      kv.second->capture_graph.reset();
      kv.second->capture_id = 0;
    }
  }
  if (invalidated) {
    *phGraph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *phGraph = graph.get();
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream h, CUstreamCaptureStatus* status) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  if (!st->capture_graph) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    *status = st->capture_invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  return CUDA_SUCCESS;
}

CUresult capture_info(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                      CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
                      size_t* num_deps) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  if (!st->capture_graph) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    *status = st->capture_invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id != nullptr) *id = st->capture_id;
    if (graph != nullptr) *graph = st->capture_graph.get();
  }
  // Dependencies are not tracked: the graph is a linear list.
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (num_deps != nullptr) *num_deps = 0;
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* phGraphExec, CUgraph hGraph) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (phGraphExec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.graphs.find(hGraph);
  if (it == s.graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  auto exec = std::make_shared<CUgraphExec_st>();
  exec->nodes = it->second->nodes;  // nodes are immutable once recorded
  s.execs[exec.get()] = exec;
  *phGraphExec = exec.get();
  return CUDA_SUCCESS;
}

CUresult graph_launch(CUgraphExec hGraphExec, CUstream h) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUstream_st> st;
  std::shared_ptr<CUgraphExec_st> exec;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto it = S().execs.find(hGraphExec);
    if (it == S().execs.end()) return CUDA_ERROR_INVALID_VALUE;
    exec = it->second;
    rc = stream_locked(h, &st);
    if (rc != CUDA_SUCCESS) return rc;
  }
  // One queue item for the whole graph: it runs as a unit.
  Work w;
  w.kind = Work::kCall;
  w.call = [nodes = exec->nodes] {
    for (const auto& n : nodes) execute(n->work);
  };
  return submit(st, std::move(w));
}

CUresult graph_upload(CUgraphExec hGraphExec, CUstream h) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  if (S().execs.count(hGraphExec) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUstream_st> st;
  return stream_locked(h, &st);
}

}  // namespace

extern "C" {

// ===========================================================================
// Capture
// ===========================================================================
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  return begin_capture(hStream, mode, nullptr, false);
}
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  return begin_capture(hStream, mode, nullptr, true);
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream) {
  return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, nullptr, false);
}
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream) {
  return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, nullptr, true);
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode* dependencies,
                                             const CUgraphEdgeData* dependencyData,
                                             size_t numDependencies, CUstreamCaptureMode mode) {
  (void)dependencyData;
  if (numDependencies > 0 && dependencies == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(hStream, mode, hGraph, false);
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  const CUgraphEdgeData* dependencyData,
                                                  size_t numDependencies,
                                                  CUstreamCaptureMode mode) {
  (void)dependencyData;
  if (numDependencies > 0 && dependencies == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(hStream, mode, hGraph, true);
}
CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  return end_capture(hStream, phGraph);
}
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  return end_capture(hStream, phGraph);
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  return is_capturing(hStream, captureStatus);
}
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream,
                                          CUstreamCaptureStatus* captureStatus) {
  return is_capturing(hStream, captureStatus);
}
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                        cuuint64_t* id_out) {
  return capture_info(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr, nullptr);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                             CUstreamCaptureStatus* captureStatus_out,
                                             cuuint64_t* id_out) {
  return capture_info(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr, nullptr);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream,
                                           CUstreamCaptureStatus* captureStatus_out,
                                           cuuint64_t* id_out, CUgraph* graph_out,
                                           const CUgraphNode** dependencies_out,
                                           size_t* numDependencies_out) {
  return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr,
                      numDependencies_out);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus_out,
                                                cuuint64_t* id_out, CUgraph* graph_out,
                                                const CUgraphNode** dependencies_out,
                                                size_t* numDependencies_out) {
  return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr,
                      numDependencies_out);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream,
                                           CUstreamCaptureStatus* captureStatus_out,
                                           cuuint64_t* id_out, CUgraph* graph_out,
                                           const CUgraphNode** dependencies_out,
                                           const CUgraphEdgeData** edgeData_out,
                                           size_t* numDependencies_out) {
  return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                      edgeData_out, numDependencies_out);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus_out,
                                                cuuint64_t* id_out, CUgraph* graph_out,
                                                const CUgraphNode** dependencies_out,
                                                const CUgraphEdgeData** edgeData_out,
                                                size_t* numDependencies_out) {
  return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                      edgeData_out, numDependencies_out);
}

// ===========================================================================
// Graphs
// ===========================================================================
CUresult CUDAAPI cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  auto graph = std::make_shared<CUgraph_st>();
  S().graphs[graph.get()] = graph;
  *phGraph = graph.get();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  if (S().graphs.erase(hGraph) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (numNodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  auto it = S().graphs.find(hGraph);
  if (it == S().graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  const auto& list = it->second->nodes;
  if (nodes != nullptr) {
    for (size_t i = 0; i < *numNodes; ++i) {
      nodes[i] = i < list.size() ? list[i].get() : nullptr;
    }
  }
  *numNodes = list.size();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  (void)flags;
  return instantiate(phGraphExec, hGraph);
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                       CUgraphNode* phErrorNode, char* logBuffer,
                                       size_t bufferSize) {
  if (phErrorNode != nullptr) *phErrorNode = nullptr;
  if (logBuffer != nullptr && bufferSize > 0) logBuffer[0] = '\0';
  return instantiate(phGraphExec, hGraph);
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph,
                                    CUgraphNode* phErrorNode, char* logBuffer,
                                    size_t bufferSize) {
  return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  if (S().execs.erase(hGraphExec) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_launch(hGraphExec, hStream);
}
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_launch(hGraphExec, hStream);
}
CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_upload(hGraphExec, hStream);
}
CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_upload(hGraphExec, hStream);
}

}  // extern "C"
