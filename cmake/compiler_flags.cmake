# Compiler flags in each compiler's own spelling, chosen once here (included
# by CMakeLists.txt; the subdirectories use the variables):
#
#                          GCC / Clang / AppleClang      MSVC (and clang-cl)
#   CPYTREE_WARNINGS       -Wall -Wextra                 /W4
#   CPYTREE_WERROR=ON      -Werror                       /WX
#   CPYTREE_OPTIMIZE       -O3                           /O2
#   CPYTREE_EXTENSION_FLAGS (the CPython C API's casts and partial
#                          initialisers; its type punning)
#                          -Wno-missing-field-initializers
#                          -Wno-cast-function-type
#                          -fno-strict-aliasing          (none: MSVC assumes no
#                                                        strict aliasing, and /W4
#                                                        warns of neither)
#   hidden symbols         CXX_VISIBILITY_PRESET hidden  (nothing: a DLL exports
#                          (-fvisibility=hidden)         only what is dllexport)
#   sanitizers             -fsanitize=...                /fsanitize=address only
#
# Only the GCC/Clang column is built here (gcc, clang, zig's clang for the
# wheels and scripts/cross_compile.sh); the MSVC column has never been run.
option(CPYTREE_WERROR "Treat compiler warnings as errors" OFF)

if(MSVC)
  set(CPYTREE_WARNINGS /W4)
  set(CPYTREE_WERROR_FLAG /WX)
  set(CPYTREE_OPTIMIZE /O2)
  set(CPYTREE_EXTENSION_FLAGS "")
  if(CPYTREE_SANITIZE)
    add_compile_options(/fsanitize=address)
  endif()
  if(CPYTREE_TSAN)
    message(FATAL_ERROR "cpytree: CPYTREE_TSAN needs GCC or Clang (MSVC has no ThreadSanitizer)")
  endif()
else()
  set(CPYTREE_WARNINGS -Wall -Wextra)
  set(CPYTREE_WERROR_FLAG -Werror)
  set(CPYTREE_OPTIMIZE -O3)
  set(CPYTREE_EXTENSION_FLAGS -Wno-missing-field-initializers -Wno-cast-function-type
      -fno-strict-aliasing)
  if(CPYTREE_SANITIZE)
    add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined)
  endif()
  if(CPYTREE_TSAN)
    add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
    add_link_options(-fsanitize=thread)
  endif()
endif()
if(CPYTREE_WERROR)
  list(APPEND CPYTREE_WARNINGS ${CPYTREE_WERROR_FLAG})
endif()
