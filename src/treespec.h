// The Python TreeSpec type of the engine: attributes, equality, hashing,
// repr, pickling and the TreeSpec(type, context, children_specs) constructor.
// The object's layout and allocation are spec_object.h's; the interned leaf
// spec is intern.h's.
#ifndef CPYTREE_SRC_TREESPEC_H_
#define CPYTREE_SRC_TREESPEC_H_

#include "ground/spec_object.h"

namespace cpytree {

// Readies the TreeSpec type (and interns the leaf spec). Returns false with
// an exception set.
bool InitTreeSpecType();

}  // namespace cpytree

#endif  // CPYTREE_SRC_TREESPEC_H_
