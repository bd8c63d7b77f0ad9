// fx mode of the walk against a spec (spec_flattener.h):
// torch.fx._pytree.tree_flatten_spec's rules, the per-call hot path of
// exported and compiled graphs.

#include <vector>

#include "base/args.h"
#include "traversals/spec_flattener.h"
#include "traversals/spec_walk.h"

namespace cpytree {
namespace {

// fx rules. kHandled when the subtree was handled whole (its leaves
// appended).
template <Walk kMode>
inline Children SpecFlattener<kMode>::FxChildren(std::int64_t i, PyObject* node, int depth) {
  const Node& s = v_.nodes[i];
  PyObject* const* items = v_.items + s.ctx;
  switch (s.kind) {
    case NodeKind::kDict:  // [d[k] for k in spec.context]
      for (std::uint32_t k = 0; k < s.arity; ++k) {
        PyObject* v = PyObject_GetItem(node, items[k]);
        if (v == nullptr) return Children::kFailed;
        held_.push_back(v);
      }
      return Children::kHeld;
    case NodeKind::kList:
    case NodeKind::kTuple:
    case NodeKind::kNamedTuple:  // [d[i] for i in range(spec.num_children)]
      if (PyList_CheckExact(node) || PyTuple_Check(node)) {
        ft::CriticalSection cs(node);  // a list another thread may resize
        if (Py_SIZE(node) >= static_cast<Py_ssize_t>(s.arity)) {
          PyObject** src = PySequence_Fast_ITEMS(node);
          for (std::uint32_t k = 0; k < s.arity; ++k) Hold(src[k]);
          return Children::kHeld;
        }
      }
      for (std::uint32_t k = 0; k < s.arity; ++k) {
        Ref index(PyLong_FromUnsignedLong(k));
        PyObject* v = index ? PyObject_GetItem(node, index.get()) : nullptr;  // d[i]
        if (v == nullptr) return Children::kFailed;
        held_.push_back(v);
      }
      return Children::kHeld;
    default:
      return FxOther(i, node, depth);
  }
}

template <Walk kMode>
Children SpecFlattener<kMode>::FxOther(std::int64_t i, PyObject* node, int depth) {
  SpecView sub{v_.nodes + internal::SubtreeBegin(v_.nodes, i), v_.nodes[i].num_nodes, v_.items};
  Ref spec(InternView(sub));
  if (!spec) return Children::kFailed;
  if (registry_ != nullptr && registry_ != Py_None) {
    Ref type(NodeType(v_, i));
    if (!type) return Children::kFailed;
    PyObject* found = nullptr;
    if (ft::DictGetItemRef(registry_, type.get(), &found) < 0) return Children::kFailed;
    Ref fn(found);
    if (fn) {
      Ref children(PyObject_CallFunctionObjArgs(fn.get(), node, spec.get(), nullptr));
      if (!children) return Children::kFailed;
      Ref fast(PySequence_Fast(children.get(), "flatten_fn_spec must return a list"));
      if (!fast) return Children::kFailed;
      Ref seq(ft::StableSequence(fast.get()));  // a snapshot without the GIL
      if (!seq) return Children::kFailed;
      // torch zips children with child specs: the shorter one wins.
      Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
      if (n < v_.nodes[i].arity) return FxShortChildren(i, seq.get(), depth);
      for (std::uint32_t k = 0; k < v_.nodes[i].arity; ++k) {
        Hold(PySequence_Fast_ITEMS(seq.get())[k]);
      }
      return Children::kHeld;
    }
  }
  // torch: flat_result, real_spec = tree_flatten(pytree); compare specs.
  ScratchArena b;
  if (!FlattenInto(node, nullptr, true, b.get())) return Children::kFailed;
  Ref real(FinishSpec(b.get()));  // a one-node tree may be a childless custom node
  if (!real) return Children::kFailed;
  int eq = real.get() == spec.get() ? 1 : PyObject_RichCompareBool(real.get(), spec.get(), Py_EQ);
  if (eq < 0) return Children::kFailed;
  if (!eq) {
    RaiseRealSpecMismatch(real.get(), node, spec.get());
    return Children::kFailed;
  }
  for (PyObject* leaf : b->leaves) out_->push_back(leaf);
  b->leaves.clear();  // ownership moved to out_
  return Children::kHandled;
}

// A registered fx flatten function returned fewer children than the spec
// has: like torch's zip, flatten only those. `depth` is node i's: the
// children continue the same depth count (nested custom nodes whose fx
// functions all return short lists recursed without bound before).
template <Walk kMode>
Children SpecFlattener<kMode>::FxShortChildren(std::int64_t i, PyObject* seq, int depth) {
  std::vector<std::int64_t> idx;
  internal::ChildIndices(v_.nodes, i, &idx);
  for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); ++k) {
    Ref child = Ref::Borrow(PySequence_Fast_ITEMS(seq)[k]);  // the visit may mutate seq
    if (!Visit(idx[k], child.get(), depth + 1)) return Children::kFailed;
  }
  return Children::kHandled;
}

}  // namespace

PyObject* PyTreeFlattenSpec(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const kNames[] = {"pytree", "spec", "registry"};
  PyObject* a[3] = {nullptr, nullptr, nullptr};
  if (!ParseArgs("tree_flatten_spec", args, nargs, kwnames, kNames, 3, 2, a)) return nullptr;
  Ref spec(CoerceSpec(a[1], "`spec`"));
  if (!spec) return nullptr;
  if (a[2] != nullptr && a[2] != Py_None && !PyDict_Check(a[2])) {
    PyErr_SetString(PyExc_TypeError, "tree_flatten_spec: registry must be a dict or None");
    return nullptr;
  }
  ScratchArena b;
  std::vector<PyObject*>* out = &b->leaves;  // released by ~ScratchArena on error
  if (!WalkInto<Walk::kFx>(ViewOf(reinterpret_cast<TreeSpecObject*>(spec.get())), a[0], a[2], out,
                           b.get())) {
    return nullptr;
  }
  return StealIntoList(out);
}

}  // namespace cpytree
