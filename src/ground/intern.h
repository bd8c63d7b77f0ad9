// Interning of specs: one TreeSpec object per distinct structure.
//
// Two structures are the same when their node arrays are equal bytewise and
// their context items are pairwise identical under IdentityEqual: same type
// and equal value, recursively through tuples, lists and dicts (so the keys 1,
// 1.0 and True never merge: unflatten must give back the key it saw). An item
// that cannot be hashed that way makes the spec uninterned, not an error; so
// does a chain of more than a few specs whose items hash alike (intern.cc).
//
// The intern table maps an identity hash to a chain of specs (through
// TreeSpecObject::intern_next). It holds specs weakly: a spec unlinks itself
// in its deallocator (ForgetSpec, which runs wherever the last reference
// dies, the GC included).
// Concurrency: who touches what, under which lock.
// - The table, the chains and each spec's `interned`/`intern_next`: only code
//   holding the GIL (InternView, ForgetSpec); no other lock.
// - User code runs in the middle of an intern: ItemHash calls __hash__ of
//   context items (holding each item, re-reading container sizes, giving up
//   on interning if a container changed), and the chain walk calls __eq__
//   (holding the candidate strongly and re-reading the chain after). That
//   code may release the GIL, so other threads may insert and unlink specs
//   meanwhile: the walk stays safe. Two threads interning one new structure
//   at the same time may then both insert it: the table holds two equal specs
//   (== is still true, `is` is not). Benign; both leave when they die.
// - TreeSpecObject::eq_hash: computed lazily, written without a lock (the
//   same value by any writer: benign under the GIL).
// Free-threaded builds: a mutex around lookup and unlink, released while
// user code runs; chain entries taken with a try-incref (a spec whose count
// reached zero may still be linked until its deallocator unlinks it); eq_hash
// as a relaxed atomic.
#ifndef CPYTREE_SRC_INTERN_H_
#define CPYTREE_SRC_INTERN_H_

#include "ground/spec_object.h"

namespace cpytree {

// The interned spec with the structure of `v` (created if new). New reference.
PyObject* InternView(SpecView v);

// Like InternView for an arena holding one whole tree: a new spec takes the
// arena's nodes and items (the arena is left empty). New reference.
PyObject* InternArena(TraversalArena* b);

// Interns the leaf spec once, at module init (after the TreeSpec type is
// ready). False with an exception set.
bool InternLeafSpec();
// The interned leaf spec (borrowed; alive as long as the module).
PyObject* LeafSpec();

// Removes a dying spec from the table.
void ForgetSpec(TreeSpecObject* spec);

// Identity-preserving equality of two context items: 1 equal, 0 not, never
// raises (an exception from a user __eq__ counts as "not equal").
int IdentityEqual(PyObject* a, PyObject* b, int depth = 0);

// Number of live interned specs (for tests).
Py_ssize_t InternTableSize();

}  // namespace cpytree

#endif  // CPYTREE_SRC_INTERN_H_
