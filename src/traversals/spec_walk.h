// Walking a tree against a known spec (strict, up-to and fx modes; see
// spec_walk.cc and spec_walk_fx.cc): the leaves, or the subtrees at the
// spec's leaves, in one pass, building no spec.
//
//   PyObject* leaves = SpecFlatten(spec, tree);  // TreeSpec.flatten(tree)
#ifndef CPYTREE_SRC_SPEC_WALK_H_
#define CPYTREE_SRC_SPEC_WALK_H_

#include <vector>

#include "base/common.h"
#include "ground/spec_object.h"

namespace cpytree {

// spec.flatten_up_to(tree): appends owned subtrees to `out`. False on error.
bool FlattenUpTo(SpecView v, PyObject* tree, std::vector<PyObject*>* out);

// TreeSpec.flatten(tree): the leaves of a tree whose structure must equal spec.
PyObject* SpecFlatten(PyObject* spec, PyObject* tree);

// TreeSpec.flatten_up_to(tree): the subtrees of tree at spec's leaves, a list.
PyObject* SpecFlattenUpTo(PyObject* spec, PyObject* tree);

CPYTREE_FASTCALL(PyTreeFlattenSpec);  // tree_flatten_spec(pytree, spec, registry=None)

}  // namespace cpytree

#endif  // CPYTREE_SRC_SPEC_WALK_H_
