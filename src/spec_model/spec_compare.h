// Comparing and printing specs as torch does: structural equality and its
// hash, torch's own hash(spec), and repr(spec).
//
//   int eq = SpecsEqual(ViewOf(a), ViewOf(b));  // 1, 0 or -1 with an exception
#ifndef CPYTREE_SRC_SPEC_COMPARE_H_
#define CPYTREE_SRC_SPEC_COMPARE_H_

#include "base/common.h"
#include "ground/spec_object.h"

namespace cpytree {

// repr(spec) as torch prints it (`indent`: torch's __repr__ argument).
PyObject* SpecRepr(SpecView v, int indent = 0);

// torch's structural equality of two views (pointer-unequal specs). -1 on error.
int SpecsEqual(SpecView a, SpecView b);
// A hash consistent with SpecsEqual (for the O(1) `!=`). -1 on error.
Py_hash_t SpecEqHash(SpecView v);
// hash(spec) exactly as torch computes it for the same structure in this
// process (so specs of both implementations mix in dicts). -1 on error.
Py_hash_t SpecTorchHash(SpecView v);
// _set_constant_types(classes): contexts of these classes hash by `.value`.
PyObject* PySetConstantTypes(PyObject*, PyObject* types);

}  // namespace cpytree

#endif  // CPYTREE_SRC_SPEC_COMPARE_H_
