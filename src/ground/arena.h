// The traversal arena: the arrays one traversal fills (the spec under
// construction, the leaves, key paths) and its working stacks, reused across
// calls through a per-thread cache (ScratchArena). Every traversal (flatten,
// unflatten, map, the spec walks) runs on one; a finished flatten's arrays
// become the spec's (NewSpecTakingArena, spec_object.h).
//
//   ScratchArena b;
//   if (!FlattenInto(tree, is_leaf, /*with_spec=*/true, b.get())) return nullptr;
//   PyObject* spec = FinishSpec(b.get());  // the spec takes b->nodes and b->items
#ifndef CPYTREE_SRC_ARENA_H_
#define CPYTREE_SRC_ARENA_H_

#include <type_traits>
#include <vector>

#include "base/common.h"
#include "cpytree/internal/node.h"

namespace cpytree {

using internal::Node;

// A read-only view of a node array and its items (a spec or an arena).
struct SpecView {
  const Node* nodes;
  std::int64_t num_nodes;
  PyObject* const* items;

  const Node& root() const { return nodes[num_nodes - 1]; }
  std::int64_t root_index() const { return num_nodes - 1; }
};

// The traversal arena: the scratch state of one traversal (flatten, map,
// unflatten, the spec walks, deserialization): what it produces (the spec under
// construction, the leaves, key paths) and its working stacks, each shared
// by all recursion levels (a level pushes on top and truncates back to where
// it started). Each array has one meaning in every traversal that uses it.
// Every PyObject* in it is an owned reference.
struct TraversalArena {
  // Produced.
  std::vector<Node> nodes;        // the spec's nodes, post-order
  std::vector<PyObject*> items;   // the spec's context items, pre-order
  std::vector<PyObject*> leaves;  // the leaves found, in order
  std::vector<PyObject*> paths;   // (KeyPath, leaf) pairs of a flatten with paths
  // Working stacks.
  std::vector<PyObject*> pending;     // children snapshots of the nodes being visited
  std::vector<PyObject*> keys;        // dict keys of the nodes being visited (map, spec walks)
  std::vector<PyObject*> results;     // mapped children awaiting their parent's rebuild (map)
  std::vector<std::int64_t> indices;  // spec walks: child indices being visited

  TraversalArena() = default;
  TraversalArena(const TraversalArena&) = delete;
  TraversalArena& operator=(const TraversalArena&) = delete;
  ~TraversalArena() {
    if (MayReleaseInDestructor()) Clear();  // see common.h
  }

  // True when nothing is held: the state a finished flatten leaves behind
  // (leaves stolen into the result list, nodes and items taken by the spec).
  bool HoldsNothing() const {
    return items.empty() && leaves.empty() && pending.empty() && paths.empty() && keys.empty() &&
           results.empty();
  }
  // Whether any array grew past `max_kept` entries (see Trim).
  bool Oversized(std::size_t max_kept) const {
    return nodes.capacity() > max_kept || items.capacity() > max_kept ||
           leaves.capacity() > max_kept || pending.capacity() > max_kept ||
           paths.capacity() > max_kept || keys.capacity() > max_kept ||
           results.capacity() > max_kept || indices.capacity() > max_kept;
  }
  void Clear() {
    for (auto* v : {&items, &leaves, &pending, &paths, &keys, &results}) {
      for (PyObject* o : *v) Py_DECREF(o);
      v->clear();
    }
    nodes.clear();
    indices.clear();
  }
  // Releases storage beyond `max_kept` entries per array (after Clear), so a
  // cached arena does not pin the size of the largest tree it ever saw.
  void Trim(std::size_t max_kept) {
    auto trim = [max_kept](auto& v) {
      if (v.capacity() > max_kept) std::remove_reference_t<decltype(v)>().swap(v);
    };
    trim(nodes);
    trim(items);
    trim(leaves);
    trim(pending);
    trim(paths);
    trim(keys);
    trim(results);
    trim(indices);
  }
  // Appends an owned reference.
  void AddItem(PyObject* owned) { items.push_back(owned); }
  SpecView View() const {
    return SpecView{nodes.data(), static_cast<std::int64_t>(nodes.size()), items.data()};
  }
};

// An arena borrowed from a per-thread cache when free (the common case), so
// that repeated flattens reuse one allocation; a fresh one when a flatten is
// re-entered from user code.
class ScratchArena {
 public:
  ScratchArena();
  ~ScratchArena();
  TraversalArena* operator->() { return b_; }
  TraversalArena& operator*() { return *b_; }
  TraversalArena* get() { return b_; }

 private:
  TraversalArena* b_;
  bool cached_;
};

}  // namespace cpytree

#endif  // CPYTREE_SRC_ARENA_H_
