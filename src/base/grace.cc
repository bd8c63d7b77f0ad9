// Reader slots of the grace periods (grace.h): free-threaded builds only.
#include "base/grace.h"

#include <limits>

namespace cpytree {
namespace grace {

#if CPYTREE_FREE_THREADED

thread_local ReaderSlot* t_reader_slot = nullptr;

namespace {

// Every slot ever claimed, newest first. Only grows; never freed.
std::atomic<ReaderSlot*> g_slots{nullptr};

// Releases this thread's slot when the thread ends (its thread_local
// destructor): no lock and no Python, so it is safe at any point of a
// thread's teardown, including CPython ending a daemon thread at exit.
struct SlotOwner {
  ReaderSlot* slot = nullptr;
  SlotOwner() = default;
  SlotOwner(const SlotOwner&) = delete;
  SlotOwner& operator=(const SlotOwner&) = delete;
  ~SlotOwner() {
    if (slot == nullptr) return;
    t_reader_slot = nullptr;
    slot->epoch.store(0, std::memory_order_release);
    slot->in_use.store(false, std::memory_order_release);
  }
};
thread_local SlotOwner t_slot_owner;

}  // namespace

ReaderSlot* ClaimReaderSlot() {
  ReaderSlot* slot = nullptr;
  for (ReaderSlot* s = g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    bool free = false;
    if (!s->in_use.load(std::memory_order_relaxed) &&
        s->in_use.compare_exchange_strong(free, true, std::memory_order_acquire)) {
      slot = s;
      break;
    }
  }
  if (slot == nullptr) {
    slot = new ReaderSlot();
    slot->in_use.store(true, std::memory_order_relaxed);
    slot->next = g_slots.load(std::memory_order_relaxed);
    while (!g_slots.compare_exchange_weak(slot->next, slot, std::memory_order_release,
                                          std::memory_order_relaxed)) {
    }
  }
  t_slot_owner.slot = slot;  // first use registers the destructor
  t_reader_slot = slot;
  return slot;
}

std::uint64_t OldestReader() {
  std::uint64_t oldest = std::numeric_limits<std::uint64_t>::max();
  for (ReaderSlot* s = g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    std::uint64_t e = s->epoch.load(std::memory_order_seq_cst);
    if (e != 0 && e < oldest) oldest = e;
  }
  return oldest;
}

#endif

}  // namespace grace
}  // namespace cpytree
