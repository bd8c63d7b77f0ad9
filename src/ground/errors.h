// Error reporting of structure mismatches: their messages (torch's words) and
// their key paths, built only when an error is raised. All cold. (Depth
// errors and internal invariant failures: common.h.)
//
//   if (got != s.arity) return err.Set(ArityMismatchMessage(s.arity, got));
//   ...                  // each ancestor: err.AddParent(kind, k, key)
//   err.Raise();         // ValueError "... (at key path tree[0]['a'])"
#ifndef CPYTREE_SRC_ERRORS_H_
#define CPYTREE_SRC_ERRORS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/common.h"
#include "cpytree/kind.h"

namespace cpytree {

// One step from a node to one of its children, as recorded during a traversal.
// `key` is borrowed from an object that outlives the traversal (a spec item).
struct PathEntry {
  NodeKind kind;     // kind of the parent node
  Py_ssize_t index;  // child index
  PyObject* key;     // dict key, or the namedtuple class; else null
};

// The key path text torch's keystr would print, prefixed by "tree". New ref.
CPYTREE_NOINLINE PyObject* FormatKeyPath(const std::vector<PathEntry>& path);

// Raises `exc` with "<message> (at key path tree...)". Consumes `message`
// (a new reference, may be null if formatting failed).
CPYTREE_NOINLINE void RaiseAtPath(PyObject* exc, PyObject* message,
                                  const std::vector<PathEntry>& path);

// The messages of structure mismatches found by the spec walks
// (spec_walk.cc), in torch's words. Each returns a new str, or null with
// an exception set; they are built only when a mismatch is found (cold).
// Type arguments are the types torch reports (spec_model.h: NodeType).

// "Node type mismatch; expected a leaf, but got <got_type>."
CPYTREE_NOINLINE PyObject* NotALeafMessage(PyObject* got_type);
// "Node type mismatch; expected <expected>, but got <got>."
CPYTREE_NOINLINE PyObject* TypeMismatchMessage(PyObject* expected, PyObject* got);
// "Node arity mismatch; expected <expected>, but got <got>."
CPYTREE_NOINLINE PyObject* ArityMismatchMessage(std::uint32_t expected, Py_ssize_t got);
// "Node <what> mismatch; expected <expected>, but got <got>." (`what`: context,
// default_factory).
CPYTREE_NOINLINE PyObject* ContextMismatchMessage(const char* what, PyObject* expected,
                                                  PyObject* got);
// "Node keys mismatch; expected [keys], but got [keys]." from key arrays.
CPYTREE_NOINLINE PyObject* KeysMismatchMessage(PyObject* const* expected, std::uint32_t n,
                                               PyObject* const* got, std::size_t num_got);
// The same with the keys of `dict` as got (an exact dict; no user code runs
// while reading them).
CPYTREE_NOINLINE PyObject* DictKeysMismatchMessage(PyObject* const* expected, std::uint32_t n,
                                                   PyObject* dict);
// "Node keys mismatch; missing key(s): {..}; extra key(s): {..}." from the
// expected and the got key sets (flatten_up_to's rule for dict kinds).
CPYTREE_NOINLINE PyObject* KeySetMismatchMessage(PyObject* expected, PyObject* got);
// flatten_up_to on a custom node: "Type mismatch; expected <expected>, but got <got>."
CPYTREE_NOINLINE PyObject* CustomTypeMismatchMessage(PyObject* expected, PyObject* got);
// flatten_up_to on a custom node: "Node context mismatch for custom node type <type>."
CPYTREE_NOINLINE PyObject* CustomContextMismatchMessage(PyObject* type);
// flatten_up_to on a namedtuple of another class: "Node context mismatch for
// node type <type>; expected <expected>, but got <got>."
CPYTREE_NOINLINE PyObject* NamedTupleContextMismatchMessage(PyObject* type, PyObject* expected,
                                                            PyObject* got);
// tree_flatten_spec's RuntimeError when a subtree's own spec differs from the
// expected one (torch's text, pointing at its bug tracker).
CPYTREE_NOINLINE void RaiseRealSpecMismatch(PyObject* real, PyObject* node, PyObject* spec);

// A structure mismatch whose key path is collected while the recursion
// unwinds, so a successful traversal records nothing:
//   deepest level:  return err.Set(PyUnicode_FromFormat(...));
//   each ancestor:  if (!Visit(child)) { err.AddParent(kind, k, key); return false; }
//   entry point:    err.Raise();  // raises the pending mismatch, if any
class PathError {
 public:
  PathError() = default;
  PathError(const PathError&) = delete;
  PathError& operator=(const PathError&) = delete;
  ~PathError() {
    if (MayReleaseInDestructor()) Py_XDECREF(message_);
  }

  // Records the mismatch (consumes `message`; null if formatting raised, and
  // then that exception is the one the caller sees). Always returns false,
  // for `return err.Set(...)`.
  bool Set(PyObject* message) {
    if (message != nullptr) message_ = message;
    return false;
  }
  // Adds the step from a parent to the failing child (while unwinding).
  void AddParent(NodeKind kind, Py_ssize_t index, PyObject* key) {
    if (message_ != nullptr) path_.push_back(PathEntry{kind, index, key});
  }
  // Raises ValueError "<message> (at key path tree...)"; nothing if no
  // mismatch is pending.
  CPYTREE_NOINLINE void Raise();

 private:
  PyObject* message_ = nullptr;
  std::vector<PathEntry> path_;  // innermost step first
};

}  // namespace cpytree

#endif  // CPYTREE_SRC_ERRORS_H_
