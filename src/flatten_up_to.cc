// TreeSpec.flatten_up_to(tree): the subtrees of `tree` at the spec's leaves,
// with torch's matching rules (custom nodes must match exactly; dict kinds
// match each other by key set; deque ignores maxlen) and torch's messages,
// followed by the key path of the mismatch.
#include <vector>

#include "children.h"
#include "errors.h"
#include "registry.h"
#include "treespec.h"

namespace cpytree {
namespace {

class UpTo {
 public:
  UpTo(SpecView v, std::vector<PyObject*>* out) : v_(v), out_(out), limit_(DepthLimit()) {}
  ~UpTo() { ReleaseFrom(&held_, 0); }

  // After a failed Visit: raises the pending mismatch, if that was the cause.
  void RaisePending() { err_.Raise(); }

  bool Visit(std::int64_t i, PyObject* node, int depth) {
    const Node& s = v_.nodes[i];
    if (s.kind == NodeKind::kLeaf) {
      Py_INCREF(node);
      out_->push_back(node);
      return true;
    }
    if (CPYTREE_UNLIKELY(depth > limit_)) {
      RaiseDepthError("pytree flatten_up_to", limit_);
      return false;
    }
    std::size_t base = held_.size();
    if (!Children(i, node)) return false;
    // Child indices, first child first, on a stack shared by all levels (no
    // allocation per node); read by position: deeper levels grow the stack.
    std::size_t ibase = idx_.size();
    idx_.resize(ibase + s.arity);
    std::size_t slot = idx_.size();
    internal::ForEachChildReversed(v_.nodes, i, [&](std::int64_t c) { idx_[--slot] = c; });
    PyObject* const* items = v_.items + s.ctx;
    for (std::size_t k = 0; k < s.arity; ++k) {
      if (!Visit(idx_[ibase + k], held_[base + k], depth + 1)) {
        err_.AddParent(s.kind, static_cast<Py_ssize_t>(k), KeyOf(s, items, k));
        return false;
      }
    }
    ReleaseFrom(&held_, base);
    idx_.resize(ibase);
    return true;
  }

 private:
  // The type torch's _get_node_type reports for `node` (borrowed).
  static PyObject* NodeTypeOf(PyObject* node, NodeKind kind) {
    return kind == NodeKind::kNamedTuple ? g_builtins.namedtuple_fn
                                         : reinterpret_cast<PyObject*>(Py_TYPE(node));
  }

  CPYTREE_NOINLINE bool Fail(PyObject* message) { return err_.Set(message); }

  // The key-path step to child k of spec node s (a spec item, borrowed).
  static PyObject* KeyOf(const Node& s, PyObject* const* items, std::size_t k) {
    return IsDictKind(s.kind)                ? items[FirstKeyItem(s.kind) + k]
           : s.kind == NodeKind::kNamedTuple ? items[0]
                                             : nullptr;
  }

  bool ArityMismatch(const Node& s, Py_ssize_t got) {
    return Fail(PyUnicode_FromFormat("Node arity mismatch; expected %u, but got %zd.", s.arity,
                                     got));
  }

  // Appends node's children (owned) to held_, checking them against spec node i.
  bool Children(std::int64_t i, PyObject* node) {
    const Node& s = v_.nodes[i];
    PyObject* const* items = v_.items + s.ctx;
    const Registration* reg = nullptr;
    bool error = false;
    NodeKind kind = KindOf(node, &reg, &error);
    if (error) return false;
    PyObject* node_type = NodeTypeOf(node, kind);
    Ref spec_type(NodeType(v_, i));
    if (!spec_type) return false;
    if (s.kind == NodeKind::kCustom) {
      if (node_type != spec_type.get()) {
        return Fail(PyUnicode_FromFormat("Type mismatch; expected %R, but got %R.",
                                         spec_type.get(), node_type));
      }
      if (reg == nullptr || kind != NodeKind::kCustom) {
        PyErr_SetObject(PyExc_KeyError, node_type);  // torch: SUPPORTED_NODES[node_type]
        return false;
      }
      Ref children, context;
      if (!CallCustomFlatten(reg, node, &children, &context)) return false;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(children.get());
      if (n != s.arity) return ArityMismatch(s, n);
      int ne = PyObject_RichCompareBool(context.get(), items[1], Py_NE);
      if (ne < 0) return false;
      if (ne) {
        return Fail(PyUnicode_FromFormat("Node context mismatch for custom node type %R.",
                                         spec_type.get()));
      }
      return Hold(children.get());
    }
    bool both_dicts = IsDictKind(s.kind) && IsDictKind(kind);
    if (!both_dicts && node_type != spec_type.get()) {
      return Fail(PyUnicode_FromFormat("Node type mismatch; expected %R, but got %R.",
                                       spec_type.get(), node_type));
    }
    Py_ssize_t len = PyObject_Size(node);
    if (len < 0) return false;
    if (len != s.arity) return ArityMismatch(s, len);
    if (both_dicts) return DictChildren(s, items + FirstKeyItem(s.kind), node);
    if (kind == NodeKind::kDeque) return SnapshotDeque(node, &held_);  // maxlen ignored
    if (kind == NodeKind::kNamedTuple && node_type == spec_type.get()) {
      PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(node));
      if (cls != items[0]) {
        int ne = PyObject_RichCompareBool(cls, items[0], Py_NE);
        if (ne < 0) return false;
        if (ne) {
          return Fail(PyUnicode_FromFormat(
              "Node context mismatch for node type %R; expected %R, but got %R.",
              spec_type.get(), items[0], cls));
        }
      }
    }
    return Hold(node);
  }

  // Holds the items of a list or tuple (a snapshot: user code may mutate it).
  bool Hold(PyObject* seq) {
    Ref fast(PySequence_Fast(seq, "expected a sequence"));
    if (!fast) return false;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(fast.get()); ++k) {
      PyObject* o = PySequence_Fast_ITEMS(fast.get())[k];
      Py_INCREF(o);
      held_.push_back(o);
    }
    return true;
  }

  // Dict kinds match by key set; children are taken in the spec's key order.
  bool DictChildren(const Node& s, PyObject* const* keys, PyObject* node) {
    Ref expected(PySet_New(nullptr));
    if (!expected) return false;
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      if (PySet_Add(expected.get(), keys[k]) < 0) return false;
    }
    Ref got(PySet_New(node));
    if (!got) return false;
    int same = PyObject_RichCompareBool(got.get(), expected.get(), Py_EQ);
    if (same < 0) return false;
    if (!same) return KeysMismatch(expected.get(), got.get());
    for (std::uint32_t k = 0; k < s.arity; ++k) {
      PyObject* v = PyObject_GetItem(node, keys[k]);
      if (v == nullptr) return false;
      held_.push_back(v);
    }
    return true;
  }

  CPYTREE_NOINLINE bool KeysMismatch(PyObject* expected, PyObject* got) {
    Ref missing(PyNumber_Subtract(expected, got));
    Ref extra(PyNumber_Subtract(got, expected));
    if (!missing || !extra) return false;
    Ref message(PyUnicode_FromString("Node keys mismatch"));
    if (PySet_GET_SIZE(missing.get()) > 0) {
      message = Ref(PyUnicode_FromFormat("%U; missing key(s): %S", message.get(), missing.get()));
      if (!message) return false;
    }
    if (PySet_GET_SIZE(extra.get()) > 0) {
      message = Ref(PyUnicode_FromFormat("%U; extra key(s): %S", message.get(), extra.get()));
      if (!message) return false;
    }
    return Fail(PyUnicode_FromFormat("%U.", message.get()));
  }

  SpecView v_;
  std::vector<PyObject*>* out_;
  std::vector<PyObject*> held_;
  std::vector<std::int64_t> idx_;  // child indices of the nodes being visited   // owned children snapshots, a stack by level
  PathError err_;  // a mismatch and its key path, collected while unwinding
  int limit_;
};

}  // namespace

bool FlattenUpTo(SpecView v, PyObject* tree, std::vector<PyObject*>* out) {
  UpTo upto(v, out);
  bool ok = upto.Visit(v.root_index(), tree, 0);
  if (!ok) upto.RaisePending();
  return ok;
}

}  // namespace cpytree
