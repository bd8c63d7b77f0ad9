// The TreeSpec type object and the allocation of spec objects (from an
// arena's arrays or a range of another spec).
#include "ground/spec_object.h"

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

TreeSpecObject* NewSpecTakingArena(TraversalArena* b) {
  // Taking the arrays pays when they are about the tree's size; an arena
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
  // Re-reserve what the arena had, up to a bound: one huge tree must not
  // pin its size in the per-thread arena forever.
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

}  // namespace cpytree
