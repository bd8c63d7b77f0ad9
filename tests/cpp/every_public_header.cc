// One translation unit that includes every public header of the header
// library, for clang-tidy (`make lint`): src/ reaches only the headers it
// uses. scripts/source_lint.py checks that the list below is complete.
#include "cpytree/cpytree.h"
#include "cpytree/errors.h"
#include "cpytree/flatten.h"
#include "cpytree/flatten_against.h"
#include "cpytree/json.h"
#include "cpytree/kind.h"
#include "cpytree/spec.h"
#include "cpytree/traits.h"
#include "cpytree/tree.h"
#include "cpytree/value.h"
#include "cpytree/version.h"
