// The ground floor under every spec: the TreeSpec object's layout, the
// builder that flatten fills, and the allocation of new spec objects. The
// Python type's behaviour (attributes, methods, slots) is treespec.cc's.
//
// A TreeSpec owns a post-order node array (include/cpytree/internal/node.h)
// and an array of context items (owned references, pre-order). Specs are
// immutable and interned (intern.h): flattening the same structure twice
// yields the same object.
//
//   SpecBuilder b;            // flatten appends nodes and items
//   PyObject* spec = InternBuilder(&b);  // new reference, possibly shared (intern.h)
#ifndef CPYTREE_SRC_SPEC_BUILDER_H_
#define CPYTREE_SRC_SPEC_BUILDER_H_

#include <type_traits>
#include <vector>

#include "common.h"
#include "cpytree/internal/node.h"

namespace cpytree {

using internal::Node;

// A read-only view of a node array and its items (a spec or a builder).
struct SpecView {
  const Node* nodes;
  std::int64_t num_nodes;
  PyObject* const* items;

  const Node& root() const { return nodes[num_nodes - 1]; }
  std::int64_t root_index() const { return num_nodes - 1; }
};

// The scratch state of one traversal: what it produces (the spec under
// construction, the leaves, key paths) and its working stacks, each shared
// by all recursion levels (a level pushes on top and truncates back to where
// it started). Each array has one meaning in every traversal that uses it.
// Every PyObject* in it is an owned reference.
struct SpecBuilder {
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

  SpecBuilder() = default;
  SpecBuilder(const SpecBuilder&) = delete;
  SpecBuilder& operator=(const SpecBuilder&) = delete;
  ~SpecBuilder() {
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
  // cached builder does not pin the size of the largest tree it ever saw.
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

// A builder borrowed from a per-thread cache when free (the common case), so
// that repeated flattens reuse one allocation; a fresh one when a flatten is
// re-entered from user code.
class ScratchBuilder {
 public:
  ScratchBuilder();
  ~ScratchBuilder();
  SpecBuilder* operator->() { return b_; }
  SpecBuilder& operator*() { return *b_; }
  SpecBuilder* get() { return b_; }

 private:
  SpecBuilder* b_;
  bool cached_;
};

struct TreeSpecObject {
  PyObject_HEAD PyObject* weakrefs;  // weak references to this spec
  TreeSpecObject* intern_next;       // next spec in the intern chain of intern_hash
  std::size_t intern_hash;           // identity-preserving structural hash (intern.h)
  Py_hash_t eq_hash;                 // hash consistent with torch's ==; -1 until computed
  Py_hash_t torch_hash;              // hash(spec), torch's formula; -1 until computed
  bool interned;                     // whether the spec is in the intern table
  std::vector<Node>* nodes;          // post-order, root last; heap-held so the object is POD
  std::vector<PyObject*>* items;     // owned context items, pre-order
};

// The type object: defined here so that allocation needs nothing above this
// floor; filled in by InitTreeSpecType (treespec.h).
extern PyTypeObject TreeSpecType;

inline bool IsTreeSpec(PyObject* o) { return PyObject_TypeCheck(o, &TreeSpecType); }

inline SpecView ViewOf(const TreeSpecObject* s) {
  return SpecView{s->nodes->data(), static_cast<std::int64_t>(s->nodes->size()), s->items->data()};
}

// Allocates a spec owning a copy of nodes [begin, end] of `v` and their items.
TreeSpecObject* NewSpecFromRange(SpecView v, std::int64_t begin, std::int64_t end);
// Allocates a spec that takes b's nodes and items (one whole tree, root ctx 0).
TreeSpecObject* NewSpecTakingBuilder(SpecBuilder* b);

}  // namespace cpytree

#endif  // CPYTREE_SRC_SPEC_BUILDER_H_
