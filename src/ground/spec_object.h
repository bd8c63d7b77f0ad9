// The TreeSpec object's layout and the allocation of new spec objects (from
// a traversal arena's arrays or a range of another spec). The Python type's
// behaviour (attributes, methods, slots) is treespec.cc's; the arena that
// traversals fill is arena.h's.
//
// A TreeSpec owns a post-order node array (include/cpytree/internal/node.h)
// and an array of context items (owned references, pre-order). Specs are
// immutable and interned (intern.h): flattening the same structure twice
// yields the same object.
//
//   ScratchArena b;                         // flatten appends nodes and items
//   PyObject* spec = InternArena(b.get());  // new reference, possibly shared (intern.h)
#ifndef CPYTREE_SRC_SPEC_OBJECT_H_
#define CPYTREE_SRC_SPEC_OBJECT_H_

#include <vector>

#include "base/common.h"
#include "ground/arena.h"

namespace cpytree {

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
// Allocates a spec that takes the arena's nodes and items (one whole tree, root ctx 0).
TreeSpecObject* NewSpecTakingArena(TraversalArena* b);

}  // namespace cpytree

#endif  // CPYTREE_SRC_SPEC_OBJECT_H_
