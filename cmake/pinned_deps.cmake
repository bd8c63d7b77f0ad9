# A source build without a system abseil or simdjson (pip install of the sdist
# on macOS, Windows, or a Linux without libabsl-dev / libsimdjson-dev): the
# same pinned published sources the wheels build (cmake/deps.lock, read here
# and by scripts/native_deps.sh), checked by sha256, compiled into this build
# as static libraries with hidden symbols (the extension exports PyInit__C
# alone). Nothing third-party is in the repository or the sdist.
#
#   cpytree_pinned_deps(<abseil|simdjson>...)  defines the targets the engine
#     links: absl::flat_hash_map, absl::hash, absl::inlined_vector;
#     simdjson::simdjson.
#
# Knobs (CMake -D..., or the environment variable of the same name; with pip:
# `-C cmake.define.NAME=VALUE` or the environment):
#   CPYTREE_DOWNLOAD_DEPS=OFF  never download: use CPYTREE_DEPS_SOURCES or stop
#                              with one message naming what to install.
#   CPYTREE_DEPS_SOURCES=DIR   a folder holding the pinned archives (their file
#                              names as in deps.lock's URLs): read first, offline;
#                              a missing one is downloaded into it (when allowed).
#                              Default: <build dir>/_deps/downloads.
include_guard(GLOBAL)

set(_cpytree_lock "${CMAKE_CURRENT_LIST_DIR}/deps.lock")
set(_cpytree_subset "${CMAKE_CURRENT_LIST_DIR}/abseil-subset.txt")

# The fields of one pin: <name> <version> <sha256> <url>.
function(_cpytree_pin name out_version out_sha out_url)
  file(STRINGS "${_cpytree_lock}" _lines REGEX "^${name}[ \t]")
  list(LENGTH _lines _n)
  if(NOT _n EQUAL 1)
    message(FATAL_ERROR "cpytree: cmake/deps.lock has ${_n} lines for ${name}, not one")
  endif()
  string(REGEX REPLACE "[ \t]+" ";" _fields "${_lines}")
  list(GET _fields 1 _version)
  list(GET _fields 2 _sha)
  list(GET _fields 3 _url)
  set(${out_version} "${_version}" PARENT_SCOPE)
  set(${out_sha} "${_sha}" PARENT_SCOPE)
  set(${out_url} "${_url}" PARENT_SCOPE)
endfunction()

# The archive of one pin, from CPYTREE_DEPS_SOURCES or downloaded, sha256-checked.
function(_cpytree_archive name out_path)
  _cpytree_pin(${name} _version _sha _url)
  get_filename_component(_file "${_url}" NAME)
  set(_path "${CPYTREE_DEPS_SOURCES}/${_file}")
  if(NOT EXISTS "${_path}")
    if(NOT CPYTREE_DOWNLOAD_DEPS)
      message(FATAL_ERROR "cpytree: ${_file} not in CPYTREE_DEPS_SOURCES (${CPYTREE_DEPS_SOURCES}) "
                          "and downloads are off (CPYTREE_DOWNLOAD_DEPS=OFF)")
    endif()
    message(STATUS "cpytree: downloading ${name} (${_version}) from ${_url}")
    file(DOWNLOAD "${_url}" "${_path}.part" STATUS _status TLS_VERIFY ON
         EXPECTED_HASH SHA256=${_sha})
    list(GET _status 0 _code)
    if(NOT _code EQUAL 0)
      file(REMOVE "${_path}.part")
      list(GET _status 1 _why)
      message(FATAL_ERROR "cpytree: downloading ${_url} failed: ${_why}. Offline, put the "
                          "file in a folder named by CPYTREE_DEPS_SOURCES.")
    endif()
    file(RENAME "${_path}.part" "${_path}")
  endif()
  file(SHA256 "${_path}" _got)
  if(NOT _got STREQUAL _sha)
    message(FATAL_ERROR "cpytree: ${_path}: sha256 ${_got}, cmake/deps.lock pins ${_sha}")
  endif()
  set(${out_path} "${_path}" PARENT_SCOPE)
endfunction()

# Unpacks the members of a pin's archive matching the patterns (ARGN) once
# into <build>/_deps/<name>-<version>; returns the archive's top folder there.
function(_cpytree_unpack name out_dir)
  _cpytree_pin(${name} _version _sha _url)
  set(_dest "${CMAKE_BINARY_DIR}/_deps/${name}-${_version}")
  if(NOT EXISTS "${_dest}/.cpytree-${_sha}")
    _cpytree_archive(${name} _archive)
    file(REMOVE_RECURSE "${_dest}")
    file(ARCHIVE_EXTRACT INPUT "${_archive}" DESTINATION "${_dest}" PATTERNS ${ARGN})
    file(TOUCH "${_dest}/.cpytree-${_sha}")
  endif()
  file(GLOB _top LIST_DIRECTORIES true "${_dest}/*")
  list(FILTER _top EXCLUDE REGEX "/\\.cpytree-")
  set(${out_dir} "${_top}" PARENT_SCOPE)
endfunction()

# The flags the wheels compile these libraries with (scripts/native_deps.sh):
# optimised, asserts off, their warnings silenced, hidden symbols, PIC.
function(_cpytree_third_party target)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_compile_definitions(${target} PRIVATE NDEBUG)
  if(MSVC)
    target_compile_options(${target} PRIVATE /O2 /w)
  else()
    # -g0: no debug information for them (RelWithDebInfo adds -g), as in the wheels.
    target_compile_options(${target} PRIVATE -O3 -g0 -w -ffunction-sections -fdata-sections)
  endif()
endfunction()

function(cpytree_pinned_deps)
  if(NOT CPYTREE_DEPS_SOURCES)
    set(CPYTREE_DEPS_SOURCES "${CMAKE_BINARY_DIR}/_deps/downloads")
  endif()
  # Downloads off and an archive absent: one error naming every way out.
  set(_absent "")
  foreach(_name IN LISTS ARGN)
    _cpytree_pin(${_name} _version _sha _url)
    get_filename_component(_file "${_url}" NAME)
    if(NOT EXISTS "${CPYTREE_DEPS_SOURCES}/${_file}")
      list(APPEND _absent "${_file} (${_url}, sha256 ${_sha})")
    endif()
  endforeach()
  if(_absent AND NOT CPYTREE_DOWNLOAD_DEPS)
    list(JOIN ARGN " and " _what)
    list(JOIN _absent ", " _absent)
    message(FATAL_ERROR
      "cpytree: ${_what} not found, and downloading their pinned sources is off "
      "(CPYTREE_DOWNLOAD_DEPS=OFF). Building cpytree from source needs two C++ "
      "libraries, abseil and simdjson: on Debian/Ubuntu `sudo apt-get install "
      "libabsl-dev libsimdjson-dev`, on Fedora `sudo dnf install abseil-cpp-devel "
      "simdjson-devel`, with Homebrew `brew install abseil simdjson`, with conda "
      "`conda install -c conda-forge libabseil simdjson`; or point CMake at your "
      "builds with -Dabsl_DIR=<prefix>/lib/cmake/absl "
      "-Dsimdjson_DIR=<prefix>/lib/cmake/simdjson; or put the pinned archives in a "
      "folder and name it with CPYTREE_DEPS_SOURCES: ${_absent}; or allow the "
      "download (CPYTREE_DOWNLOAD_DEPS=ON, the default). Or install a prebuilt "
      "cpytree wheel, which needs none of them.")
  endif()
  file(MAKE_DIRECTORY "${CPYTREE_DEPS_SOURCES}")
  if("abseil" IN_LIST ARGN)
    _cpytree_unpack(abseil _top "*/third_party/abseil-cpp/absl/*")
    set(_absl "${_top}/third_party/abseil-cpp")
    file(STRINGS "${_cpytree_subset}" _dirs REGEX "^dirs ")
    file(STRINGS "${_cpytree_subset}" _exclude REGEX "^exclude ")
    string(REGEX REPLACE "^dirs +" "" _dirs "${_dirs}")
    string(REGEX REPLACE "^exclude +" "" _exclude "${_exclude}")
    string(REGEX REPLACE " +" ";" _dirs "${_dirs}")
    set(_sources "")
    foreach(_dir IN LISTS _dirs)
      file(GLOB_RECURSE _found RELATIVE "${_absl}" "${_absl}/${_dir}/*.cc")
      list(APPEND _sources ${_found})
    endforeach()
    list(FILTER _sources EXCLUDE REGEX "${_exclude}")
    list(SORT _sources)
    list(TRANSFORM _sources PREPEND "${_absl}/")
    list(LENGTH _sources _n)
    message(STATUS "cpytree: abseil from cmake/deps.lock (${_n} sources, static, hidden)")
    add_library(cpytree_pinned_absl STATIC ${_sources})
    target_include_directories(cpytree_pinned_absl SYSTEM PUBLIC "${_absl}")
    _cpytree_third_party(cpytree_pinned_absl)
    find_package(Threads REQUIRED)
    target_link_libraries(cpytree_pinned_absl PUBLIC Threads::Threads)
    if(APPLE)  # absl/time reads the zone database through CoreFoundation
      target_link_libraries(cpytree_pinned_absl PUBLIC "-framework CoreFoundation")
    endif()
    add_library(absl::flat_hash_map ALIAS cpytree_pinned_absl)
    add_library(absl::hash ALIAS cpytree_pinned_absl)
    add_library(absl::inlined_vector ALIAS cpytree_pinned_absl)
  endif()
  if("simdjson" IN_LIST ARGN)
    _cpytree_unpack(simdjson _top "*/simdjson/simdjson.h" "*/simdjson/simdjson.cpp")
    message(STATUS "cpytree: simdjson from cmake/deps.lock (amalgamation, static, hidden)")
    add_library(cpytree_pinned_simdjson STATIC "${_top}/simdjson/simdjson.cpp")
    # The folder holds simdjson.h and simdjson.cpp alone (nothing else unpacked).
    target_include_directories(cpytree_pinned_simdjson SYSTEM PUBLIC "${_top}/simdjson")
    _cpytree_third_party(cpytree_pinned_simdjson)
    add_library(simdjson::simdjson ALIAS cpytree_pinned_simdjson)
  endif()
endfunction()
