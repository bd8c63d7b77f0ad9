// tree_unflatten / TreeSpec.unflatten: one left-to-right pass over the
// post-order node array with a value stack; no recursion, so any depth works.
#include "traversals/unflatten.h"

#include "absl/container/inlined_vector.h"
#include "base/args.h"
#include "base/ft.h"
#include "ground/children.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/spec_model.h"
#include "spec_model/torch_interop.h"
#include "traversals/flatten.h"

namespace cpytree {
namespace {

// Builds one node from its `n` children, the owned references stack[top-n:].
// Returns a new reference; the children references are always consumed.
PyObject* BuildNode(const Node& node, PyObject* const* items, PyObject** kids) {
  std::uint32_t n = node.arity;
  auto release = [&] {
    for (std::uint32_t k = 0; k < n; ++k) Py_XDECREF(kids[k]);
  };
  switch (node.kind) {
    case NodeKind::kTuple:
      return NewTupleNode(kids, n);
    case NodeKind::kList:
      return NewListNode(kids, n);
    case NodeKind::kNamedTuple:
      return NewNamedTuple(items[0], kids, n);  // cls(*values); consumes kids
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
    case NodeKind::kDefaultDict: {
      PyObject* factory = node.kind == NodeKind::kDefaultDict ? items[0] : nullptr;
      PyObject* out = NewDictNode(node.kind, factory, items + FirstKeyItem(node.kind), kids, n);
      release();
      return out;
    }
    case NodeKind::kDeque:
      return NewDequeNode(kids, n, items[0]);
    case NodeKind::kCustom: {
      const Registration* reg = LookupRegistration(reinterpret_cast<PyTypeObject*>(items[0]));
      if (reg == nullptr || reg->kind != NodeKind::kCustom) {
        PyErr_SetObject(PyExc_KeyError, items[0]);  // torch: SUPPORTED_NODES[type]
        break;
      }
      return NewCustomNode(reg, kids, n, items[1]);
    }
    case NodeKind::kLeaf:
      break;
  }
  release();
  CPYTREE_CHECK(PyErr_Occurred(), nullptr);
  return nullptr;
}

}  // namespace

namespace {

// The pass over the nodes; `leaf(k)` is the k-th leaf (borrowed), or null
// with an exception set.
template <class LeafAt>
PyObject* UnflattenWith(SpecView v, LeafAt&& leaf_at) {
  // Owned references, stack[0:top]. Every node pushes one value and a node
  // pops its children first, so the stack never holds more than num_nodes:
  // sized once, it is indexed directly (no size bookkeeping per node, which
  // dominated the engine's share on deep chains).
  absl::InlinedVector<PyObject*, 64> storage(static_cast<std::size_t>(v.num_nodes));
  PyObject** stack = storage.data();
  std::size_t top = 0;
  auto release_stack = [&] {
    for (std::size_t k = 0; k < top; ++k) Py_DECREF(stack[k]);
  };
  std::int64_t next_leaf = 0;
  for (std::int64_t i = 0; i < v.num_nodes; ++i) {
    const Node& node = v.nodes[i];
    if (node.kind == NodeKind::kLeaf) {
      PyObject* leaf = leaf_at(next_leaf++);
      if (leaf == nullptr) {
        release_stack();
        return nullptr;
      }
      Py_INCREF(leaf);
      stack[top++] = leaf;
      continue;
    }
    top -= node.arity;  // BuildNode consumes the children, stack[top:top+arity]
    PyObject* built = BuildNode(node, v.items + node.ctx, stack + top);
    if (built == nullptr) {
      release_stack();
      return nullptr;
    }
    stack[top++] = built;
  }
  CPYTREE_CHECK(top == 1, nullptr);
  return stack[0];
}

}  // namespace

PyObject* UnflattenView(SpecView v, PyObject* const* leaves, std::int64_t num_leaves) {
  CPYTREE_CHECK(num_leaves == v.root().num_leaves, nullptr);
  return UnflattenWith(v, [leaves](std::int64_t k) { return leaves[k]; });
}

PyObject* UnflattenChecked(PyObject* spec, PyObject* leaves) {
  Ref seq;
  if (PyList_CheckExact(leaves) || PyTuple_CheckExact(leaves)) {
    // Free-threaded builds: a snapshot of a list (another thread may resize it).
    seq = Ref(ft::StableSequence(leaves));
    if (!seq) return nullptr;
  } else {
    seq = Ref(PySequence_List(leaves));
    if (!seq) return nullptr;
  }
  SpecView v = ViewOf(reinterpret_cast<TreeSpecObject*>(spec));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  if (n != v.root().num_leaves) {
    PyErr_Format(PyExc_ValueError,
                 "treespec.unflatten(leaves): `leaves` has length %zd but the spec refers to "
                 "a pytree that holds %lld items (%S).",
                 n, static_cast<long long>(v.root().num_leaves), spec);
    return nullptr;
  }
  PyObject* seq_obj = seq.get();
  // Read the leaves live: a list may change under user code (a namedtuple's
  // __new__, a custom unflatten) while the pass runs, so bounds are re-checked.
  return UnflattenWith(v, [seq_obj](std::int64_t k) -> PyObject* {
    if (k < PySequence_Fast_GET_SIZE(seq_obj)) return PySequence_Fast_ITEMS(seq_obj)[k];
    PyErr_SetString(PyExc_RuntimeError, "the leaves list changed size during unflatten");
    return nullptr;
  });
}

PyObject* PyTreeUnflatten(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const kNames[] = {"leaves", "treespec"};
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_unflatten", args, nargs, kwnames, kNames, 2, 2, a)) return nullptr;
  PyObject* leaves = a[0];
  PyObject* spec = a[1];
  if (!IsAnySpec(spec) && IsAnySpec(leaves))
    std::swap(leaves, spec);  // torch allows (spec, leaves)
  Ref engine_spec(CoerceSpec(spec, "`treespec`"));
  if (!engine_spec) return nullptr;
  return UnflattenChecked(engine_spec.get(), leaves);
}

}  // namespace cpytree
