// Runs the AOTInductor package of examples/aoti/model.py from C++, with nested
// inputs and outputs: the reason the cpytree header library exists.
//
//   aoti_main PACKAGE.pt2 OUT.pt      run once, print the outputs, save them for the test
//   aoti_main PACKAGE.pt2 --errors    print the errors of mismatching inputs/outputs
//   aoti_main PACKAGE.pt2 --time N    time the pytree work around the model
//
// The package carries its call spec (protocol-1 JSON of the input and output
// specs); cpytree::Loads reads it. The inputs are built twice, as a dynamic
// cpytree::Tree<at::Tensor> and as a static C++ struct (NodeTraits below),
// flattened against the input spec (cpytree::FlattenSpec) and run; the flat
// outputs are rebuilt by the output spec (cpytree::Unflatten into a Tree,
// cpytree::UnflattenAs into a struct).
//
// A None leaf is an undefined at::Tensor (LeafTraits below): torch returns
// one for a None output, and None inputs are dropped before the run, as
// torch's AOTICompiledModel.__call__ drops every leaf that is not a tensor.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/serialize.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpytree/cpytree.h"
#include "cpytree/json.h"

// ---- Counting operator new (allocations per call, a deterministic count) ----

static std::atomic<long> g_allocations{0};

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

// ---- The model's types, as C++ sees them ------------------------------------

// Python: class Pair(NamedTuple): left, right (serialized as cpytree_aoti.Pair).
struct Pair {
  at::Tensor left, right;
};
// Python: @dataclass class Scale: weight, shift (registered with torch.export).
struct Scale {
  at::Tensor weight, shift;
};
// Python: forward(feats, pair, scale, mask), called with positional args only.
using Feats = std::map<std::string, std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>>>;
struct Args {
  Feats feats;
  Pair pair;
  Scale scale;
  std::optional<at::Tensor> mask;
};
// The call spec's input: (args, kwargs).
using Inputs = std::pair<Args, std::map<std::string, at::Tensor>>;
// Python: {"sum": (t, [t, t]), "pair": Pair, "scale": Scale, "none": None}.
struct Outputs {
  std::tuple<at::Tensor, std::vector<at::Tensor>> sum;
  Pair pair;
  Scale scale;
  std::optional<at::Tensor> none;
};

// What torch.export wrote for Scale's context (its field names), as JSON text.
constexpr const char* kScaleContext = R"([["weight", "shift"], []])";

template <>
struct cpytree::LeafTraits<at::Tensor> {
  static constexpr bool kHasNone = true;
  static at::Tensor None() { return at::Tensor(); }
  static bool IsNone(const at::Tensor& t) { return !t.defined(); }
};

template <>
struct cpytree::NodeTraits<Pair> {
  static constexpr NodeKind kKind = NodeKind::kNamedTuple;
  using Children = std::tuple<at::Tensor, at::Tensor>;
  static std::string TypeName() { return "cpytree_aoti.Pair"; }
  template <class F>
  static void Visit(const Pair& p, F&& f) {
    f(p.left);
    f(p.right);
  }
  template <class B>
  static Pair Build(B& b) {
    Pair p;
    b.NextInto(p.left);
    b.NextInto(p.right);
    return p;
  }
};

template <>
struct cpytree::NodeTraits<Scale> {
  static constexpr NodeKind kKind = NodeKind::kCustom;
  using Children = std::tuple<at::Tensor, at::Tensor>;
  static std::string TypeName() { return "cpytree_aoti.Scale"; }
  static Value Context(const Scale&) { return kScaleContext; }
  template <class F>
  static void Visit(const Scale& s, F&& f) {
    f(s.weight);
    f(s.shift);
  }
  template <class B>
  static Scale Build(B& b) {
    Scale s;
    b.NextInto(s.weight);
    b.NextInto(s.shift);
    return s;
  }
};

template <>
struct cpytree::NodeTraits<Args> {
  static constexpr NodeKind kKind = NodeKind::kTuple;
  using Children = std::tuple<Feats, Pair, Scale, std::optional<at::Tensor>>;
  template <class F>
  static void Visit(const Args& a, F&& f) {
    f(a.feats);
    f(a.pair);
    f(a.scale);
    f(a.mask);
  }
};

template <>
struct cpytree::NodeTraits<Outputs> {
  static constexpr NodeKind kKind = NodeKind::kDict;
  using Children = std::tuple<std::tuple<at::Tensor, std::vector<at::Tensor>>, Pair, Scale,
                              std::optional<at::Tensor>>;
  template <class F>
  static void Visit(const Outputs& o, F&& f) {
    f(std::string("sum"), o.sum);
    f(std::string("pair"), o.pair);
    f(std::string("scale"), o.scale);
    f(std::string("none"), o.none);
  }
  template <class B>
  static Outputs Build(B& b) {
    Outputs o;
    b.ExpectKeys({"sum", "pair", "scale", "none"});
    b.NextInto(o.sum);
    b.NextInto(o.pair);
    b.NextInto(o.scale);
    b.NextInto(o.none);
    return o;
  }
};

namespace {

using TensorTree = cpytree::Tree<at::Tensor>;

// Input leaf number k: the formula model.py's leaf() computes.
at::Tensor Leaf(int k, at::IntArrayRef shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return (at::arange(n, at::kFloat).reshape(shape) * 0.25 - k).sin();
}

std::vector<at::Tensor> InputLeaves() {
  return {Leaf(0, {3, 4}), Leaf(1, {3, 4}), Leaf(2, {3, 4}), Leaf(3, {3, 4}),
          Leaf(4, {2, 2}), Leaf(5, {2, 2}), Leaf(6, {4}),    Leaf(7, {4})};
}

// The inputs as a dynamic tree: ((feats, pair, scale, None), {}); the tests
// of mismatches replace feats['a'][0] or pair.
TensorTree InputTree(const std::vector<at::Tensor>& x,
                     std::optional<TensorTree> a_first = std::nullopt,
                     std::optional<TensorTree> pair = std::nullopt) {
  using T = TensorTree;
  T feats = T::Dict({{"a", T::Tuple({a_first ? *a_first : T::List({x[0], x[1]}), T::List({x[2]})})},
                     {"b", T::Tuple({T::List({x[3]}), T::List({})})}});
  T args = T::Tuple({std::move(feats), pair ? *pair : T::NamedTuple("cpytree_aoti.Pair", {x[4], x[5]}),
                     T::Custom("cpytree_aoti.Scale", kScaleContext, {x[6], x[7]}),
                     T(at::Tensor())});
  return T::Tuple({std::move(args), T::Dict({})});
}

// The inputs as a static struct.
Inputs InputStruct(const std::vector<at::Tensor>& x) {
  Args a;
  a.feats["a"] = {{x[0], x[1]}, {x[2]}};
  a.feats["b"] = {{x[3]}, {}};
  a.pair = {x[4], x[5]};
  a.scale = {x[6], x[7]};
  return {std::move(a), {}};
}

// What the model takes: the leaves that are tensors (None leaves dropped).
std::vector<at::Tensor> Defined(std::vector<at::Tensor> leaves) {
  leaves.erase(std::remove_if(leaves.begin(), leaves.end(),
                              [](const at::Tensor& t) { return !t.defined(); }),
               leaves.end());
  return leaves;
}

std::string Describe(const at::Tensor& t) {
  if (!t.defined()) return "None";
  std::string s = "f32[";
  for (std::size_t d = 0; d < t.sizes().size(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

struct Specs {
  cpytree::TreeSpec in, out;
};

Specs LoadSpecs(torch::inductor::AOTIModelPackageLoader& loader) {
  std::vector<std::string> call_spec = loader.get_call_spec();
  return {cpytree::Loads(call_spec.at(0)), cpytree::Loads(call_spec.at(1))};
}

int RunOnce(torch::inductor::AOTIModelPackageLoader& loader, const char* out_path) {
  Specs specs = LoadSpecs(loader);
  std::vector<at::Tensor> x = InputLeaves();
  std::vector<at::Tensor> from_tree = cpytree::FlattenSpec<at::Tensor>(specs.in, InputTree(x));
  std::vector<at::Tensor> from_struct =
      cpytree::FlattenSpec<at::Tensor>(specs.in, InputStruct(x));
  for (std::size_t k = 0; k < from_tree.size(); ++k) {
    if (!from_tree[k].is_same(from_struct[k])) {
      std::cerr << "the Tree and the struct flatten differently at leaf " << k << "\n";
      return 1;
    }
  }
  std::vector<at::Tensor> flat_out = loader.boxed_run(Defined(from_tree));
  TensorTree out = cpytree::Unflatten(specs.out, flat_out);
  Outputs as_struct = cpytree::UnflattenAs<Outputs>(specs.out, flat_out);
  std::cout << "input spec:  " << specs.in.num_leaves() << " leaves, "
            << Defined(from_tree).size() << " tensors\n";
  std::cout << "outputs:     " << out.ToString(Describe) << "\n";
  std::cout << "struct:      pair.left " << Describe(as_struct.pair.left) << ", none "
            << (as_struct.none.has_value() ? "set" : "nullopt") << "\n";
  // Saved for the test: the Tree flattened again (its own spec, as JSON) and
  // its leaves; torch.load reads what torch::pickle_save writes.
  auto [leaves, spec] = cpytree::Flatten(out);
  c10::impl::GenericList list(c10::AnyType::get());
  for (const at::Tensor& t : leaves) list.push_back(t.defined() ? c10::IValue(t) : c10::IValue());
  std::vector<char> bytes =
      torch::pickle_save(c10::ivalue::Tuple::create({cpytree::Dumps(spec), list}));
  std::ofstream(out_path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
  return 0;
}

template <class F>
double MedianMicros(int iters, F&& f) {
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    auto stop = std::chrono::steady_clock::now();
    runs.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / iters);
  }
  std::sort(runs.begin(), runs.end());
  return runs[3];
}

// Heap allocations of one call of f (after a warm-up call).
template <class F>
long Allocations(F&& f) {
  f();
  long before = g_allocations.load();
  f();
  return g_allocations.load() - before;
}

int Time(torch::inductor::AOTIModelPackageLoader& loader, int iters) {
  Specs specs = LoadSpecs(loader);
  std::vector<at::Tensor> x = InputLeaves();
  TensorTree tree = InputTree(x);
  Inputs in = InputStruct(x);
  std::vector<at::Tensor> flat_in = Defined(cpytree::FlattenSpec<at::Tensor>(specs.in, tree));
  std::vector<at::Tensor> flat_out = loader.boxed_run(std::vector<at::Tensor>(flat_in));
  auto tree_around = [&] {
    std::vector<at::Tensor> f = Defined(cpytree::FlattenSpec<at::Tensor>(specs.in, tree));
    TensorTree out = cpytree::Unflatten(specs.out, flat_out);
    return f.size() + out.size();
  };
  auto struct_around = [&] {
    std::vector<at::Tensor> f = Defined(cpytree::FlattenSpec<at::Tensor>(specs.in, in));
    Outputs out = cpytree::UnflattenAs<Outputs>(specs.out, flat_out);
    return f.size() + out.pair.left.dim();
  };
  auto tree_flatten_unflatten = [&] {
    std::vector<at::Tensor> f = Defined(cpytree::Flatten(tree).leaves);
    TensorTree out = cpytree::Unflatten(specs.out, flat_out);
    return f.size() + out.size();
  };
  auto run = [&] { return loader.boxed_run(std::vector<at::Tensor>(flat_in)).size(); };
  std::printf("in_spec %lld nodes / out_spec %lld nodes; %d iters x 7 runs, medians\n",
              static_cast<long long>(specs.in.num_nodes()),
              static_cast<long long>(specs.out.num_nodes()), iters);
  std::printf("%-52s %8.2f us  %4ld allocations\n", "C++ FlattenSpec(Tree) + Unflatten -> Tree",
              MedianMicros(iters, tree_around), Allocations(tree_around));
  std::printf("%-52s %8.2f us  %4ld allocations\n",
              "C++ FlattenSpec(struct) + UnflattenAs<struct>", MedianMicros(iters, struct_around),
              Allocations(struct_around));
  std::printf("%-52s %8.2f us  %4ld allocations\n", "C++ Flatten(Tree) + Unflatten -> Tree",
              MedianMicros(iters, tree_flatten_unflatten), Allocations(tree_flatten_unflatten));
  std::printf("%-52s %8.2f us\n", "model boxed_run alone", MedianMicros(iters, run));
  return 0;
}

template <class F>
void PrintError(const char* what, F&& f) {
  try {
    f();
    std::cout << what << ": no error\n";
  } catch (const cpytree::StructureError& e) {
    std::cout << what << ": " << e.what() << "\n";
  }
}

int Errors(torch::inductor::AOTIModelPackageLoader& loader) {
  Specs specs = LoadSpecs(loader);
  std::vector<at::Tensor> x = InputLeaves();
  PrintError("tree, a list one too long", [&] {
    TensorTree t = InputTree(x, TensorTree::List({x[0], x[1], x[0]}));
    cpytree::FlattenSpec<at::Tensor>(specs.in, t);
  });
  PrintError("tree, a list for the namedtuple", [&] {
    TensorTree t = InputTree(x, std::nullopt, TensorTree::List({x[4], x[5]}));
    cpytree::FlattenSpec<at::Tensor>(specs.in, t);
  });
  PrintError("struct, a key the spec lacks", [&] {
    Inputs in = InputStruct(x);
    in.first.feats["c"] = in.first.feats["b"];
    in.first.feats.erase("b");
    cpytree::FlattenSpec<at::Tensor>(specs.in, in);
  });
  PrintError("struct, a tensor where the spec has a list", [&] {
    // (feats, pair, scale, mask) with feats['b'] as ([t], t): the C++ type differs.
    using Wrong = std::map<std::string, std::tuple<std::vector<at::Tensor>, at::Tensor>>;
    std::tuple<Wrong, Pair, Scale, std::optional<at::Tensor>> args{
        Wrong{{"a", {{x[0], x[1]}, x[2]}}, {"b", {{x[3]}, x[3]}}}, {x[4], x[5]}, {x[6], x[7]},
        std::nullopt};
    cpytree::FlattenSpec<at::Tensor>(specs.in, std::make_pair(args, std::map<std::string, at::Tensor>{}));
  });
  std::vector<at::Tensor> flat_out =
      loader.boxed_run(Defined(cpytree::FlattenSpec<at::Tensor>(specs.in, InputStruct(x))));
  PrintError("outputs into a type with a tuple of 3", [&] {
    using Wrong = std::map<std::string, std::tuple<at::Tensor, std::array<at::Tensor, 3>>>;
    (void)cpytree::UnflattenAs<Wrong>(specs.out, flat_out);
  });
  PrintError("outputs into a struct, one output short", [&] {
    flat_out.pop_back();
    (void)cpytree::UnflattenAs<Outputs>(specs.out, flat_out);
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: aoti_main PACKAGE.pt2 (OUT.pt | --errors | --time N)\n";
    return 2;
  }
  c10::InferenceMode guard;
  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  try {
    if (std::strcmp(argv[2], "--errors") == 0) return Errors(loader);
    if (std::strcmp(argv[2], "--time") == 0) return Time(loader, argc > 3 ? std::atoi(argv[3]) : 2000);
    return RunOnce(loader, argv[2]);
  } catch (const cpytree::Error& e) {
    std::cerr << "cpytree: " << e.what() << "\n";
    return 1;
  }
}
