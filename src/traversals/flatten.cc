// tree_flatten, tree_leaves, tree_structure and tree_is_leaf: one recursive
// traversal specialised at compile time for "build a spec or not" and "is
// there an is_leaf callback", so the common call runs with no mode tests.
#include "traversals/flatten.h"

#include "base/args.h"
#include "base/ft.h"
#include "ground/children.h"
#include "ground/intern.h"
#include "ground/key_entries.h"
#include "ground/registry.h"

namespace cpytree {
namespace {

// kWithPath also records each leaf's key path as a (KeyPath, leaf) pair in
// b->paths. With the spec it is tree_flatten_with_path (spec from flatten_fn,
// pairs from flatten_with_keys_fn, as torch builds them); without it, torch's
// _generate_key_paths alone (tree_leaves_with_path): flatten_with_keys_fn
// only, and no leaves in b->leaves.
template <bool kWithSpec, bool kHasIsLeaf, bool kWithPath = false>
class Flattener {
  template <bool, bool, bool>
  friend class Flattener;

 public:
  // `path`: the key path so far, shared with the flattener that started this
  // one (see VisitCustom); null for a new root.
  Flattener(PyObject* is_leaf, TraversalArena* b, std::vector<PyObject*>* path = nullptr)
      : is_leaf_(is_leaf), b_(b), limit_(DepthLimit()), path_(path ? path : &own_path_) {}

  bool Visit(PyObject* obj, int depth) {
    if (limit_.Exceeded(depth)) {
      RaiseDepthError("pytree flatten", limit_.Reached(depth));
      return false;
    }
    if constexpr (kHasIsLeaf) {
      int r = CallIsLeaf(obj);
      if (r != 0) return r > 0 && AddLeaf(obj);
    }
    PyTypeObject* type = Py_TYPE(obj);
    if (type == &PyList_Type) return VisitList(obj, depth);
    if (type == &PyTuple_Type) return VisitTuple(obj, NodeKind::kTuple, depth);
    if (type == &PyDict_Type) return VisitDict(obj, NodeKind::kDict, depth);
    if (obj == Py_None || IsPlainScalarLeaf(type)) return AddLeaf(obj);
#if CPYTREE_FREE_THREADED
    // Before VisitOther, whose leaf-cache check is a thread-local access
    // (a __tls_get_addr call) without the GIL: the registry's fixed kinds.
    switch (BuiltinMapKind(type)) {
      case NodeKind::kOrderedDict:
        return VisitDict(obj, NodeKind::kOrderedDict, depth);
      case NodeKind::kDefaultDict:
        return VisitDict(obj, NodeKind::kDefaultDict, depth);
      case NodeKind::kDeque:
        return VisitDeque(obj, depth);
      default:
        break;
    }
#endif
    return VisitOther(obj, depth);
  }

 private:
  // 1 if is_leaf(obj) is true, 0 if false, -1 on error.
  CPYTREE_NOINLINE int CallIsLeaf(PyObject* obj) {
    Ref r(PyObject_CallOneArg(is_leaf_, obj));
    if (!r) return -1;
    return PyObject_IsTrue(r.get());
  }

  bool AddLeaf(PyObject* obj) {
    if constexpr (kWithPath) {
      PyObject* pair = MakePathPair(*path_, obj);
      if (pair == nullptr) return false;
      b_->paths.push_back(pair);
    }
    if constexpr (kWithSpec || !kWithPath) {  // leaves of tree_leaves, counts of the spec
      Py_INCREF(obj);
      b_->leaves.push_back(obj);
    }
    if constexpr (kWithSpec) PushNode(NodeKind::kLeaf, 0, ItemCount(), 1, 1);
    return true;
  }

  // Writes the node's fields in place: building a Node on the stack and
  // copying it stalls on store-to-load forwarding (measured: most of the
  // time of a flat-list flatten).
  void PushNode(NodeKind kind, std::size_t arity, std::uint32_t ctx, std::int64_t leaves,
                std::int64_t nodes) {
    Node& n = b_->nodes.emplace_back();  // value-initialised: padding is zero
    n.kind = kind;
    n.arity = static_cast<std::uint32_t>(arity);
    n.ctx = ctx;
    n.num_leaves = leaves;
    n.num_nodes = nodes;
  }

  std::uint32_t ItemCount() const { return static_cast<std::uint32_t>(b_->items.size()); }

  // Where a node starts: its counts are differences against this.
  struct Mark {
    std::size_t leaves, nodes;
    std::uint32_t ctx;
  };
  Mark Begin() const { return Mark{b_->leaves.size(), b_->nodes.size(), ItemCount()}; }
  void End(const Mark& m, NodeKind kind, std::size_t arity) {
    if constexpr (kWithSpec) {
      PushNode(kind, arity, m.ctx, static_cast<std::int64_t>(b_->leaves.size() - m.leaves),
               static_cast<std::int64_t>(b_->nodes.size() - m.nodes + 1));
    }
  }
  void AddItem(PyObject* borrowed) {
    if constexpr (kWithSpec) {
      Py_INCREF(borrowed);
      b_->AddItem(borrowed);
    }
  }

  // Visits a child. In path mode `make_key()` (a new reference, or null
  // with an exception) is on the key path for the duration.
  template <class MakeKey>
  bool VisitChild(PyObject* child, int depth, MakeKey&& make_key) {
    if constexpr (kWithPath) {
      PyObject* key = make_key();
      if (key == nullptr) return false;
      path_->push_back(key);
      bool ok = Visit(child, depth + 1);
      path_->pop_back();
      Py_DECREF(key);
      return ok;
    } else {
      return Visit(child, depth + 1);
    }
  }

  // A list may be mutated by user code run below it (is_leaf, custom
  // flatten): read its size every step and hold each child while visiting.
  // Free-threaded builds: another thread may mutate it at any time.
  // Without is_leaf or paths, a run of plain leaves (None, plain scalars,
  // the cached leaf type: nothing that runs user code or makes a Python
  // object) is taken under one critical section of the list, as CPython's
  // own list copy reads a list, and so is the item that ends the run (held,
  // then visited outside the section): one lock per run instead of an
  // atomic read per item, and the same items the GIL build's loop takes,
  // since no code runs within a run. Otherwise (is_leaf, paths, a child
  // past the depth bound, which Visit reports) each item is read as
  // CPython's list iterator reads it (ft::ListItemRef).
  bool VisitList(PyObject* list, int depth) {
#if CPYTREE_FREE_THREADED
    if constexpr (!kHasIsLeaf && !kWithPath) {
      if (!limit_.Exceeded(depth + 1)) return VisitListRuns(list, depth);
    }
#endif
    Mark m = Begin();
    Py_ssize_t i = 0;
#if CPYTREE_FREE_THREADED
    for (PyObject* child; (child = ft::ListItemRef(list, i)) != nullptr; ++i) {
#else
    for (; i < PyList_GET_SIZE(list); ++i) {
      PyObject* child = Py_NewRef(PyList_GET_ITEM(list, i));
#endif
      bool ok = VisitChild(child, depth, [i] { return MakeSequenceKey(i); });
      Py_DECREF(child);
      if (!ok) return false;
    }
    End(m, NodeKind::kList, static_cast<std::size_t>(i));
    return true;
  }

#if CPYTREE_FREE_THREADED
  // VisitList by runs of plain leaves, each under one critical section.
  bool VisitListRuns(PyObject* list, int depth) {
    Mark m = Begin();
    Py_ssize_t i = 0;
    for (;;) {
      PyObject* child = nullptr;
      {
        ft::CriticalSection cs(list);
        PyTypeObject* cached = CachedLeafType();
        for (; i < PyList_GET_SIZE(list); ++i) {
          PyObject* o = PyList_GET_ITEM(list, i);
          PyTypeObject* t = Py_TYPE(o);
          if (o == Py_None || IsPlainScalarLeaf(t) || (t == cached && !PyTuple_Check(o))) {
            AddLeaf(o);  // no Python object made: cannot fail
            continue;
          }
          child = Py_NewRef(o);
          break;
        }
      }
      if (child == nullptr) break;
      bool ok = Visit(child, depth + 1);
      Py_DECREF(child);
      if (!ok) return false;
      ++i;
    }
    End(m, NodeKind::kList, static_cast<std::size_t>(i));
    return true;
  }
#endif

  // Tuples are immutable and their parent holds them: no per-child refs.
  bool VisitTuple(PyObject* tuple, NodeKind kind, int depth) {
    Mark m = Begin();
    PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(tuple));
    if (kind == NodeKind::kNamedTuple) AddItem(cls);
    Ref fields;  // path mode: a namedtuple's _fields, read once per node
    if constexpr (kWithPath) {
      if (kind == NodeKind::kNamedTuple) {
        fields = Ref(FieldsOf(cls));
        if (!fields) return false;
      }
    }
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t i = 0; i < n; ++i) {
      bool ok = VisitChild(PyTuple_GET_ITEM(tuple, i), depth, [&] {
        return kind == NodeKind::kNamedTuple ? MakeFieldKeyAt(fields.get(), i) : MakeSequenceKey(i);
      });
      if (!ok) return false;
    }
    End(m, kind, static_cast<std::size_t>(n));
    return true;
  }

  // Visits pending[base:] (owned snapshot), then drops the snapshot. In
  // path mode, `keys` >= 0 is the index in b_->items of the first dict key
  // (MappingKey); -1 means sequence positions (SequenceKey).
  bool VisitPending(std::size_t base, int depth, std::ptrdiff_t keys = -1) {
    std::size_t n = b_->pending.size() - base;
    for (std::size_t i = 0; i < n; ++i) {
      // By index: the vectors may grow (and move) inside Visit.
      bool ok = VisitChild(b_->pending[base + i], depth, [&] {
        return keys < 0 ? MakeSequenceKey(static_cast<Py_ssize_t>(i))
                        : MakeMappingKey(b_->items[static_cast<std::size_t>(keys) + i]);
      });
      if (!ok) return false;
    }
    ReleaseFrom(&b_->pending, base);
    return true;
  }

  bool VisitDict(PyObject* dict, NodeKind kind, int depth) {
    Mark m = Begin();
    if (kind == NodeKind::kDefaultDict) {
      Ref factory(DefaultFactoryOf(dict));
      if (!factory) return false;
      AddItem(factory.get());
    }
    std::size_t base = b_->pending.size();
    std::ptrdiff_t first_key = static_cast<std::ptrdiff_t>(b_->items.size());
    // The keys go to items for the spec, and for the paths' MappingKeys.
    constexpr bool kKeys = kWithSpec || kWithPath;
    if (!SnapshotDict(dict, kind, kKeys ? &b_->items : nullptr, &b_->pending)) return false;
    std::size_t arity = b_->pending.size() - base;
    if (!VisitPending(base, depth, first_key)) return false;
    if constexpr (!kWithSpec && kWithPath) {
      ReleaseFrom(&b_->items, static_cast<std::size_t>(first_key));
    }
    End(m, kind, arity);
    return true;
  }

  bool VisitDeque(PyObject* deque, int depth) {
    Mark m = Begin();
    Ref maxlen(MaxLenOf(deque));
    if (!maxlen) return false;
    AddItem(maxlen.get());
    std::size_t base = b_->pending.size();
    if (!SnapshotDeque(deque, &b_->pending)) return false;
    std::size_t arity = b_->pending.size() - base;
    if (!VisitPending(base, depth)) return false;
    End(m, NodeKind::kDeque, arity);
    return true;
  }

  // A custom node. torch's tree_flatten_with_path is two traversals: the
  // spec from flatten_fn's children, the (path, leaf) pairs from
  // flatten_with_keys_fn's. Where the two functions give the very same child
  // objects (identity, same order: the functions agree, as torch's contract
  // for flatten_with_keys_fn asks), both traversals visit the same objects
  // and one visit serves both. Otherwise each list is visited on its own
  // (VisitApart), giving torch's results. The spec-less path mode
  // (tree_leaves_with_path) calls flatten_with_keys_fn alone, as torch does.
  bool VisitCustom(PyObject* obj, const Registration* found, int depth) {
    PinnedRegistration pinned(found);  // used after user code below
    const Registration* reg = pinned.get();
    Ref keys, key_children;  // path mode: from flatten_with_keys_fn, private lists
    if constexpr (kWithPath && !kWithSpec) {
      if (!CallFlattenWithKeys(reg, obj, &keys, &key_children)) return false;
      return VisitKeyed(keys.get(), key_children.get(), depth);
    }
    Ref children, context;
    if (!CallCustomFlatten(reg, obj, &children, &context)) return false;
    if constexpr (kWithPath) {
      if (!CallFlattenWithKeys(reg, obj, &keys, &key_children)) return false;
    }
    Mark m = Begin();
    AddItem(reg->type);
    AddItem(context.get());
    if constexpr (kWithPath) {
      Py_ssize_t n = PySequence_Fast_GET_SIZE(children.get());
      if (!SameObjects(children.get(), key_children.get())) {
        return VisitApart(m, children.get(), keys.get(), key_children.get(), depth);
      }
      // Visited from the private list: equal to flatten_fn's when compared.
      if (!VisitKeyed(keys.get(), key_children.get(), depth)) return false;
      End(m, NodeKind::kCustom, static_cast<std::size_t>(n));
      return true;
    }
    PyObject* seq = children.get();
    Py_ssize_t i = 0;
    for (; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      Ref child = Ref::Borrow(PySequence_Fast_ITEMS(seq)[i]);
      if (!Visit(child.get(), depth + 1)) return false;
    }
    End(m, NodeKind::kCustom, static_cast<std::size_t>(i));
    return true;
  }

  // Whether list-or-tuple `a` and list `b` hold the same objects in order.
  static bool SameObjects(PyObject* a, PyObject* b) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    if (n != PyList_GET_SIZE(b)) return false;
    PyObject* const* x = PySequence_Fast_ITEMS(a);
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (x[i] != PyList_GET_ITEM(b, i)) return false;
    }
    return true;
  }

  // Visits the children of flatten_with_keys_fn (private lists of equal
  // length), each with its key on the path.
  bool VisitKeyed(PyObject* keys, PyObject* children, int depth) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(children); ++i) {
      bool ok = VisitChild(PyList_GET_ITEM(children, i), depth, [&] {
        PyObject* key = PyList_GET_ITEM(keys, i);
        Py_INCREF(key);
        return key;
      });
      if (!ok) return false;
    }
    return true;
  }

  // flatten_fn and flatten_with_keys_fn disagree: the spec from flatten_fn's
  // `children` (no paths), the pairs from `key_children` (no spec), as torch's
  // two traversals give them.
  CPYTREE_NOINLINE bool VisitApart(const Mark& m, PyObject* children, PyObject* keys,
                                   PyObject* key_children, int depth) {
    if constexpr (kWithPath && kWithSpec) {
      Flattener<true, kHasIsLeaf, false> spec_only(is_leaf_, b_);
      Py_ssize_t i = 0;
      for (; i < PySequence_Fast_GET_SIZE(children); ++i) {
        Ref child = Ref::Borrow(PySequence_Fast_ITEMS(children)[i]);
        if (!spec_only.Visit(child.get(), depth + 1)) return false;
      }
      Flattener<false, kHasIsLeaf, true> paths_only(is_leaf_, b_, path_);
      if (!paths_only.VisitKeyed(keys, key_children, depth)) return false;
      End(m, NodeKind::kCustom, static_cast<std::size_t>(i));
    }
    return true;
  }

  CPYTREE_NOINLINE bool VisitOther(PyObject* obj, int depth) {
    const Registration* reg = nullptr;
    bool error = false;
    NodeKind kind = Classify(obj, &reg, &error);
    if (error) return false;
    switch (kind) {
      case NodeKind::kLeaf:
        return AddLeaf(obj);
      case NodeKind::kNamedTuple:
        return VisitTuple(obj, kind, depth);
      case NodeKind::kOrderedDict:
      case NodeKind::kDefaultDict:
        return VisitDict(obj, kind, depth);
      case NodeKind::kDeque:
        return VisitDeque(obj, depth);
      case NodeKind::kCustom:
        return VisitCustom(obj, reg, depth);
      default:
        CPYTREE_CHECK(false, false);
    }
  }

  PyObject* is_leaf_;
  TraversalArena* b_;
  DepthBound limit_;
  // Path mode: owned keys from the root to the node; a sub-flattener
  // (VisitApart) shares its starter's.
  std::vector<PyObject*> own_path_;
  std::vector<PyObject*>* path_;
};

template <bool kWithSpec, bool kWithPath = false>
bool Dispatch(PyObject* tree, PyObject* is_leaf, TraversalArena* b) {
  if (is_leaf == nullptr || is_leaf == Py_None) {
    return Flattener<kWithSpec, false, kWithPath>(nullptr, b).Visit(tree, 0);
  }
  return Flattener<kWithSpec, true, kWithPath>(is_leaf, b).Visit(tree, 0);
}

}  // namespace

// The spec of a finished traversal (new reference).
PyObject* FinishSpec(TraversalArena* b) {
  if (b->nodes.size() == 1 && b->nodes[0].kind == NodeKind::kLeaf) {
    Py_INCREF(LeafSpec());
    return LeafSpec();
  }
  return InternArena(b);
}

namespace {

const char* const kTreeArgs[] = {"tree", "is_leaf"};

}  // namespace

bool FlattenInto(PyObject* tree, PyObject* is_leaf, bool with_spec, TraversalArena* b) {
  return with_spec ? Dispatch<true>(tree, is_leaf, b) : Dispatch<false>(tree, is_leaf, b);
}

bool FlattenWithPathInto(PyObject* tree, PyObject* is_leaf, TraversalArena* b) {
  return Dispatch<true, true>(tree, is_leaf, b);
}

bool LeavesWithPathInto(PyObject* tree, PyObject* is_leaf, TraversalArena* b) {
  return Dispatch<false, true>(tree, is_leaf, b);
}

PyObject* PyTreeFlatten(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_flatten", args, nargs, kwnames, kTreeArgs, 2, 1, a)) return nullptr;
  ScratchArena b;
  if (!FlattenInto(a[0], a[1], true, b.get())) return nullptr;
  Ref spec(FinishSpec(b.get()));
  if (!spec) return nullptr;
  Ref leaves(StealIntoList(&b->leaves));
  if (!leaves) return nullptr;
  return PyTuple_Pack(2, leaves.get(), spec.get());
}

PyObject* PyTreeLeaves(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_leaves", args, nargs, kwnames, kTreeArgs, 2, 1, a)) return nullptr;
  ScratchArena b;
  if (!FlattenInto(a[0], a[1], false, b.get())) return nullptr;
  return StealIntoList(&b->leaves);
}

PyObject* PyArgTreeLeaves(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  // The leaves of each positional argument, then of each keyword argument's value.
  Py_ssize_t total = nargs + (kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames));
  ScratchArena b;
  for (Py_ssize_t i = 0; i < total; ++i) {
    if (!FlattenInto(args[i], nullptr, false, b.get())) return nullptr;
  }
  return StealIntoList(&b->leaves);
}

PyObject* PyTreeStructure(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_structure", args, nargs, kwnames, kTreeArgs, 2, 1, a)) return nullptr;
  ScratchArena b;
  if (!FlattenInto(a[0], a[1], true, b.get())) return nullptr;
  return FinishSpec(b.get());
}

PyObject* PyTreeIsLeaf(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* a[2] = {nullptr, nullptr};
  if (!ParseArgs("tree_is_leaf", args, nargs, kwnames, kTreeArgs, 2, 1, a)) return nullptr;
  if (a[1] != nullptr && a[1] != Py_None) {
    Ref r(PyObject_CallOneArg(a[1], a[0]));
    if (!r) return nullptr;
    int truth = PyObject_IsTrue(r.get());
    if (truth < 0) return nullptr;
    if (truth) Py_RETURN_TRUE;
  }
  const Registration* reg = nullptr;
  bool error = false;
  NodeKind kind = KindOf(a[0], &reg, &error);
  if (kind == NodeKind::kCustom) EndRegistryRead();  // only the kind is read (registry.h)
  if (error) return nullptr;
  return PyBool_FromLong(kind == NodeKind::kLeaf);
}

}  // namespace cpytree
