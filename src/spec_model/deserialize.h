// treespec_loads of the engine: protocol-1 JSON parsed natively (simdjson),
// anything else handed to the reference loads (see serialize.h for the
// contract shared with treespec_dumps).
#ifndef CPYTREE_SRC_DESERIALIZE_H_
#define CPYTREE_SRC_DESERIALIZE_H_

#include "base/common.h"

namespace cpytree {

// treespec_loads(serialized): uncached (the package wraps it in lru_cache).
CPYTREE_FASTCALL(PyTreespecLoads);

}  // namespace cpytree

#endif  // CPYTREE_SRC_DESERIALIZE_H_
