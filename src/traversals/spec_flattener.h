// The walk of a tree against a known spec, shared by its three modes
// (spec_walk.cc: strict and up-to; spec_walk_fx.cc: fx). Not API: included
// only by those two files, each of which instantiates its own modes.
//
//   ScratchArena b;
//   bool ok = WalkInto<Walk::kStrict>(view, tree, nullptr, &b->leaves, b.get());
#ifndef CPYTREE_SRC_TRAVERSALS_SPEC_FLATTENER_H_
#define CPYTREE_SRC_TRAVERSALS_SPEC_FLATTENER_H_

#include <vector>

#include "base/args.h"
#include "base/ft.h"
#include "base/key_equal.h"
#include "ground/children.h"
#include "ground/errors.h"
#include "ground/intern.h"
#include "ground/registry.h"
#include "ground/spec_object.h"
#include "spec_model/spec_model.h"
#include "traversals/flatten.h"

namespace cpytree {
// Unnamed, as when the walk was one file: each including file gets its own
// copy with internal linkage, and so the inliner's choices of that file (a
// named namespace cost deep-200 flatten-spec 53.2k -> 56.8k instructions).
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

  // Visits spec node i against `node`: a dispatch on the spec node's kind and
  // the node's exact type that sets up no frame (every call here is a jump)
  // to each kind's visit, out of line too. A level of a deep tree so costs
  // one small C frame, its container's visit (128 bytes for a list or tuple,
  // 192 for a dict, GCC 12 -O3). With everything inlined here one frame was
  // 256 bytes a level, and a 200-deep walk's stack spilled past the 32 KB L1
  // data cache (docs/measurements.md, "The spec walk's stack").
  CPYTREE_NOINLINE bool Visit(std::int64_t i, PyObject* node, int depth) {
    if (v_.nodes[i].kind == NodeKind::kLeaf) return VisitLeaf(node);
    // Past the depth that needs no check: the check out of line, so that
    // Visit makes no call that returns to it (it sets up no frame).
    if (CPYTREE_UNLIKELY(depth > limit_.unchecked)) return VisitDeep(i, node, depth);
    return Dispatch(i, node, depth);
  }

 private:
  // The visit of non-leaf spec node i by the node's exact type.
  __attribute__((always_inline)) bool Dispatch(std::int64_t i, PyObject* node, int depth) {
    if constexpr (kMode != Walk::kFx) {
      // Exact builtins of the spec's kind walk the container directly (both
      // modes check the same things there).
      const Node& s = v_.nodes[i];
      PyTypeObject* t = Py_TYPE(node);
      if (s.kind == NodeKind::kTuple && t == &PyTuple_Type) return VisitTuple(i, node, depth);
      if (s.kind == NodeKind::kNamedTuple &&
          reinterpret_cast<PyObject*>(t) == v_.items[s.ctx]) {  // the spec's very class
        return VisitTuple(i, node, depth);
      }
      if (s.kind == NodeKind::kOrderedDict &&
          reinterpret_cast<PyObject*>(t) == g_builtins.ordered_dict &&
          internal_odict::LayoutVerified()) {
        return VisitOrderedDict(i, node, depth);
      }
      if (s.kind == NodeKind::kList && t == &PyList_Type) return VisitList(i, node, depth);
      if (s.kind == NodeKind::kDict && t == &PyDict_Type) return VisitExactDict(i, node, depth);
    }
    return VisitOther(i, node, depth);
  }

  CPYTREE_NOINLINE bool VisitDeep(std::int64_t i, PyObject* node, int depth) {
    if (limit_.Exceeded(depth)) return DepthExceeded(depth);
    return Dispatch(i, node, depth);
  }

  // Everything but the exact builtins above: the per-mode children, held,
  // then visited.
  CPYTREE_NOINLINE bool VisitOther(std::int64_t i, PyObject* node, int depth) {
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

  // An exact OrderedDict: the same keys in the same order (by identity)
  // visits the values without a key snapshot; anything else takes the
  // general path.
  CPYTREE_NOINLINE bool VisitOrderedDict(std::int64_t i, PyObject* node, int depth) {
    const Node& s = v_.nodes[i];
    std::size_t base = held_.size();
    KeyOrder order = internal_odict::SnapshotIfKeys(node, v_.items + s.ctx, s.arity, &held_);
    if (order == KeyOrder::kError) return false;
    if (order == KeyOrder::kSame) return VisitHeld(i, base, depth);
    return VisitOther(i, node, depth);
  }

  // An exact dict for a dict spec node.
  CPYTREE_NOINLINE bool VisitExactDict(std::int64_t i, PyObject* node, int depth) {
#if CPYTREE_FREE_THREADED
    bool different = false;  // up-to: other keys or order, nothing visited
    bool ok = VisitDictSnapshot(i, node, depth, &different);
    if (!different) return ok;
#else
    // Strict checks each key as it goes; up-to must know first whether
    // the keys are in the spec's order (else it matches by key set).
    if constexpr (kStrict) return VisitDict(i, node, depth);
    KeyOrder order = SameKeysInOrder(v_.nodes[i], node);
    if (order == KeyOrder::kError) return false;
    if (order == KeyOrder::kSame) return VisitDict(i, node, depth);
#endif
    return VisitOther(i, node, depth);
  }

  // Appends `o` (a reference the caller gives) to `v`. Not
  // v->push_back(Py_NewRef(x)) at the call sites: GCC 12 compiles that (the
  // rvalue overload) into a walk of 52.9k instructions on deep-200 against
  // 49.1k this way.
  static void Append(std::vector<PyObject*>* v, PyObject* o) { v->push_back(o); }

  // A leaf of the spec. Out of line: push_back takes its argument's address,
  // and GCC makes no tail call from a function whose locals escape (Visit's
  // calls of the visits must be jumps: it then sets up no frame).
  CPYTREE_NOINLINE bool VisitLeaf(PyObject* node) {
    if constexpr (kStrict) {
      if (!IsLeafObject(node)) return NotALeaf(node);
    }
    Append(out_, Py_NewRef(node));
    return true;
  }

  CPYTREE_NOINLINE bool DepthExceeded(int depth) {
    RaiseDepthError("pytree flatten against a spec", limit_.Reached(depth));
    return false;
  }

  // Records the step from spec node i to its failed child k (while
  // unwinding). Always false.
  CPYTREE_NOINLINE bool ChildFailed(std::int64_t i, std::size_t k) {
    const Node& s = v_.nodes[i];
    err_.AddParent(s.kind, static_cast<Py_ssize_t>(k), KeyOf(s, v_.items + s.ctx, k));
    return false;
  }

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
      if (item != nullptr && limit_.Exceeded(depth)) return DepthExceeded(depth);
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
    for (std::size_t k = 0; k < s.arity; ++k) {
      if (!Visit(ChildAt(i, ibase, k), held_[base + k], depth + 1)) return ChildFailed(i, k);
    }
    ReleaseFrom(&held_, base);
    PopChildren(i, ibase);
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
  // Drops what PushChildren(i) pushed (nothing for two children or fewer).
  void PopChildren(std::int64_t i, std::size_t ibase) {
    if (v_.nodes[i].arity > 2) idx_.resize(ibase);
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
      Append(out_, Py_NewRef(child));
      return true;
    }
    return Visit(c, child, depth + 1) || ChildFailed(i, k);
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
        Append(out_, Py_NewRef(child));
        continue;
      }
      Ref held = Ref::Borrow(child);
      if (!VisitChild(i, k, first + k, held.get(), depth)) return false;
    }
    return true;
  }

  // The visits of one container kind, out of line (see Visit).
  CPYTREE_NOINLINE bool VisitTuple(std::int64_t i, PyObject* tuple, int depth) {
    const Node& s = v_.nodes[i];
    if (PyTuple_GET_SIZE(tuple) != s.arity) return Arity(s, PyTuple_GET_SIZE(tuple));
    if (s.kind == NodeKind::kTuple && OneContainerChild(s, i)) {
      return VisitChain(i, PyTuple_GET_ITEM(tuple, 0), depth);
    }
    if (AllChildrenLeaves(s)) return VisitLeafItems<false>(i, tuple, depth);
    std::size_t ibase = PushChildren(i);
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      // A tuple is immutable and held by its parent: no per-child reference.
      if (!VisitChild(i, k, ChildAt(i, ibase, k), PyTuple_GET_ITEM(tuple, k), depth)) return false;
    }
    PopChildren(i, ibase);
    return true;
  }

  CPYTREE_NOINLINE bool VisitList(std::int64_t i, PyObject* list, int depth) {
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
          for (Py_ssize_t k = 0; k < n; ++k) Append(out_, Py_NewRef(items[k]));
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
    PopChildren(i, ibase);
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
        int eq = KeyEquals(keys_[kbase + k], expected[k]);
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
      if (keys_[kbase + k] != expected[k] &&
          !KeyMatches(keys_[kbase + k], expected, s.arity, k, dict)) {
        return false;
      }
      // By index: the stacks may grow (and move) inside the visit.
      if (!VisitChild(i, k, ChildAt(i, ibase, k), held_[base + k], depth)) return false;
    }
    PopChildren(i, ibase);
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
      int eq = KeyEquals(key, expected[k]);
      if (eq < 0) return KeyOrder::kError;
      if (eq == 0) return KeyOrder::kDifferent;
    }
    return KeyOrder::kSame;
  }

  // Strict: whether `key` (of `dict`, at position k) == expected[k], which it
  // is not by identity; else the mismatch is recorded, or an error set. Out
  // of line (user __eq__, the message): VisitDict's frame is a deep walk's.
  CPYTREE_NOINLINE bool KeyMatches(PyObject* key, PyObject* const* expected, std::uint32_t arity,
                                   std::uint32_t k, PyObject* dict) {
    Ref held_key = Ref::Borrow(key);
    int eq = KeyEquals(key, expected[k]);
    if (eq < 0) return false;
    return eq > 0 || Fail(DictKeysMismatchMessage(expected, arity, dict));
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
      if (kStrict && key != expected[k] && !KeyMatches(key, expected, s.arity, k, dict)) {
        return false;
      }
      Ref child = Ref::Borrow(value);
      if (!VisitChild(i, k, ChildAt(i, ibase, k), child.get(), depth)) return false;
    }
    PopChildren(i, ibase);
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

  void Hold(PyObject* borrowed) { Append(&held_, Py_NewRef(borrowed)); }

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

  // Off the exact-builtin paths, the children of a node per mode: strict
  // and up-to in spec_walk.cc, fx in spec_walk_fx.cc (each mode's walk is
  // instantiated in its own file only).
  Children StrictChildren(std::int64_t i, PyObject* node);
  bool DictChildren(const Node& s, PyObject* const* items, PyObject* node);
  CPYTREE_NOINLINE Children TypeMismatch(std::int64_t i, PyObject* node);
  static PyObject* NodeTypeOf(PyObject* node, NodeKind kind);
  Children UpToChildren(std::int64_t i, PyObject* node);
  bool HoldAll(PyObject* seq);
  bool KeySetChildren(const Node& s, PyObject* const* keys, PyObject* node);
  Children FxChildren(std::int64_t i, PyObject* node, int depth);
  CPYTREE_NOINLINE Children FxOther(std::int64_t i, PyObject* node, int depth);
  CPYTREE_NOINLINE Children FxShortChildren(std::int64_t i, PyObject* seq, int depth);

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

}  // namespace
}  // namespace cpytree

#endif  // CPYTREE_SRC_TRAVERSALS_SPEC_FLATTENER_H_
