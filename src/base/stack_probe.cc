// StackLow (common.h): the lowest address of the calling thread's stack, the
// one place that asks the operating system. Each platform's own call:
//   Linux     pthread_getattr_np (glibc, musl; reads /proc/self/maps for the
//             main thread) and pthread_attr_getstack
//   macOS     pthread_get_stackaddr_np (the stack's top: it grows down) less
//             pthread_get_stacksize_np
//   Windows   GetCurrentThreadStackLimits (Windows 8 and later): the low end
//             of the reserved stack
// Elsewhere it answers 0 ("unknown"), as when a call fails: the traversals
// then bound the depth by the recursion limit alone (common.h, DepthLimit).
// No other file of the engine makes a platform call.
#include <cstdint>

#include "base/common.h"

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#elif defined(__APPLE__) || defined(__linux__)
#include <pthread.h>
#endif

namespace cpytree {

namespace {

std::uintptr_t AskTheSystem() {
#if defined(_WIN32)
  ULONG_PTR low = 0;
  ULONG_PTR high = 0;
  GetCurrentThreadStackLimits(&low, &high);
  return static_cast<std::uintptr_t>(low);
#elif defined(__APPLE__)
  pthread_t self = pthread_self();
  auto top = reinterpret_cast<std::uintptr_t>(pthread_get_stackaddr_np(self));
  std::size_t size = pthread_get_stacksize_np(self);
  return top > size ? top - size : 0;
#elif defined(__linux__)
  std::uintptr_t low = 0;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr = nullptr;
    std::size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      low = reinterpret_cast<std::uintptr_t>(addr);
    }
    pthread_attr_destroy(&attr);
  }
  return low;
#else
  return 0;
#endif
}

}  // namespace

std::uintptr_t StackLow() {
  // Computed once per thread (Linux reads /proc for the main thread).
  // 1 means "not computed yet".
  thread_local std::uintptr_t low = 1;
  if (low == 1) low = AskTheSystem();
  return low;
}

}  // namespace cpytree
