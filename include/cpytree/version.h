// The cpytree version: the one place it is written.
//
// Everything else reads it from here: CMake's project(VERSION) (parsed by
// CMakeLists.txt), the Python package's metadata (scikit-build-core's regex
// provider in pyproject.toml), hence `cpytree.__version__` (read from that
// metadata) and the wheel's file name. Bump the three numbers below, nothing else.
//
//   #include <cpytree/version.h>
//   static_assert(CPYTREE_VERSION_MAJOR == 0, "built against cpytree 0.x");
#ifndef CPYTREE_VERSION_H_
#define CPYTREE_VERSION_H_

// Keep one `#define CPYTREE_VERSION_<PART> <number>` per line: pyproject.toml
// and CMakeLists.txt parse these lines with a regular expression.
#define CPYTREE_VERSION_MAJOR 0
#define CPYTREE_VERSION_MINOR 1
#define CPYTREE_VERSION_PATCH 0

#endif  // CPYTREE_VERSION_H_
