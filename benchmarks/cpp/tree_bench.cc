// Micro-benchmark of the header library on a ResNet50-sized dynamic tree:
// a dict of 160 module entries, each a dict holding dict/list/tuple children
// with tensor-like leaves (1721 nodes, 1040 leaves), as a C++ runtime would
// hold a model's parameters. Reports the median of several runs per operation
// and, beside it, the heap allocations of one call (a counting operator new:
// a deterministic count to pair with the time).
//
//   cpytree_bench [--iters N]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cpytree/cpytree.h"
#include "cpytree/json.h"

// Every operator new of the process counts one allocation.
static long g_allocations = 0;
void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// A tensor handle: shared storage plus a shape, copied the way at::Tensor is
// (a reference-count increment).
struct Tensor {
  std::shared_ptr<std::vector<float>> storage;
  std::array<std::int64_t, 4> sizes;
};

using TensorTree = cpytree::Tree<Tensor>;

TensorTree Module(int i, const std::shared_ptr<std::vector<float>>& storage) {
  auto t = [&](std::int64_t n) { return Tensor{storage, {n, 3, 3, 3}}; };
  std::vector<TensorTree::Entry> entries = {
      {"params", TensorTree::Dict({{"weight", t(i)}, {"bias", t(i + 1)}})},
      {"buffers", TensorTree::List({t(i + 2), t(i + 3)})},
      {"meta", TensorTree::Tuple({t(i + 4), t(i + 7)})},
  };
  if (i % 4 == 0) entries.push_back({"running", TensorTree::List({t(i + 5), t(i + 6)})});
  return TensorTree::Dict(std::move(entries));
}

TensorTree ResNet50Like() {
  auto storage = std::make_shared<std::vector<float>>(16);
  std::vector<TensorTree::Entry> modules;
  for (int i = 0; i < 160; ++i) {
    modules.push_back({"layer" + std::to_string(i / 40 + 1) + "." + std::to_string(i % 40) + ".conv",
                       Module(i, storage)});
  }
  return TensorTree::Dict(std::move(modules));
}

volatile std::size_t g_sink;  // keeps results alive

long g_last_allocations = 0;  // allocations of one call of the last timed function

template <class F>
double MedianMicros(int iters, F&& f) {
  g_sink = g_sink + f();
  long before = g_allocations;
  g_sink = g_sink + f();
  g_last_allocations = g_allocations - before;
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) g_sink = g_sink + f();
    auto stop = std::chrono::steady_clock::now();
    runs.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / iters);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

void Report(const char* name, double us, std::int64_t nodes) {
  std::printf("%-40s %9.2f us   %6.1f ns/node   %6ld allocations\n", name, us,
              us * 1000.0 / nodes, g_last_allocations);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 2000;
  if (argc == 3 && std::strcmp(argv[1], "--iters") == 0) iters = std::max(1, std::atoi(argv[2]));

  TensorTree tree = ResNet50Like();
  auto [leaves, spec] = cpytree::Flatten(tree);
  std::string text = cpytree::Dumps(spec);
  const std::int64_t n = spec.num_nodes();
  std::printf("tree: %lld nodes, %lld leaves, %zu modules; spec JSON %zu bytes; %d iters x 7 runs\n",
              static_cast<long long>(n), static_cast<long long>(spec.num_leaves()), tree.size(),
              text.size(), iters);

  Report("Flatten(Tree) -> leaves + spec", MedianMicros(iters, [&] {
           auto r = cpytree::Flatten(tree);
           return r.leaves.size() + static_cast<std::size_t>(r.spec.num_nodes());
         }), n);
  Report("Leaves(Tree) (no spec)", MedianMicros(iters, [&] { return cpytree::Leaves(tree).size(); }), n);
  Report("Structure(Tree)", MedianMicros(iters, [&] {
           return static_cast<std::size_t>(cpytree::Structure(tree).num_nodes());
         }), n);
  Report("Unflatten(spec, leaves) -> Tree", MedianMicros(iters, [&] {
           std::vector<Tensor> copy = leaves;
           return cpytree::Unflatten(spec, std::move(copy)).size();
         }), n);
  Report("  (copy of the leaf vector alone)", MedianMicros(iters, [&] {
           std::vector<Tensor> copy = leaves;
           return copy.size();
         }), n);
  Report("Map(f, Tree)", MedianMicros(iters, [&] {
           return cpytree::Map([](const Tensor& t) { return t.sizes[0]; }, tree).size();
         }), n);
  Report("spec == spec (structural, distinct)", MedianMicros(iters, [&] {
           static const cpytree::TreeSpec other = cpytree::Loads(text);
           return static_cast<std::size_t>(spec == other);
         }), n);
  Report("spec.Hash()", MedianMicros(iters, [&] { return spec.Hash(); }), n);
  Report("Dumps(spec)", MedianMicros(iters / 4 + 1, [&] { return cpytree::Dumps(spec).size(); }), n);
  Report("Loads(text)", MedianMicros(iters / 4 + 1, [&] {
           return static_cast<std::size_t>(cpytree::Loads(text).num_nodes());
         }), n);
  Report("ToString(spec)", MedianMicros(iters / 4 + 1, [&] { return spec.ToString().size(); }), n);
  return 0;
}
