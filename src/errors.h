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

}  // namespace cpytree

#endif  // CPYTREE_SRC_ERRORS_H_
