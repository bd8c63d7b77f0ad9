// Error reporting: key paths of structure mismatches (built only when an error
// is raised), depth errors and internal invariant failures. All cold.
#ifndef CPYTREE_SRC_ERRORS_H_
#define CPYTREE_SRC_ERRORS_H_

#include <vector>

#include "common.h"
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
