// The per-thread cache of traversal arenas (arena.h).
#include "ground/arena.h"

namespace cpytree {

// ScratchArena: one cached arena per thread, handed out when free.
namespace {
thread_local TraversalArena* t_cached = nullptr;
thread_local bool t_cached_in_use = false;
}  // namespace

ScratchArena::ScratchArena() {
  if (!t_cached_in_use) {
    if (t_cached == nullptr) t_cached = new TraversalArena();
    t_cached_in_use = true;
    b_ = t_cached;
    cached_ = true;
  } else {
    b_ = new TraversalArena();
    cached_ = false;
  }
}

ScratchArena::~ScratchArena() {
  if (!MayReleaseInDestructor()) return;  // a daemon thread torn down at exit (common.h)
  if (b_->HoldsNothing()) {
    b_->nodes.clear();
    b_->indices.clear();
  } else {
    b_->Clear();
  }
  if (cached_) {
    constexpr std::size_t kMaxKept = 1 << 20;
    if (b_->Oversized(kMaxKept)) b_->Trim(kMaxKept);
    t_cached_in_use = false;
  } else {
    delete b_;
  }
}

}  // namespace cpytree
