// tree_unflatten / TreeSpec.unflatten: one left-to-right pass over the
// post-order node array with a value stack (no recursion).
//
//   PyObject* tree = UnflattenView(ViewOf(spec), leaves, num_leaves);  // new ref
#ifndef CPYTREE_SRC_UNFLATTEN_H_
#define CPYTREE_SRC_UNFLATTEN_H_

#include "base/common.h"
#include "ground/spec_object.h"

namespace cpytree {

// spec.unflatten(leaves) over a view; `leaves` is a list or tuple. New ref.
PyObject* UnflattenView(SpecView v, PyObject* const* leaves, std::int64_t num_leaves);

// spec.unflatten(leaves) with torch's argument handling and count check.
PyObject* UnflattenChecked(PyObject* spec, PyObject* leaves);

CPYTREE_FASTCALL(PyTreeUnflatten);  // tree_unflatten(leaves, treespec)

}  // namespace cpytree

#endif  // CPYTREE_SRC_UNFLATTEN_H_
