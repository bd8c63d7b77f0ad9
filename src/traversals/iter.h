// tree_iter: a lazy iterator over the leaves of a pytree, visiting nodes as
// the leaves are consumed (an explicit frame stack, no recursion).
#ifndef CPYTREE_SRC_ITER_H_
#define CPYTREE_SRC_ITER_H_

#include "base/common.h"

namespace cpytree {

// Readies the iterator type of tree_iter (module init); false with an exception.
bool InitTreeIterType();

CPYTREE_FASTCALL(PyTreeIter);  // tree_iter(tree, is_leaf=None): a lazy iterator

}  // namespace cpytree

#endif  // CPYTREE_SRC_ITER_H_
