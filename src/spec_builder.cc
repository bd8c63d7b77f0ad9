// The ground floor of specs: the TreeSpec type object, allocation of spec
// objects (from a builder's arrays or a range of another spec) and the
// per-thread scratch builder.
#include "spec_builder.h"

#include <algorithm>
#include <vector>

namespace cpytree {

PyTypeObject TreeSpecType = {PyVarObject_HEAD_INIT(nullptr, 0)};

namespace {

TreeSpecObject* AllocSpec() {
  TreeSpecObject* s = PyObject_GC_New(TreeSpecObject, &TreeSpecType);
  if (s == nullptr) return nullptr;
  s->weakrefs = nullptr;
  s->intern_next = nullptr;
  s->intern_hash = 0;
  s->eq_hash = -1;
  s->torch_hash = -1;
  s->interned = false;
  s->nodes = nullptr;
  s->items = nullptr;
  return s;
}

}  // namespace

TreeSpecObject* NewSpecTakingBuilder(SpecBuilder* b) {
  // Taking the arrays pays when they are about the tree's size; a builder
  // grown by an earlier, larger tree would hand its slack to the spec.
  auto tight = [](std::size_t size, std::size_t capacity) {
    return capacity <= size + size / 2 + 16;
  };
  if (!tight(b->nodes.size(), b->nodes.capacity()) ||
      !tight(b->items.size(), b->items.capacity())) {
    return NewSpecFromRange(b->View(), 0, static_cast<std::int64_t>(b->nodes.size()) - 1);
  }
  TreeSpecObject* s = AllocSpec();
  if (s == nullptr) return nullptr;
  std::size_t node_capacity = b->nodes.capacity(), item_capacity = b->items.capacity();
  s->nodes = new std::vector<Node>(std::move(b->nodes));
  s->items = new std::vector<PyObject*>(std::move(b->items));  // the references move too
  // Re-reserve what the builder had, up to a bound: one huge tree must not
  // pin its size in the per-thread builder forever.
  constexpr std::size_t kMaxKept = 1 << 16;
  b->nodes = std::vector<Node>();
  b->items = std::vector<PyObject*>();
  b->nodes.reserve(std::min(node_capacity, kMaxKept));
  b->items.reserve(std::min(item_capacity, kMaxKept));
  PyObject_GC_Track(reinterpret_cast<PyObject*>(s));
  return s;
}

TreeSpecObject* NewSpecFromRange(SpecView v, std::int64_t begin, std::int64_t end) {
  TreeSpecObject* s = AllocSpec();
  if (s == nullptr) return nullptr;
  s->nodes = new std::vector<Node>(v.nodes + begin, v.nodes + end + 1);
  s->items = new std::vector<PyObject*>();
  // Items of the range are contiguous, starting at the root's ctx (pre-order).
  std::uint32_t base = v.nodes[end].ctx;
  std::size_t count = 0;
  for (Node& n : *s->nodes) {
    count += NumContextItems(n.kind, n.arity);
    n.ctx -= base;
  }
  s->items->assign(v.items + base, v.items + base + count);
  for (PyObject* o : *s->items) Py_INCREF(o);
  PyObject_GC_Track(reinterpret_cast<PyObject*>(s));
  return s;
}

// ScratchBuilder: one cached builder per thread, handed out when free.
namespace {
thread_local SpecBuilder* t_cached = nullptr;
thread_local bool t_cached_in_use = false;
}  // namespace

ScratchBuilder::ScratchBuilder() {
  if (!t_cached_in_use) {
    if (t_cached == nullptr) t_cached = new SpecBuilder();
    t_cached_in_use = true;
    b_ = t_cached;
    cached_ = true;
  } else {
    b_ = new SpecBuilder();
    cached_ = false;
  }
}

ScratchBuilder::~ScratchBuilder() {
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
