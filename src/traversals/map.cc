// tree_map and tree_map_. The unary map is one fused pass that rebuilds the
// tree as it walks it and never builds a spec. The n-ary map flattens the
// first tree, matches every other tree against it (torch's prefix rule, all
// errors before any call of `func`), calls `func`, and rebuilds.
// tree_map_only and tree_map_only_ are the unary ones with a LeafFilter:
// torch's map_only(type_or_types_or_pred) checked in C at each leaf, `func`
// called only on the leaves it selects (torch wraps `func` in a Python
// closure called once per leaf instead).
#include "traversals/map.h"

#include <vector>

#include "base/ft.h"
#include "ground/children.h"
#include "ground/key_entries.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "traversals/flatten.h"
#include "traversals/spec_walk.h"
#include "traversals/unflatten.h"

namespace cpytree {
namespace {

// torch's map_only(type_or_types_or_pred): which leaves `func` applies to.
struct LeafFilter {
  PyObject* types = nullptr;  // a type, tuple of types or union: isinstance(leaf, types)
  PyObject* pred = nullptr;   // else a callable: bool(pred(leaf))

  // 1 to call func on `leaf`, 0 to keep it, -1 with an exception set.
  int Selects(PyObject* leaf) const {
    if (types == nullptr && pred == nullptr) return 1;
    if (types != nullptr) return PyObject_IsInstance(leaf, types);
    Ref r(PyObject_CallOneArg(pred, leaf));
    return r ? PyObject_IsTrue(r.get()) : -1;
  }

  // Parses type_or_types_or_pred as map_only does, with its TypeError.
  bool Parse(PyObject* spec) {
    if (PyType_Check(spec) || PyTuple_Check(spec)) {
      types = spec;
      return true;
    }
    Ref types_module(PyImport_ImportModule("types"));
    if (!types_module) return false;
    Ref union_type(PyObject_GetAttrString(types_module.get(), "UnionType"));
    if (!union_type) return false;
    if (PyObject_TypeCheck(spec, reinterpret_cast<PyTypeObject*>(union_type.get()))) {
      types = spec;
      return true;
    }
    if (PyCallable_Check(spec)) {
      pred = spec;
      return true;
    }
    PyErr_SetString(PyExc_TypeError, "Argument must be a type, a tuple of types, or a callable.");
    return false;
  }
};

template <bool kHasIsLeaf>
class Mapper {
 public:
  Mapper(PyObject* func, PyObject* is_leaf, TraversalArena* b, LeafFilter filter = {})
      : func_(func), is_leaf_(is_leaf), b_(b), limit_(DepthLimit()), filter_(filter) {}

  // The mapped tree (new reference) or null with an exception.
  PyObject* Visit(PyObject* obj, int depth) {
    if (limit_.Exceeded(depth)) {
      RaiseDepthError("pytree map", limit_.Reached(depth));
      return nullptr;
    }
    if constexpr (kHasIsLeaf) {
      int r = CallIsLeaf(obj);
      if (r < 0) return nullptr;
      if (r > 0) return MapLeaf(obj);
    }
    PyTypeObject* type = Py_TYPE(obj);
    if (type == &PyList_Type) return MapList(obj, depth);
    if (type == &PyTuple_Type) return MapTuple(obj, depth);
    if (type == &PyDict_Type) return MapDict(obj, NodeKind::kDict, depth);
    if (obj == Py_None || IsPlainScalarLeaf(type)) return MapLeaf(obj);
    return MapOther(obj, depth);
  }

 private:
  // func(leaf), or the leaf itself when the filter does not select it.
  PyObject* MapLeaf(PyObject* leaf) {
    int selected = filter_.Selects(leaf);
    if (selected < 0) return nullptr;
    if (selected == 0) return Py_NewRef(leaf);
    return PyObject_CallOneArg(func_, leaf);
  }

  CPYTREE_NOINLINE int CallIsLeaf(PyObject* obj) {
    Ref r(PyObject_CallOneArg(is_leaf_, obj));
    if (!r) return -1;
    return PyObject_IsTrue(r.get());
  }

  // Maps the snapshot pending[base:] onto the results stack (b_->results) and
  // drops the snapshot. Results are read back from leaves[rbase:].
  bool MapPending(std::size_t base, int depth, std::size_t* rbase) {
    *rbase = b_->results.size();
    std::size_t n = b_->pending.size() - base;
    bool ok = true;
    for (std::size_t k = 0; ok && k < n; ++k) {
      // By index: the stacks may grow (and move) inside Visit.
      PyObject* v = Visit(b_->pending[base + k], depth + 1);
      if (v == nullptr) {
        ok = false;
      } else {
        b_->results.push_back(v);
      }
    }
    ReleaseFrom(&b_->pending, base);
    if (!ok) ReleaseFrom(&b_->results, *rbase);
    return ok;
  }

  // Hands results[rbase:] to `make` (a node constructor of children.h that
  // takes the references, as unflatten's do) and pops them.
  template <typename Make>
  PyObject* NodeFromResults(std::size_t rbase, Make make) {
    PyObject* out = make(b_->results.data() + rbase, b_->results.size() - rbase);
    b_->results.resize(rbase);
    return out;
  }

  // Snapshots a list's items first: `func` may mutate the input list.
  PyObject* MapList(PyObject* list, int depth) {
    std::size_t base = b_->pending.size(), rbase;
    ft::AppendListItems(list, &b_->pending);  // one state of it (its lock without the GIL)
    if (!MapPending(base, depth, &rbase)) return nullptr;
    return NodeFromResults(rbase, NewListNode);
  }

  PyObject* MapTuple(PyObject* tuple, int depth) {
    // Filled in place as the children are mapped (a tuple cannot change
    // under `func`): going through `results` and NewTupleNode, as MapList
    // does, cost +3% instructions on small trees (callgrind, args/map).
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    Ref out(PyTuple_New(n));
    if (!out) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* v = Visit(PyTuple_GET_ITEM(tuple, i), depth + 1);
      if (v == nullptr) return nullptr;
      PyTuple_SET_ITEM(out.get(), i, v);
    }
    return out.release();
  }

  // Keys are snapshotted on b_->keys (unused by map), values on pending.
  PyObject* MapDict(PyObject* dict, NodeKind kind, int depth) {
    std::size_t kbase = b_->keys.size(), base = b_->pending.size(), rbase;
    bool ok = SnapshotDict(dict, kind, &b_->keys, &b_->pending) && MapPending(base, depth, &rbase);
    if (!ok) {
      ReleaseFrom(&b_->pending, base);
      ReleaseFrom(&b_->keys, kbase);
      return nullptr;
    }
    std::size_t n = b_->results.size() - rbase;
    Ref factory;
    if (kind == NodeKind::kDefaultDict) factory = Ref(DefaultFactoryOf(dict));
    PyObject* out = kind == NodeKind::kDefaultDict && !factory
                        ? nullptr
                        : NewDictNode(kind, factory.get(), b_->keys.data() + kbase,
                                      b_->results.data() + rbase, n);
    ReleaseFrom(&b_->results, rbase);
    ReleaseFrom(&b_->keys, kbase);
    return out;
  }

  PyObject* MapNamedTuple(PyObject* tuple, int depth) {
    std::size_t rbase = b_->results.size();
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* v = Visit(PyTuple_GET_ITEM(tuple, i), depth + 1);
      if (v == nullptr) {
        ReleaseFrom(&b_->results, rbase);
        return nullptr;
      }
      b_->results.push_back(v);
    }
    // cls(*values), consuming the results.
    PyObject* out =
        NewNamedTuple(reinterpret_cast<PyObject*>(Py_TYPE(tuple)), b_->results.data() + rbase, n);
    b_->results.resize(rbase);
    return out;
  }

  PyObject* MapDeque(PyObject* deque, int depth) {
    Ref maxlen(MaxLenOf(deque));
    if (!maxlen) return nullptr;
    std::size_t base = b_->pending.size();
    if (!SnapshotDeque(deque, &b_->pending)) {
      ReleaseFrom(&b_->pending, base);
      return nullptr;
    }
    std::size_t rbase;
    if (!MapPending(base, depth, &rbase)) return nullptr;
    return NodeFromResults(rbase, [&](PyObject* const* values, std::size_t n) {
      return NewDequeNode(values, n, maxlen.get());
    });
  }

  PyObject* MapCustom(PyObject* obj, const Registration* found, int depth) {
    PinnedRegistration pinned(found);  // unflatten_fn is called after user code
    const Registration* reg = pinned.get();
    Ref children, context;
    if (!CallCustomFlatten(reg, obj, &children, &context)) return nullptr;
    std::size_t base = b_->pending.size();
    PyObject* seq = children.get();
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      PyObject* o = PySequence_Fast_ITEMS(seq)[i];
      Py_INCREF(o);
      b_->pending.push_back(o);
    }
    std::size_t rbase;
    if (!MapPending(base, depth, &rbase)) return nullptr;
    return NodeFromResults(rbase, [&](PyObject* const* values, std::size_t n) {
      return NewCustomNode(reg, values, n, context.get());
    });
  }

  CPYTREE_NOINLINE PyObject* MapOther(PyObject* obj, int depth) {
    const Registration* reg = nullptr;
    bool error = false;
    NodeKind kind = Classify(obj, &reg, &error);
    if (error) return nullptr;
    switch (kind) {
      case NodeKind::kLeaf:
        return MapLeaf(obj);
      case NodeKind::kNamedTuple:
        return MapNamedTuple(obj, depth);
      case NodeKind::kOrderedDict:
      case NodeKind::kDefaultDict:
        return MapDict(obj, kind, depth);
      case NodeKind::kDeque:
        return MapDeque(obj, depth);
      case NodeKind::kCustom:
        return MapCustom(obj, reg, depth);
      default:
        CPYTREE_CHECK(false, nullptr);
    }
  }

  PyObject* func_;
  PyObject* is_leaf_;
  TraversalArena* b_;
  DepthBound limit_;
  LeafFilter filter_;
};

const char* const kMapArgs[] = {"func", "tree", "is_leaf"};

// Splits (func, tree, *rests, is_leaf=None). Borrowed results.
bool ParseMapArgs(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                  PyObject** func, PyObject** tree, PyObject** is_leaf, PyObject* const** rests,
                  Py_ssize_t* num_rests) {
  PyObject* named[3] = {nullptr, nullptr, nullptr};
  Py_ssize_t npos = nargs < 2 ? nargs : 2;
  for (Py_ssize_t i = 0; i < npos; ++i) named[i] = args[i];
  Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t j = 0; j < nkw; ++j) {
    PyObject* kw = PyTuple_GET_ITEM(kwnames, j);
    int slot = -1;
    for (int i = 0; i < 3; ++i) {
      if (PyUnicode_CompareWithASCIIString(kw, kMapArgs[i]) == 0) slot = i;
    }
    if (slot < 0 || (slot < 2 && nargs > 2)) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, kw);
      return false;
    }
    if (named[slot] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", fname, kw);
      return false;
    }
    named[slot] = args[nargs + j];
  }
  if (named[0] == nullptr || named[1] == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname,
                 named[0] == nullptr ? "func" : "tree");
    return false;
  }
  *func = named[0];
  *tree = named[1];
  *is_leaf = named[2];
  *rests = args + npos;
  *num_rests = nargs - npos;
  return true;
}

// Flattens `tree` into b and every rest up to its spec: leaf columns for func.
// With `with_path`, b->paths gets each leaf's (KeyPath, leaf) pair too.
bool FlattenAll(PyObject* tree, PyObject* is_leaf, PyObject* const* rests, Py_ssize_t num_rests,
                TraversalArena* b, std::vector<std::vector<PyObject*>>* columns,
                bool with_path = false) {
  bool ok = with_path ? FlattenWithPathInto(tree, is_leaf, b) : FlattenInto(tree, is_leaf, true, b);
  if (!ok) return false;
  columns->resize(static_cast<std::size_t>(num_rests));
  for (Py_ssize_t r = 0; r < num_rests; ++r) {
    if (!FlattenUpTo(b->View(), rests[r], &(*columns)[r])) return false;
  }
  return true;
}

void ReleaseColumns(std::vector<std::vector<PyObject*>>* columns) {
  for (auto& c : *columns) ReleaseFrom(&c, 0);
}

// Calls func(leaf, *rest_leaves) for each leaf, or func(keypath, leaf,
// *rest_leaves) with `with_path`; results (owned) into `out` when not null.
// Leaves `filter` does not select are skipped (only without `out`).
bool CallColumns(PyObject* func, const TraversalArena& b,
                 const std::vector<std::vector<PyObject*>>& columns, std::vector<PyObject*>* out,
                 bool with_path = false, LeafFilter filter = {}) {
  std::size_t first = with_path ? 1 : 0;
  std::vector<PyObject*> argv(columns.size() + 1 + first);
  // With paths, torch maps the (path, leaf) pairs of flatten_with_keys_fn,
  // zipped (strict) with the rests' columns, which follow the spec (from
  // flatten_fn): the counts differ only when a custom node's two functions
  // disagree (see Flattener::VisitCustom).
  std::size_t n = with_path ? b.paths.size() : b.leaves.size();
  std::size_t rest_n = columns.empty() ? n : columns[0].size();
  for (std::size_t i = 0; i < n && i < rest_n; ++i) {
    PyObject* leaf = with_path ? PyTuple_GET_ITEM(b.paths[i], 1) : b.leaves[i];
    int selected = filter.Selects(leaf);
    if (selected < 0) return false;
    if (selected == 0) continue;
    if (with_path) argv[0] = PyTuple_GET_ITEM(b.paths[i], 0);
    argv[first] = leaf;
    for (std::size_t r = 0; r < columns.size(); ++r) argv[first + r + 1] = columns[r][i];
    PyObject* v = PyObject_Vectorcall(func, argv.data(), argv.size(), nullptr);
    if (v == nullptr) return false;
    if (out != nullptr) {
      out->push_back(v);
    } else {
      Py_DECREF(v);
    }
  }
  if (n != rest_n) {  // torch's zip(..., strict=True) over paths, leaves, rests
    PyErr_Format(PyExc_ValueError, "zip() argument %d is %s than arguments 1-%d",
                 static_cast<int>(first) + 2, n < rest_n ? "longer" : "shorter",
                 static_cast<int>(first) + 1);
    return false;
  }
  return true;
}

// Splits (type_or_types_or_pred, /, func, tree, is_leaf=None) of tree_map_only.
bool ParseMapOnlyArgs(const char* fname, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                      LeafFilter* filter, PyObject** func, PyObject** tree, PyObject** is_leaf) {
  if (nargs < 1) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument 'type_or_types_or_pred'", fname);
    return false;
  }
  PyObject* const* rests;
  Py_ssize_t num_rests;
  if (!ParseMapArgs(fname, args + 1, nargs - 1, kwnames, func, tree, is_leaf, &rests, &num_rests)) {
    return false;
  }
  if (num_rests > 1 || (num_rests == 1 && *is_leaf != nullptr)) {
    PyErr_Format(PyExc_TypeError, "%s() takes from 3 to 4 positional arguments but %zd were given",
                 fname, nargs);
    return false;
  }
  if (num_rests == 1) *is_leaf = rests[0];
  return filter->Parse(args[0]);
}

}  // namespace

PyObject* PyTreeMapOnly(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  LeafFilter filter;
  PyObject *func, *tree, *is_leaf;
  if (!ParseMapOnlyArgs("tree_map_only", args, nargs, kwnames, &filter, &func, &tree, &is_leaf)) {
    return nullptr;
  }
  ScratchArena b;
  if (is_leaf == nullptr || is_leaf == Py_None) {
    return Mapper<false>(func, nullptr, b.get(), filter).Visit(tree, 0);
  }
  return Mapper<true>(func, is_leaf, b.get(), filter).Visit(tree, 0);
}

PyObject* PyTreeMapOnlyInplace(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  LeafFilter filter;
  PyObject *func, *tree, *is_leaf;
  if (!ParseMapOnlyArgs("tree_map_only_", args, nargs, kwnames, &filter, &func, &tree, &is_leaf)) {
    return nullptr;
  }
  ScratchArena b;
  std::vector<std::vector<PyObject*>> no_rests;
  if (!FlattenInto(tree, is_leaf, false, b.get()) ||
      !CallColumns(func, *b, no_rests, nullptr, false, filter)) {
    return nullptr;
  }
  return Py_NewRef(tree);
}

PyObject* PyTreeMap(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject *func, *tree, *is_leaf;
  PyObject* const* rests;
  Py_ssize_t num_rests;
  if (!ParseMapArgs("tree_map", args, nargs, kwnames, &func, &tree, &is_leaf, &rests, &num_rests)) {
    return nullptr;
  }
  ScratchArena b;
  if (num_rests == 0) {
    if (is_leaf == nullptr || is_leaf == Py_None) {
      return Mapper<false>(func, nullptr, b.get()).Visit(tree, 0);
    }
    return Mapper<true>(func, is_leaf, b.get()).Visit(tree, 0);
  }
  std::vector<std::vector<PyObject*>> columns;
  std::vector<PyObject*> results;
  PyObject* out = nullptr;
  if (FlattenAll(tree, is_leaf, rests, num_rests, b.get(), &columns) &&
      CallColumns(func, *b, columns, &results)) {
    out = UnflattenView(b->View(), results.data(), static_cast<std::int64_t>(results.size()));
  }
  ReleaseFrom(&results, 0);
  ReleaseColumns(&columns);
  return out;
}

namespace {

// tree_map_with_path when a custom node's flatten_fn and flatten_with_keys_fn
// disagree on the number of leaves: torch's treespec.unflatten error (its
// text names the spec). Always null.
CPYTREE_NOINLINE PyObject* UnflattenMismatch(TraversalArena* b, std::vector<PyObject*>* results) {
  Ref spec(FinishSpec(b));
  if (!spec) return nullptr;
  Ref list(StealIntoList(results));
  if (!list) return nullptr;
  PyObject* out = UnflattenChecked(spec.get(), list.get());
  CPYTREE_CHECK(out == nullptr, nullptr);
  return nullptr;
}

}  // namespace

PyObject* PyTreeMapWithPath(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject *func, *tree, *is_leaf;
  PyObject* const* rests;
  Py_ssize_t num_rests;
  if (!ParseMapArgs("tree_map_with_path", args, nargs, kwnames, &func, &tree, &is_leaf, &rests,
                    &num_rests)) {
    return nullptr;
  }
  KeyScope scope(KeyFlavor::kOwn);
  ScratchArena b;
  std::vector<std::vector<PyObject*>> columns;
  std::vector<PyObject*> results;
  PyObject* out = nullptr;
  if (FlattenAll(tree, is_leaf, rests, num_rests, b.get(), &columns, true) &&
      CallColumns(func, *b, columns, &results, true)) {
    if (results.size() == b->leaves.size()) {
      out = UnflattenView(b->View(), results.data(), static_cast<std::int64_t>(results.size()));
    } else {
      out = UnflattenMismatch(b.get(), &results);
    }
  }
  ReleaseFrom(&results, 0);
  ReleaseColumns(&columns);
  return out;
}

PyObject* PyTreeMapInplace(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject *func, *tree, *is_leaf;
  PyObject* const* rests;
  Py_ssize_t num_rests;
  if (!ParseMapArgs("tree_map_", args, nargs, kwnames, &func, &tree, &is_leaf, &rests,
                    &num_rests)) {
    return nullptr;
  }
  ScratchArena b;
  std::vector<std::vector<PyObject*>> columns;
  bool ok = num_rests == 0 ? FlattenInto(tree, is_leaf, false, b.get())
                           : FlattenAll(tree, is_leaf, rests, num_rests, b.get(), &columns);
  ok = ok && CallColumns(func, *b, columns, nullptr);
  ReleaseColumns(&columns);
  if (!ok) return nullptr;
  Py_INCREF(tree);
  return tree;
}

}  // namespace cpytree
