// libFuzzer target for the header library's protocol-1 JSON reader.
//
// Contract under test (json.h): `Loads(text)` returns a spec or throws
// `cpytree::ParseError`, for any bytes, without undefined behaviour (the
// build adds ASan and UBSan). A spec it returns must survive the round trip
// `Loads(Dumps(spec)) == spec` with equal hashes, print (`ToString`), and
// answer its accessors for every node. Built and run by `make fuzz-cxx`:
//
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -Iinclude tests/fuzz/cxx/loads_fuzzer.cc -o loads_fuzzer
//   ./loads_fuzzer -max_total_time=60 corpus/ seeds/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cpytree/cpytree.h"
#include "cpytree/json.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "loads_fuzzer: %s\ninput: %s\n", what, text.c_str());
  std::abort();
}

// Walks every node through the public accessors.
void Walk(const cpytree::TreeSpec& s, int depth) {
  if (depth > 200) return;
  (void)s.num_leaves();
  (void)s.num_nodes();
  for (std::size_t i = 0; i < s.num_children(); ++i) Walk(s.child(i), depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  cpytree::TreeSpec spec;
  try {
    spec = cpytree::Loads(text);
  } catch (const cpytree::ParseError&) {
    return 0;  // the documented outcome for malformed input
  } catch (const std::exception& e) {
    Fail((std::string("Loads threw a non-ParseError: ") + e.what()).c_str(), text);
  }
  std::string again;
  try {
    again = cpytree::Dumps(spec);
  } catch (const std::exception& e) {
    Fail((std::string("Dumps of a loaded spec threw: ") + e.what()).c_str(), text);
  }
  cpytree::TreeSpec back;
  try {
    back = cpytree::Loads(again);
  } catch (const std::exception& e) {
    Fail((std::string("Loads(Dumps(spec)) threw: ") + e.what() + "\ndumps: " + again).c_str(),
         text);
  }
  if (!(back == spec)) Fail(("Loads(Dumps(spec)) != spec; dumps: " + again).c_str(), text);
  if (std::hash<cpytree::TreeSpec>()(back) != std::hash<cpytree::TreeSpec>()(spec)) {
    Fail("equal specs hash differently", text);
  }
  if (cpytree::Dumps(back) != again) Fail("Dumps is not stable across a round trip", text);
  (void)spec.ToString();
  Walk(spec, 0);
  return 0;
}
