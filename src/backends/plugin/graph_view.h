// A read-only C view (tsrp_graph, include/tessera/backend_plugin.h) of a
// Graph, for backend plug-ins. The view owns every struct and array it hands
// out and points into the graph for names, dims and constant data, so the
// graph must outlive it and stay unchanged. Attribute graphs (a composite's
// body, If/Loop branches) get views of their own, owned by the same object.
#pragma once
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "tessera/backend_plugin.h"

namespace tessera {

/// tsrp_dtype number (ONNX's TensorProto code) of a dtype.
tsrp_dtype plugin_dtype(DType dtype);
/// DLPack's type of a dtype (bool as DLPack's code 6, 8 bits).
DLDataType dlpack_dtype(DType dtype);

class GraphView {
 public:
  explicit GraphView(const Graph& graph);
  GraphView(const GraphView&) = delete;
  GraphView& operator=(const GraphView&) = delete;
  ~GraphView();
  const tsrp_graph* get() const;

 private:
  struct Storage;
  std::unique_ptr<Storage> storage_;
};

}  // namespace tessera
