// tree_map and its variants (see map.cc): the unary maps rebuild the tree as
// they walk it, building no spec; the n-ary ones match every other tree
// against the first before calling `func`.
#ifndef CPYTREE_SRC_MAP_H_
#define CPYTREE_SRC_MAP_H_

#include "base/common.h"

namespace cpytree {

CPYTREE_FASTCALL(PyTreeMap);             // tree_map(func, tree, *rests, is_leaf=None)
CPYTREE_FASTCALL(PyTreeMapInplace);      // tree_map_(func, tree, *rests, is_leaf=None)
CPYTREE_FASTCALL(PyTreeMapOnly);         // tree_map_only(type_or_types_or_pred, /, func, tree, ...)
CPYTREE_FASTCALL(PyTreeMapOnlyInplace);  // tree_map_only_(type_or_types_or_pred, /, func, ...)
CPYTREE_FASTCALL(PyTreeMapWithPath);     // tree_map_with_path(func, tree, *rests, is_leaf=None)

}  // namespace cpytree

#endif  // CPYTREE_SRC_MAP_H_
