// CPython's private OrderedDict layout, fenced: the only file that reads an
// OrderedDict's linked list directly. CPython's C OrderedDict is a dict plus
// a linked list of nodes in the OrderedDict's order; its public iterator
// costs two hash lookups per key, which made OrderedDict-heavy trees (torch
// module trees) 2.5x slower to flatten than dict trees. The layout is
// private: VerifyLayout checks it at module init against a known
// OrderedDict, and when anything differs LayoutVerified() stays false and
// every caller uses the public iterator instead (same results, slower).
//
//   if (internal_odict::LayoutVerified()) return internal_odict::Snapshot(od, &keys, &values);
#ifndef CPYTREE_SRC_ODICT_LAYOUT_H_
#define CPYTREE_SRC_ODICT_LAYOUT_H_

#include <cstddef>
#include <vector>

#include "base/common.h"

namespace cpytree {

// What comparing a node's keys with a spec node's keys found.
enum class KeyOrder {
  kSame,       // the same keys in the same order
  kDifferent,  // another number of keys, other keys or another order
  kNeedsEq,    // not identical: only == can tell
  kError,      // an exception is set
};

// Direct reads of CPython's OrderedDict linked list.
namespace internal_odict {
// Checks the private layout against a live OrderedDict (at module init, from
// the registry's init); false on a Python error only. Afterwards
// LayoutVerified() says whether the readers below may be used.
bool VerifyLayout(PyObject* ordered_dict_type);
// Set by VerifyLayout only (module init, the GIL held); read per OrderedDict.
extern bool g_layout_verified;
inline bool LayoutVerified() { return g_layout_verified; }
// Appends new references of the keys (when `keys` is not null) and values
// of `obj` in its order; false with an exception set.
bool Snapshot(PyObject* obj, std::vector<PyObject*>* keys, std::vector<PyObject*>* values);
// If obj's keys are exactly (by identity) expected[0..n) in order, appends
// owned values and returns kSame; kDifferent if they differ in number or
// order; kNeedsEq if some key is merely not identical (compare with ==);
// kError on error. No user code.
KeyOrder SnapshotIfKeys(PyObject* obj, PyObject* const* expected, std::size_t n,
                        std::vector<PyObject*>* values);
}  // namespace internal_odict

}  // namespace cpytree

#endif  // CPYTREE_SRC_ODICT_LAYOUT_H_
