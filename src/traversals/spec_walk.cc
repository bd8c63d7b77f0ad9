// Walking a tree against a known spec: validate and collect what lies at the
// spec's leaves in one pass over spec and tree together, building no spec.
//
// Three modes share the walk:
//  - strict (TreeSpec.flatten): the tree's structure must equal the spec (as
//    tree_structure(tree) == spec would say); mismatches raise ValueError
//    with the key path.
//  - up-to (TreeSpec.flatten_up_to, n-ary tree_map): torch's prefix rules
//    (custom nodes match exactly; dict kinds match each other by key set; a
//    deque's maxlen is ignored) and torch's messages, plus the key path.
//  - fx (tree_flatten_spec): torch.fx._pytree.tree_flatten_spec's rules, the
//    per-call hot path of exported and compiled graphs: dict/list/tuple/
//    namedtuple spec nodes index into the tree (d[k], d[i]) without type
//    checks; other spec nodes use an fx flatten-spec function from `registry`
//    when it has one, else the subtree is flattened and its spec compared.

#include "traversals/spec_walk.h"

#include <vector>

#include "base/key_equal.h"
#include "traversals/spec_flattener.h"

namespace cpytree {
namespace {

// Strict: the node must be of the spec's kind, arity and context. kHeld
// with the children held, else kFailed.
template <Walk kMode>
inline Children SpecFlattener<kMode>::StrictChildren(std::int64_t i, PyObject* node) {
  const Node& s = v_.nodes[i];
  PyObject* const* items = v_.items + s.ctx;
  const Registration* reg = nullptr;
  bool error = false;
  NodeKind kind = KindOf(node, &reg, &error);
  if (error) return Children::kFailed;
  bool same_type =
      kind == s.kind &&
      (kind == NodeKind::kNamedTuple ? reinterpret_cast<PyObject*>(Py_TYPE(node)) == items[0]
       : kind == NodeKind::kCustom   ? reinterpret_cast<PyObject*>(Py_TYPE(node)) == items[0]
                                     : true);
  if (!same_type) {
    if (kind == NodeKind::kCustom) EndRegistryRead();  // reg is not read (registry.h)
    return TypeMismatch(i, node);
  }
  switch (kind) {
    case NodeKind::kTuple:
    case NodeKind::kNamedTuple:
      if (PyTuple_GET_SIZE(node) != s.arity) {
        return Mismatch(ArityMismatchMessage(s.arity, PyTuple_GET_SIZE(node)));
      }
      for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(node); ++k) {
        Hold(PyTuple_GET_ITEM(node, k));
      }
      return Children::kHeld;
    case NodeKind::kList: {
      ft::CriticalSection cs(node);  // one state of the list (no user code below)
      if (PyList_GET_SIZE(node) != s.arity) {
        return Mismatch(ArityMismatchMessage(s.arity, PyList_GET_SIZE(node)));
      }
      for (Py_ssize_t k = 0; k < PyList_GET_SIZE(node); ++k) Hold(PyList_GET_ITEM(node, k));
      return Children::kHeld;
    }
    case NodeKind::kDict:
    case NodeKind::kOrderedDict:
    case NodeKind::kDefaultDict:
      return HeldIf(DictChildren(s, items, node));
    case NodeKind::kDeque: {
      std::size_t base = held_.size();
      if (!SnapshotDeque(node, &held_)) return Children::kFailed;
      std::size_t n = held_.size() - base;
      if (n != s.arity) {
        return Mismatch(ArityMismatchMessage(s.arity, static_cast<Py_ssize_t>(n)));
      }
      Ref maxlen(MaxLenOf(node));
      if (!maxlen) return Children::kFailed;
      return HeldIf(ContextEqual(items[0], maxlen.get()));
    }
    case NodeKind::kCustom: {
      Ref children, context;
      if (!CallCustomFlatten(reg, node, &children, &context)) return Children::kFailed;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(children.get());
      if (n != s.arity) return Mismatch(ArityMismatchMessage(s.arity, n));
      // Held first: the context's __eq__ may mutate the children list.
      for (Py_ssize_t k = 0; k < n; ++k) Hold(PySequence_Fast_ITEMS(children.get())[k]);
      return HeldIf(ContextEqual(items[1], context.get()));
    }
    default:
      CPYTREE_CHECK(false, Children::kFailed);
  }
}

// Dict kinds: the same keys in the same order (compared with ==). True
// with the values held.
template <Walk kMode>
inline bool SpecFlattener<kMode>::DictChildren(const Node& s, PyObject* const* items,
                                               PyObject* node) {
  std::size_t base = held_.size();
  std::size_t kbase = keys_.size();  // a stack: an outer dict may hold keys there
  bool ok = SnapshotDict(node, s.kind, &keys_, &held_);
  std::size_t n = keys_.size() - kbase;
  if (ok && n != s.arity) {
    ok = Arity(s, static_cast<Py_ssize_t>(n));
  } else if (ok) {
    PyObject* const* expected = items + FirstKeyItem(s.kind);
    PyObject* const* keys = keys_.data() + kbase;  // no user code grows keys_ below
    if (s.kind == NodeKind::kDefaultDict) {
      Ref factory(DefaultFactoryOf(node));
      ok = factory && ContextEqual(items[0], factory.get(), "default_factory");
    }
    for (std::size_t k = 0; ok && k < n; ++k) {
      if (keys[k] == expected[k]) continue;
      int eq = KeyEquals(keys[k], expected[k]);
      if (eq < 0) ok = false;
      if (eq == 0) ok = Fail(KeysMismatchMessage(expected, s.arity, keys, n));
    }
  }
  ReleaseFrom(&keys_, kbase);
  if (!ok) ReleaseFrom(&held_, base);
  return ok;
}

template <Walk kMode>
Children SpecFlattener<kMode>::TypeMismatch(std::int64_t i, PyObject* node) {
  Ref spec_type(NodeType(v_, i));
  if (!spec_type) return Children::kFailed;
  if (v_.nodes[i].kind == NodeKind::kNamedTuple) spec_type = Ref::Borrow(v_.items[v_.nodes[i].ctx]);
  PyObject* got = reinterpret_cast<PyObject*>(Py_TYPE(node));
  return Mismatch(TypeMismatchMessage(spec_type.get(), got));
}

// The type torch's _get_node_type reports for `node` (borrowed).
template <Walk kMode>
inline PyObject* SpecFlattener<kMode>::NodeTypeOf(PyObject* node, NodeKind kind) {
  return kind == NodeKind::kNamedTuple ? g_builtins.namedtuple_fn
                                       : reinterpret_cast<PyObject*>(Py_TYPE(node));
}

// Up-to: appends node's children (owned) to held_, checked against spec
// node i with torch's flatten_up_to rules. kHeld, else kFailed.
template <Walk kMode>
inline Children SpecFlattener<kMode>::UpToChildren(std::int64_t i, PyObject* node) {
  const Node& s = v_.nodes[i];
  PyObject* const* items = v_.items + s.ctx;
  const Registration* reg = nullptr;
  bool error = false;
  NodeKind kind = KindOf(node, &reg, &error);
  if (error) return Children::kFailed;
  PyObject* node_type = NodeTypeOf(node, kind);
  // A custom node's registration is read only by CallCustomFlatten below
  // (which ends the registry read); every other path ends it here. (A
  // custom spec node's type is its first item.)
  if (kind == NodeKind::kCustom && (s.kind != NodeKind::kCustom || node_type != items[0])) {
    EndRegistryRead();
  }
  Ref spec_type(NodeType(v_, i));
  if (!spec_type) return Children::kFailed;
  if (s.kind == NodeKind::kCustom) {
    if (node_type != spec_type.get()) {
      return Mismatch(CustomTypeMismatchMessage(spec_type.get(), node_type));
    }
    if (reg == nullptr || kind != NodeKind::kCustom) {
      PyErr_SetObject(PyExc_KeyError, node_type);  // torch: SUPPORTED_NODES[node_type]
      return Children::kFailed;
    }
    Ref children, context;
    if (!CallCustomFlatten(reg, node, &children, &context)) return Children::kFailed;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(children.get());
    if (n != s.arity) return HeldIf(Arity(s, n));
    int ne = PyObject_RichCompareBool(context.get(), items[1], Py_NE);
    if (ne < 0) return Children::kFailed;
    if (ne) {
      return Mismatch(CustomContextMismatchMessage(spec_type.get()));
    }
    return HeldIf(HoldAll(children.get()));
  }
  bool both_dicts = IsDictKind(s.kind) && IsDictKind(kind);
  if (!both_dicts && node_type != spec_type.get()) {
    return Mismatch(TypeMismatchMessage(spec_type.get(), node_type));
  }
  Py_ssize_t len = PyObject_Size(node);
  if (len < 0) return Children::kFailed;
  if (len != s.arity) return HeldIf(Arity(s, len));
  if (both_dicts) return HeldIf(KeySetChildren(s, items + FirstKeyItem(s.kind), node));
  if (kind == NodeKind::kDeque) return HeldIf(SnapshotDeque(node, &held_));  // maxlen ignored
  if (kind == NodeKind::kNamedTuple && node_type == spec_type.get()) {
    PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(node));
    if (cls != items[0]) {
      int ne = PyObject_RichCompareBool(cls, items[0], Py_NE);
      if (ne < 0) return Children::kFailed;
      if (ne) {
        return Mismatch(NamedTupleContextMismatchMessage(spec_type.get(), items[0], cls));
      }
    }
  }
  return HeldIf(HoldAll(node));
}

// Holds the items of a list or tuple (a snapshot: user code may mutate it).
template <Walk kMode>
inline bool SpecFlattener<kMode>::HoldAll(PyObject* seq) {
  Ref fast(PySequence_Fast(seq, "expected a sequence"));
  if (!fast) return false;
  ft::CriticalSection cs(fast.get());  // a list another thread may resize
  for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(fast.get()); ++k) {
    PyObject* o = PySequence_Fast_ITEMS(fast.get())[k];
    Py_INCREF(o);
    held_.push_back(o);
  }
  return true;
}

// Dict kinds match by key set; children are taken in the spec's key order.
template <Walk kMode>
inline bool SpecFlattener<kMode>::KeySetChildren(const Node& s, PyObject* const* keys,
                                                 PyObject* node) {
  Ref expected(PySet_New(nullptr));
  if (!expected) return false;
  for (std::uint32_t k = 0; k < s.arity; ++k) {
    if (PySet_Add(expected.get(), keys[k]) < 0) return false;
  }
  Ref got(PySet_New(node));
  if (!got) return false;
  int same = PyObject_RichCompareBool(got.get(), expected.get(), Py_EQ);
  if (same < 0) return false;
  if (!same) return Fail(KeySetMismatchMessage(expected.get(), got.get()));
  for (std::uint32_t k = 0; k < s.arity; ++k) {
    PyObject* v = PyObject_GetItem(node, keys[k]);
    if (v == nullptr) return false;
    held_.push_back(v);
  }
  return true;
}

}  // namespace

namespace {

// The leaves of a flat list or tuple against a spec that is one exact list
// (or tuple) of leaves, built straight into the result list; null with no
// exception when this shortcut does not apply (then the general walk runs
// and decides, errors included). Applies when the node's type and size are
// the spec's and every item is a leaf recognised without the registry (as
// IsPlainLeafType): exactly the case where both walks accept every item,
// and where no user code can run. Strict and up-to agree here.
PyObject* FlatLeaves(SpecView v, PyObject* tree) {
  const Node& root = v.nodes[v.root_index()];
  PyTypeObject* t = Py_TYPE(tree);
  bool list = root.kind == NodeKind::kList && t == &PyList_Type;
  if (!list && !(root.kind == NodeKind::kTuple && t == &PyTuple_Type)) return nullptr;
  Py_ssize_t n = Py_SIZE(tree);
  // Every spec child a leaf: one node and one leaf per child (an empty
  // container child is one node with no leaf).
  if (n != static_cast<Py_ssize_t>(root.arity) || root.num_nodes != n + 1 || root.num_leaves != n) {
    return nullptr;
  }
  // Allocated first: the allocation may collect garbage and so run
  // finalizers, i.e. user code; after it none runs until the return.
  PyObject* result = PyList_New(n);
  if (result == nullptr) return nullptr;
  // Free-threaded builds: the items are read under the list's lock.
  ft::CriticalSection cs(tree);
  if (Py_SIZE(tree) != n) {  // a finalizer resized the list: let the walk decide
    Py_DECREF(result);
    return nullptr;
  }
  PyObject* const* items =
      list ? reinterpret_cast<PyListObject*>(tree)->ob_item : &PyTuple_GET_ITEM(tree, 0);
  // Read once: only a registration (which cannot run in this loop) changes them.
  PyTypeObject* cached = CachedLeafType();
  bool scalars = !g_scalar_registered.load(std::memory_order_relaxed);
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* x = items[k];
    PyTypeObject* xt = Py_TYPE(x);
    bool plain = (xt == cached && !PyTuple_Check(x)) || x == Py_None ||
                 (scalars && (xt == &PyLong_Type || xt == &PyFloat_Type || xt == &PyUnicode_Type ||
                              xt == &PyBool_Type || xt == &PyComplex_Type));
    if (!plain) {
      // The items taken so far are still held by `tree`: dropping them
      // frees nothing and runs no code.
      Py_DECREF(result);
      return nullptr;
    }
    Py_INCREF(x);
    PyList_SET_ITEM(result, k, x);
  }
  return result;
}

template <Walk kMode>
PyObject* FlattenAgainst(PyObject* spec, PyObject* tree) {
  PyObject* flat = FlatLeaves(ViewOf(reinterpret_cast<TreeSpecObject*>(spec)), tree);
  if (flat != nullptr || PyErr_Occurred()) return flat;
  ScratchArena b;
  std::vector<PyObject*>* out = &b->leaves;  // released by ~ScratchArena on error
  if (!WalkInto<kMode>(ViewOf(reinterpret_cast<TreeSpecObject*>(spec)), tree, nullptr, out,
                       b.get())) {
    return nullptr;
  }
  return StealIntoList(out);
}

}  // namespace

bool FlattenUpTo(SpecView v, PyObject* tree, std::vector<PyObject*>* out) {
  ScratchArena b;
  return WalkInto<Walk::kUpTo>(v, tree, nullptr, out, b.get());
}

PyObject* SpecFlatten(PyObject* spec, PyObject* tree) {
  return FlattenAgainst<Walk::kStrict>(spec, tree);
}

PyObject* SpecFlattenUpTo(PyObject* spec, PyObject* tree) {
  return FlattenAgainst<Walk::kUpTo>(spec, tree);
}

}  // namespace cpytree
