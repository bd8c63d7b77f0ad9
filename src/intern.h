// Interning of specs: one TreeSpec object per distinct structure.
//
// Two structures are the same when their node arrays are equal bytewise and
// their context items are pairwise identical under IdentityEqual: same type
// and equal value, recursively through tuples, lists and dicts (so the keys 1,
// 1.0 and True never merge: unflatten must give back the key it saw). An item
// that cannot be hashed that way makes the spec uninterned, not an error.
//
// The intern table maps an identity hash to a chain of specs (through
// TreeSpecObject::intern_next). It holds specs weakly: a spec unlinks itself
// in its deallocator. Who may touch it: only code holding the GIL (the table
// is not otherwise locked; a free-threaded build must guard it with a mutex
// around lookup and unlink, releasing it while user __eq__ runs). Lookups may
// run user code (__eq__ of context items); they hold a strong reference to the
// chain entry under comparison and re-read the chain afterwards, so a table
// changed by that code is still walked safely.
#ifndef CPYTREE_SRC_INTERN_H_
#define CPYTREE_SRC_INTERN_H_

#include "treespec.h"

namespace cpytree {

// The interned spec with the structure of `v` (created if new). New reference.
PyObject* InternView(SpecView v);

// Like InternView for a builder holding one whole tree: a new spec takes the
// builder's nodes and items (the builder is left empty). New reference.
PyObject* InternBuilder(SpecBuilder* b);

// Removes a dying spec from the table.
void ForgetSpec(TreeSpecObject* spec);

// Identity-preserving equality of two context items: 1 equal, 0 not, never
// raises (an exception from a user __eq__ counts as "not equal").
int IdentityEqual(PyObject* a, PyObject* b, int depth = 0);

// Number of live interned specs (for tests).
Py_ssize_t InternTableSize();

}  // namespace cpytree

#endif  // CPYTREE_SRC_INTERN_H_
