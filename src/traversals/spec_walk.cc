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

#include "base/args.h"
#include "base/ft.h"
#include "ground/children.h"
#include "ground/errors.h"
#include "ground/intern.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/spec_model.h"
#include "traversals/flatten.h"

namespace cpytree {
namespace {

enum class Walk { kStrict, kUpTo, kFx };

// What getting the children of a non-leaf node against its spec node did.
enum class Children {
  kFailed,   // an exception is set, or a mismatch is recorded in the PathError
  kHeld,     // the children are held on the walk's stack, to be visited
  kHandled,  // the subtree was handled whole (fx: its leaves already appended)
};

template <Walk kMode>
class SpecFlattener {
  static constexpr bool kStrict = kMode == Walk::kStrict;

 public:
  // `scratch` lends its (empty) arrays as the walk's stacks: no allocation per
  // call once the per-thread arena has grown.
  SpecFlattener(SpecView v, PyObject* registry, std::vector<PyObject*>* out,
                TraversalArena* scratch)
      : v_(v),
        registry_(registry),
        out_(out),
        held_(scratch->pending),
        idx_(scratch->indices),
        keys_(scratch->keys),
        limit_(DepthLimit()) {}
  ~SpecFlattener() {
    if (!MayReleaseInDestructor()) return;  // a daemon thread torn down at exit (common.h)
    ReleaseFrom(&held_, 0);
    ReleaseFrom(&keys_, 0);
    idx_.clear();
  }

  // After a failed Visit: raises the pending mismatch, if that was the cause.
  void RaisePending() { err_.Raise(); }

  bool Visit(std::int64_t i, PyObject* node, int depth) {
    const Node& s = v_.nodes[i];
    if (s.kind == NodeKind::kLeaf) {
      if constexpr (kStrict) {
        if (!IsLeafObject(node)) return NotALeaf(node);
      }
      Py_INCREF(node);
      out_->push_back(node);
      return true;
    }
    if (limit_.Exceeded(depth)) {
      RaiseDepthError("pytree flatten against a spec", limit_.Reached(depth));
      return false;
    }
    if constexpr (kMode != Walk::kFx) {
      // Exact builtins of the spec's kind walk the container directly (both
      // modes check the same things there).
      PyTypeObject* t = Py_TYPE(node);
      if (s.kind == NodeKind::kTuple && t == &PyTuple_Type) {
        return kStrict ? VisitTupleInline(i, node, depth) : VisitTuple(i, node, depth);
      }
      if (s.kind == NodeKind::kNamedTuple &&
          reinterpret_cast<PyObject*>(t) == v_.items[s.ctx]) {  // the spec's very class
        return VisitTuple(i, node, depth);
      }
      if (s.kind == NodeKind::kOrderedDict &&
          reinterpret_cast<PyObject*>(t) == g_builtins.ordered_dict &&
          internal_odict::LayoutVerified()) {
        // The same keys in the same order (by identity): values without a
        // key snapshot; anything else takes the general path below.
        std::size_t base = held_.size();
        KeyOrder order = internal_odict::SnapshotIfKeys(node, v_.items + s.ctx, s.arity, &held_);
        if (order == KeyOrder::kError) return false;
        if (order == KeyOrder::kSame) return VisitHeld(i, base, depth);
      }
      if (s.kind == NodeKind::kList && t == &PyList_Type) return VisitList(i, node, depth);
      if (s.kind == NodeKind::kDict && t == &PyDict_Type) {
#if CPYTREE_FREE_THREADED
        bool different = false;  // up-to: other keys or order, nothing visited
        bool ok = VisitDictSnapshot(i, node, depth, &different);
        if (!different) return ok;
#else
        // Strict checks each key as it goes; up-to must know first whether
        // the keys are in the spec's order (else it matches by key set).
        if constexpr (kStrict) return VisitDict(i, node, depth);
        KeyOrder order = SameKeysInOrder(s, node);
        if (order == KeyOrder::kError) return false;
        if (order == KeyOrder::kSame) return VisitDict(i, node, depth);
#endif
      }
    }
    std::size_t base = held_.size();
    Children got;
    if constexpr (kMode == Walk::kStrict) {
      got = StrictChildren(i, node);
    } else if constexpr (kMode == Walk::kUpTo) {
      got = UpToChildren(i, node);
    } else {
      got = FxChildren(i, node, depth);
    }
    if (got != Children::kHeld) return got == Children::kHandled;
    return VisitHeld(i, base, depth);
  }

 private:
  // The one item of `node` (borrowed) when it is an exact list or tuple of
  // size 1 for a list or tuple spec node of arity 1, else null. Free-threaded
  // builds: tuples only (a list's item is read under its lock, VisitList).
  static PyObject* OneItemOf(const Node& s, PyObject* node) {
    PyTypeObject* t = Py_TYPE(node);
    if (s.kind == NodeKind::kTuple && t == &PyTuple_Type && PyTuple_GET_SIZE(node) == 1) {
      return PyTuple_GET_ITEM(node, 0);
    }
#if !CPYTREE_FREE_THREADED
    if (s.kind == NodeKind::kList && t == &PyList_Type && PyList_GET_SIZE(node) == 1) {
      return PyList_GET_ITEM(node, 0);
    }
#endif
    return nullptr;
  }

  // Whether spec node s (at i) has one child, not a leaf (the chain's start;
  // a leaf child takes the leaf-items path).
  bool OneContainerChild(const Node& s, std::int64_t i) const {
    return s.arity == 1 && v_.nodes[i - 1].kind != NodeKind::kLeaf;
  }

  // A chain of one-item lists or tuples (`t = [t]` nested), from spec node i
  // whose node's one item (OneItemOf) is `item`: walked in a loop, not a
  // call per level (both modes check only the exact type and size there).
  // No user code runs in the loop, so each item stays held by its parent;
  // the node where the chain ends is held, then visited as usual. The depth
  // limit is checked at every level, as Visit would.
  CPYTREE_NOINLINE bool VisitChain(std::int64_t i, PyObject* item, int depth) {
    const int top = depth;
    PyObject* node;
    do {
      node = item;
      --i;  // the one child of a post-order node is the node before it
      ++depth;
      if (v_.nodes[i].arity != 1) break;
      item = OneItemOf(v_.nodes[i], node);
      if (item != nullptr && limit_.Exceeded(depth)) {
        RaiseDepthError("pytree flatten against a spec", limit_.Reached(depth));
        return false;
      }
    } while (item != nullptr);
    Ref held = Ref::Borrow(node);
    if (Visit(i, node, depth)) return true;
    for (int d = 1; d <= depth - top; ++d) err_.AddParent(v_.nodes[i + d].kind, 0, nullptr);
    return false;
  }

  // Visits the children of spec node i held in held_[base:], then drops them.
  bool VisitHeld(std::int64_t i, std::size_t base, int depth) {
    const Node& s = v_.nodes[i];
    std::size_t ibase = PushChildren(i);
    PyObject* const* items = v_.items + s.ctx;
    for (std::size_t k = 0; k < s.arity; ++k) {
      if (!Visit(ChildAt(i, ibase, k), held_[base + k], depth + 1)) {
        err_.AddParent(s.kind, static_cast<Py_ssize_t>(k), KeyOf(s, items, k));
        return false;
      }
    }
    ReleaseFrom(&held_, base);
    idx_.resize(ibase);
    return true;
  }

  // Pushes the child indices of spec node i on idx_ (a stack shared by all
  // levels: no allocation per node) when it has more than two children;
  // ChildAt computes those of one or two children (most nodes) directly.
  // Returns the base. Stored last child first (push_back, no zero-fill):
  // child k of the node is at idx_[ibase + arity - 1 - k], see ChildAt.
  std::size_t PushChildren(std::int64_t i) {
    std::size_t ibase = idx_.size();
    if (v_.nodes[i].arity <= 2) return ibase;
    internal::ForEachChildReversed(v_.nodes, i, [&](std::int64_t c) { idx_.push_back(c); });
    return ibase;
  }
  // Child k of spec node i, whose children PushChildren pushed at ibase.
  std::int64_t ChildAt(std::int64_t i, std::size_t ibase, std::uint32_t k) const {
    std::uint32_t arity = v_.nodes[i].arity;
    if (arity <= 2) {  // post-order: the last child is node i - 1
      return k + 1 == arity ? i - 1 : i - 1 - v_.nodes[i - 1].num_nodes;
    }
    return idx_[ibase + arity - 1 - k];
  }

  // Visits child k of spec node i; on failure records the key-path step.
  bool VisitChild(std::int64_t i, std::size_t k, std::int64_t c, PyObject* child, int depth) {
    // A leaf child inline: most children are leaves, and this skips a call.
    if (v_.nodes[c].kind == NodeKind::kLeaf && (!kStrict || IsPlainLeafType(child))) {
      Py_INCREF(child);
      out_->push_back(child);
      return true;
    }
    if (Visit(c, child, depth + 1)) return true;
    const Node& s = v_.nodes[i];
    err_.AddParent(s.kind, static_cast<Py_ssize_t>(k), KeyOf(s, v_.items + s.ctx, k));
    return false;
  }

  // Whether every child of spec node s is a leaf: one node per child (so
  // child k is node i - arity + k, with no child-index stack) and one leaf
  // per child (an empty container is one node too, with no leaf).
  static bool AllChildrenLeaves(const Node& s) {
    return s.num_nodes == static_cast<std::int64_t>(s.arity) + 1 &&
           s.num_leaves == static_cast<std::int64_t>(s.arity);
  }

  // The items of a list or tuple (of the spec's arity) whose spec children
  // are all leaves: the flat argument list of every compiled-graph call.
  // Plain leaves (checked without running user code) are taken in a tight
  // loop, with no per-child reference or call; any other child takes
  // VisitChild, which may run user code (is_leaf checks of a new type), so
  // a list's size and item array are read again on every step.
  template <bool kList>
  bool VisitLeafItems(std::int64_t i, PyObject* seq, int depth) {
    const Node& s = v_.nodes[i];
    std::int64_t first = i - static_cast<std::int64_t>(s.arity);
    // No reserve here (WalkInto reserved for the whole walk): one of the
    // exact arity per list reallocated and copied the output every time.
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      if (kList && k >= PyList_GET_SIZE(seq)) return Arity(s, PyList_GET_SIZE(seq));
      PyObject* child = kList ? PyList_GET_ITEM(seq, k) : PyTuple_GET_ITEM(seq, k);
      if (!kStrict || IsPlainLeafType(child)) {
        Py_INCREF(child);
        out_->push_back(child);
        continue;
      }
      Ref held = Ref::Borrow(child);
      if (!VisitChild(i, k, first + k, held.get(), depth)) return false;
    }
    return true;
  }

  // Out of line for up-to mode; strict mode inlines its body into Visit
  // (VisitTupleInline): one C frame per tuple level on deep trees (returns
  // past the CPU's return-address stack mispredict), while up-to mode keeps
  // Visit small enough for the output's push_back to stay inline.
  bool VisitTuple(std::int64_t i, PyObject* tuple, int depth) {
    return VisitTupleInline(i, tuple, depth);
  }
  __attribute__((always_inline)) bool VisitTupleInline(std::int64_t i, PyObject* tuple,
                                                       int depth) {
    const Node& s = v_.nodes[i];
    if (PyTuple_GET_SIZE(tuple) != s.arity) return Arity(s, PyTuple_GET_SIZE(tuple));
    if (s.kind == NodeKind::kTuple && OneContainerChild(s, i)) {
      return VisitChain(i, PyTuple_GET_ITEM(tuple, 0), depth);
    }
    if (AllChildrenLeaves(s)) return VisitLeafItems<false>(i, tuple, depth);
    std::size_t ibase = PushChildren(i);
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      // A tuple is immutable and held by its parent: no per-child reference.
      if (!VisitChild(i, k, ChildAt(i, ibase, k), PyTuple_GET_ITEM(tuple, k), depth))
        return false;
    }
    idx_.resize(ibase);
    return true;
  }

  bool VisitList(std::int64_t i, PyObject* list, int depth) {
    const Node& s = v_.nodes[i];
#if CPYTREE_FREE_THREADED
    // One state of the list (another thread may resize it), read under its
    // critical section as CPython's list copy reads it: the items held, then
    // visited with a tuple's checks and messages, none under the section.
    std::size_t base = held_.size();
    Py_ssize_t n;
    {
      ft::CriticalSection cs(list);
      n = PyList_GET_SIZE(list);
      if (n == static_cast<Py_ssize_t>(s.arity)) {
        PyObject* const* items = reinterpret_cast<PyListObject*>(list)->ob_item;
        if (!kStrict && AllChildrenLeaves(s)) {  // up-to takes leaf children unchecked
          for (Py_ssize_t k = 0; k < n; ++k) out_->push_back(Py_NewRef(items[k]));
          return true;
        }
        for (Py_ssize_t k = 0; k < n; ++k) Hold(items[k]);
      }
    }
    if (n != static_cast<Py_ssize_t>(s.arity)) return Arity(s, n);
    return VisitHeld(i, base, depth);
#else
    if (PyList_GET_SIZE(list) != s.arity) return Arity(s, PyList_GET_SIZE(list));
    if (OneContainerChild(s, i)) return VisitChain(i, PyList_GET_ITEM(list, 0), depth);
    if (AllChildrenLeaves(s)) return VisitLeafItems<true>(i, list, depth);
    std::size_t ibase = PushChildren(i);
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      // User code below (custom flatten) may shrink the list: re-check.
      if (k >= PyList_GET_SIZE(list)) return Arity(s, PyList_GET_SIZE(list));
      Ref child = Ref::Borrow(PyList_GET_ITEM(list, k));
      if (!VisitChild(i, k, ChildAt(i, ibase, k), child.get(), depth)) return false;
    }
    idx_.resize(ibase);
    return true;
#endif
  }

#if CPYTREE_FREE_THREADED
  // Free-threaded builds: an exact dict for a dict spec node, on one
  // snapshot of it taken under its lock (keys on keys_, values on held_;
  // user __eq__ and the children's visits run outside the lock), with the
  // checks of the GIL build's VisitDict. Up-to mode first compares all keys
  // in order (SameKeysInOrder); if they differ it visits nothing and sets
  // *different: the general path decides (key sets).
  bool VisitDictSnapshot(std::int64_t i, PyObject* dict, int depth, bool* different) {
    const Node& s = v_.nodes[i];
    std::size_t kbase = keys_.size(), base = held_.size();
    SnapshotDict(dict, NodeKind::kDict, &keys_, &held_);  // an exact dict: cannot fail
    std::size_t n = keys_.size() - kbase;
    PyObject* const* expected = v_.items + s.ctx;
    if (n != s.arity) {
      if constexpr (kStrict) return Fail(DictKeysMismatchMessage(expected, s.arity, dict));
      *different = true;
    }
    if constexpr (!kStrict) {
      for (std::uint32_t k = 0; !*different && k < s.arity; ++k) {
        if (keys_[kbase + k] == expected[k]) continue;
        int eq = PyObject_RichCompareBool(keys_[kbase + k], expected[k], Py_EQ);
        if (eq < 0) return false;
        *different = eq == 0;
      }
      ReleaseFrom(&keys_, kbase);
      if (*different) {
        ReleaseFrom(&held_, base);
        return false;
      }
      return VisitHeld(i, base, depth);
    }
    std::size_t ibase = PushChildren(i);
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      if (keys_[kbase + k] != expected[k]) {
        int eq = PyObject_RichCompareBool(keys_[kbase + k], expected[k], Py_EQ);
        if (eq < 0) return false;
        if (eq == 0) return Fail(DictKeysMismatchMessage(expected, s.arity, dict));
      }
      // By index: the stacks may grow (and move) inside the visit.
      if (!VisitChild(i, k, ChildAt(i, ibase, k), held_[base + k], depth)) return false;
    }
    idx_.resize(ibase);
    ReleaseFrom(&held_, base);
    ReleaseFrom(&keys_, kbase);
    return true;
  }
#endif

  // Whether the exact dict's keys are the spec's, in order (== after
  // identity): kSame, kDifferent or kError. GIL builds (free-threaded:
  // VisitDictSnapshot).
  KeyOrder SameKeysInOrder(const Node& s, PyObject* dict) {
    if (PyDict_GET_SIZE(dict) != s.arity) return KeyOrder::kDifferent;
    PyObject* const* expected = v_.items + s.ctx;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    for (std::uint32_t k = 0; PyDict_Next(dict, &pos, &key, &value); ++k) {
      if (k >= s.arity) return KeyOrder::kDifferent;
      if (key == expected[k]) continue;
      Ref held_key = Ref::Borrow(key);
      int eq = PyObject_RichCompareBool(key, expected[k], Py_EQ);
      if (eq < 0) return KeyOrder::kError;
      if (eq == 0) return KeyOrder::kDifferent;
    }
    return KeyOrder::kSame;
  }

  // An exact dict for a dict spec node. Strict mode checks each key here;
  // up-to mode comes here only after SameKeysInOrder.
  bool VisitDict(std::int64_t i, PyObject* dict, int depth) {
    const Node& s = v_.nodes[i];
    if (PyDict_GET_SIZE(dict) != s.arity) {
      return kStrict ? Fail(DictKeysMismatchMessage(v_.items + s.ctx, s.arity, dict))
                     : Arity(s, PyDict_GET_SIZE(dict));
    }
    PyObject* const* expected = v_.items + s.ctx;
    std::size_t ibase = PushChildren(i);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      // User code below may have changed the dict: then it is a mismatch.
      if (!PyDict_Next(dict, &pos, &key, &value) || PyDict_GET_SIZE(dict) != s.arity) {
        return Arity(s, PyDict_GET_SIZE(dict));
      }
      if (kStrict && key != expected[k]) {
        Ref held_key = Ref::Borrow(key);
        int eq = PyObject_RichCompareBool(key, expected[k], Py_EQ);
        if (eq < 0) return false;
        if (eq == 0) return Fail(DictKeysMismatchMessage(expected, s.arity, dict));
      }
      Ref child = Ref::Borrow(value);
      if (!VisitChild(i, k, ChildAt(i, ibase, k), child.get(), depth)) return false;
    }
    idx_.resize(ibase);
    return true;
  }

  // Leaves recognised without the registry: None, plain scalars and the type
  // the leaf cache holds (IsLeafObject decides the rest).
  static bool IsPlainLeafType(PyObject* node) {
    PyTypeObject* t = Py_TYPE(node);
    return node == Py_None || IsPlainScalarLeaf(t) || (!PyTuple_Check(node) && IsCachedLeafType(t));
  }

  static bool IsLeafObject(PyObject* node) {
    const Registration* reg = nullptr;
    bool error = false;
    NodeKind kind = KindOf(node, &reg, &error);
    if (kind == NodeKind::kCustom) EndRegistryRead();  // only the kind is read (registry.h)
    return kind == NodeKind::kLeaf && !error;
  }

  // Records a mismatch whose message (errors.h) is `message`; null if building
  // it raised (that exception then propagates). Always false / kFailed.
  CPYTREE_NOINLINE bool Fail(PyObject* message) { return err_.Set(message); }
  Children Mismatch(PyObject* message) {
    Fail(message);
    return Children::kFailed;
  }
  // kHeld when a helper that holds the children (or checks them) succeeded.
  static Children HeldIf(bool ok) { return ok ? Children::kHeld : Children::kFailed; }

  // The key-path step to child k of spec node s (a spec item, borrowed).
  static PyObject* KeyOf(const Node& s, PyObject* const* items, std::size_t k) {
    return IsDictKind(s.kind)                ? items[FirstKeyItem(s.kind) + k]
           : s.kind == NodeKind::kNamedTuple ? items[0]
                                             : nullptr;
  }

  CPYTREE_NOINLINE bool NotALeaf(PyObject* node) {
    if (PyErr_Occurred()) return false;
    return Fail(NotALeafMessage(reinterpret_cast<PyObject*>(Py_TYPE(node))));
  }

  void Hold(PyObject* borrowed) {
    Py_INCREF(borrowed);
    held_.push_back(borrowed);
  }

  // Strict: the node must be of the spec's kind, arity and context. kHeld
  // with the children held, else kFailed.
  Children StrictChildren(std::int64_t i, PyObject* node) {
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
  bool DictChildren(const Node& s, PyObject* const* items, PyObject* node) {
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
        int eq = PyObject_RichCompareBool(keys[k], expected[k], Py_EQ);
        if (eq < 0) ok = false;
        if (eq == 0) ok = Fail(KeysMismatchMessage(expected, s.arity, keys, n));
      }
    }
    ReleaseFrom(&keys_, kbase);
    if (!ok) ReleaseFrom(&held_, base);
    return ok;
  }

  CPYTREE_NOINLINE Children TypeMismatch(std::int64_t i, PyObject* node) {
    Ref spec_type(NodeType(v_, i));
    if (!spec_type) return Children::kFailed;
    if (v_.nodes[i].kind == NodeKind::kNamedTuple)
      spec_type = Ref::Borrow(v_.items[v_.nodes[i].ctx]);
    PyObject* got = reinterpret_cast<PyObject*>(Py_TYPE(node));
    return Mismatch(TypeMismatchMessage(spec_type.get(), got));
  }

  // Records the arity mismatch of spec node s. Always false.
  CPYTREE_NOINLINE bool Arity(const Node& s, Py_ssize_t got) {
    return Fail(ArityMismatchMessage(s.arity, got));
  }

  // True if equal; false with the context mismatch recorded, or on error.
  bool ContextEqual(PyObject* expected, PyObject* got, const char* what = "context") {
    if (expected == got) return true;
    int eq = PyObject_RichCompareBool(expected, got, Py_EQ);
    if (eq != 0) return eq > 0;
    return Fail(ContextMismatchMessage(what, expected, got));
  }

  // The type torch's _get_node_type reports for `node` (borrowed).
  static PyObject* NodeTypeOf(PyObject* node, NodeKind kind) {
    return kind == NodeKind::kNamedTuple ? g_builtins.namedtuple_fn
                                         : reinterpret_cast<PyObject*>(Py_TYPE(node));
  }

  // Up-to: appends node's children (owned) to held_, checked against spec
  // node i with torch's flatten_up_to rules. kHeld, else kFailed.
  Children UpToChildren(std::int64_t i, PyObject* node) {
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
  bool HoldAll(PyObject* seq) {
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
  bool KeySetChildren(const Node& s, PyObject* const* keys, PyObject* node) {
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

  // fx rules. kHandled when the subtree was handled whole (its leaves
  // appended).
  Children FxChildren(std::int64_t i, PyObject* node, int depth) {
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

  CPYTREE_NOINLINE Children FxOther(std::int64_t i, PyObject* node, int depth) {
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
  CPYTREE_NOINLINE Children FxShortChildren(std::int64_t i, PyObject* seq, int depth) {
    std::vector<std::int64_t> idx;
    internal::ChildIndices(v_.nodes, i, &idx);
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); ++k) {
      Ref child = Ref::Borrow(PySequence_Fast_ITEMS(seq)[k]);  // the visit may mutate seq
      if (!Visit(idx[k], child.get(), depth + 1)) return Children::kFailed;
    }
    return Children::kHandled;
  }

  SpecView v_;
  PyObject* registry_;
  std::vector<PyObject*>* out_;
  std::vector<PyObject*>& held_;    // owned children snapshots, a stack by level
  std::vector<std::int64_t>& idx_;  // child indices of the nodes being visited
  std::vector<PyObject*>& keys_;    // dicts' keys, a stack by level (free-threaded strict walks)
  PathError err_;                   // a mismatch and its key path, collected while unwinding
  DepthBound limit_;
};

template <Walk kMode>
bool WalkInto(SpecView v, PyObject* tree, PyObject* registry, std::vector<PyObject*>* out,
              TraversalArena* scratch) {
  SpecFlattener<kMode> f(v, registry, out, scratch);
  // One allocation for what a match appends: a leaf per spec leaf.
  out->reserve(out->size() + static_cast<std::size_t>(v.nodes[v.root_index()].num_leaves));
  bool ok = f.Visit(v.root_index(), tree, 0);
  if (!ok) f.RaisePending();
  return ok;
}

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
PyObject* FlattenAgainst(PyObject* spec, PyObject* tree, PyObject* registry) {
  if constexpr (kMode != Walk::kFx) {
    PyObject* flat = FlatLeaves(ViewOf(reinterpret_cast<TreeSpecObject*>(spec)), tree);
    if (flat != nullptr || PyErr_Occurred()) return flat;
  }
  ScratchArena b;
  std::vector<PyObject*>* out = &b->leaves;  // released by ~ScratchArena on error
  if (!WalkInto<kMode>(ViewOf(reinterpret_cast<TreeSpecObject*>(spec)), tree, registry, out,
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
  return FlattenAgainst<Walk::kStrict>(spec, tree, nullptr);
}

PyObject* SpecFlattenUpTo(PyObject* spec, PyObject* tree) {
  return FlattenAgainst<Walk::kUpTo>(spec, tree, nullptr);
}

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
  return FlattenAgainst<Walk::kFx>(spec.get(), a[0], a[2]);
}

}  // namespace cpytree
