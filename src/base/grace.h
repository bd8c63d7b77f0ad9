// Grace periods for memory that threads read without a lock (free-threaded
// builds only): epoch-based reclamation with one reader slot per thread. The
// registry (registry.cc) is its one user: a writer replaces the published map
// and frees the old map and the registrations it dropped only once no reader
// can still be reading them. On GIL builds everything here is empty (the GIL
// already keeps writers and readers apart).
//
// Reader (lock-free; a few thread-local stores, never a lock):
//   grace::BeginRead(epoch);   // the writers' epoch, read before the pointer
//   const Map* m = g_map.load(std::memory_order_seq_cst);
//   ... read m, copy out what is kept (no Python code, no blocking) ...
//   grace::EndRead();
// Writer (under its own lock):
//   old = g_map.exchange(next); e = epoch.fetch_add(1) + 1;  // then retire `old` with e
//   free what was retired with an epoch <= grace::OldestReader()
//
// Why that is enough: a reader whose slot holds an epoch >= e read the epoch
// after the writer's bump (acquire), which follows the exchange, so it loads
// the new map. A reader whose slot the writer saw at 0 either ended its read
// (release: its reads happen before the free) or stores its epoch after the
// writer's scan; slot store and map load are seq_cst, like the writer's
// exchange and scan, so that reader's map load comes after the exchange in
// the single total order and returns the new map. Only readers whose slot
// holds an epoch < e may hold the old map: their objects wait.
//
// Slots: one per thread that ever read, claimed on its first read (a
// lock-free push onto a list that only grows, or a slot a finished thread
// released), released at thread exit by a thread_local destructor (two
// atomic stores: no lock, no Python; it also runs for a daemon thread that
// CPython ends with pthread_exit at interpreter exit). A read section never
// blocks and never runs Python code, so a thread never stops inside one: no
// slot stays announced across a wait, an exit, or a stop-the-world pause.
// Slots are never freed (the list is bounded by the most threads ever alive
// at once); their memory is what a writer scans.
#ifndef CPYTREE_SRC_GRACE_H_
#define CPYTREE_SRC_GRACE_H_

#include <atomic>
#include <cstdint>

#include "base/ft.h"

namespace cpytree {
namespace grace {

#if CPYTREE_FREE_THREADED

// A thread's announcement. Its own cache line: writers scan every slot.
struct alignas(64) ReaderSlot {
  // 0 while the thread reads nothing; else the epoch it announced.
  std::atomic<std::uint64_t> epoch{0};
  // Whether a live thread owns the slot (a finished thread's is reused).
  std::atomic<bool> in_use{false};
  // The next slot of the list; fixed once the slot is pushed.
  ReaderSlot* next = nullptr;
};
static_assert(sizeof(ReaderSlot) == 64, "one reader slot per cache line");

// This thread's slot, null until its first read.
extern thread_local ReaderSlot* t_reader_slot;

// Claims a slot for this thread (its first read). Cold.
CPYTREE_NOINLINE ReaderSlot* ClaimReaderSlot();

inline ReaderSlot* ThisThreadSlot() {
  ReaderSlot* slot = t_reader_slot;
  return CPYTREE_LIKELY(slot != nullptr) ? slot : ClaimReaderSlot();
}

// Announces that this thread reads what writers publish at `epoch` (> 0, the
// writers' epoch loaded with acquire before the read). Then load the
// published pointer with seq_cst.
inline void BeginRead(ReaderSlot* slot, std::uint64_t epoch) {
  slot->epoch.store(epoch, std::memory_order_seq_cst);
}

// Ends this thread's read: nothing read since BeginRead is used after.
inline void EndRead(ReaderSlot* slot) { slot->epoch.store(0, std::memory_order_release); }
inline void EndRead() {
  ReaderSlot* slot = t_reader_slot;
  if (slot != nullptr) EndRead(slot);
}

// The oldest epoch a reader announced and has not ended (UINT64_MAX when none
// reads): an object retired at epoch e may be freed once e <= OldestReader().
// Call after the new pointer is published and the epoch bumped.
std::uint64_t OldestReader();

#else

inline void EndRead() {}

#endif

}  // namespace grace
}  // namespace cpytree

#endif  // CPYTREE_SRC_GRACE_H_
