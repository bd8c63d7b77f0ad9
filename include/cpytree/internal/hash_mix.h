// The one hash mixer of cpytree, for the engine (interning, the hash behind
// spec !=) and the header library (Value and TreeSpec hashes). Not API.
#ifndef CPYTREE_INTERNAL_HASH_MIX_H_
#define CPYTREE_INTERNAL_HASH_MIX_H_

#include <cstddef>

namespace cpytree {
namespace internal {

// Folds `v` into `h`: a cheap multiplicative mix. Its hashes pick buckets
// and intern chains only; equality is always checked in full.
inline std::size_t HashMix(std::size_t h, std::size_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

}  // namespace internal
}  // namespace cpytree

#endif  // CPYTREE_INTERNAL_HASH_MIX_H_
