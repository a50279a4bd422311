//===- TorchScriptAliasing.cpp - in-place writes through views ------------===//
//
// The TorchScript importer rewrites in-place writes through views: it keeps,
// per tensor of the example run, the IR value that holds its current
// contents and, for tensors made by a view op it can invert (select, slice,
// narrow, diagonal, transpose, permute, view/reshape and friends), the op and
// the tensor it views. A write gives the written tensor its new value, then
// each tensor it views, up to the root, through the view's scatter form
// (`aten::slice_scatter`, `aten::select_scatter`, ...); other views that
// overlap the written memory are made again from their new parent when next
// read. A tensor that shares the written memory in a way the importer
// cannot replay is an error when it is read again.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImpl.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace pippy::torchscript {

Importer::Tracked *Importer::trackedOf(jit::Value *value) {
  if (tracked.empty())
    return nullptr;
  auto v = values.find(value);
  if (v == values.end() || !v->second.isTensor())
    return nullptr;
  auto t = tracked.find(v->second.toTensor().unsafeGetTensorImpl());
  return t == tracked.end() ? nullptr : t->second;
}

/// View ops whose writes can be replayed on the viewed tensor.
static bool isInvertibleView(StringRef op) {
  static const std::set<std::string> kNames = {"torch.aten.select.int",
                                               "torch.aten.slice.Tensor",
                                               "torch.aten.narrow",
                                               "torch.aten.diagonal",
                                               "torch.aten.transpose.int",
                                               "torch.aten.t",
                                               "torch.aten.permute",
                                               "torch.aten.view",
                                               "torch.aten.reshape",
                                               "torch.aten._unsafe_view",
                                               "torch.aten.flatten.using_ints",
                                               "torch.aten.unflatten.int",
                                               "torch.aten.squeeze",
                                               "torch.aten.squeeze.dim",
                                               "torch.aten.unsqueeze",
                                               "torch.aten.view_as",
                                               "torch.aten.reshape_as"};
  return kNames.count(op.str()) != 0;
}

void Importer::track(jit::Value *value, jit::Node *node) {
  auto v = values.find(value);
  auto m = mapped.find(value);
  if (v == values.end() || m == mapped.end() || !v->second.isTensor())
    return;
  const at::Tensor &t = v->second.toTensor();
  if (!t.defined() || !t.has_storage() || t.is_sparse())
    return;
  auto [it, inserted] = tracked.try_emplace(t.unsafeGetTensorImpl());
  if (!inserted)
    return;
  trackedArena.push_back(std::make_unique<Tracked>(t));
  Tracked &entry = *trackedArena.back();
  it->second = &entry;
  entry.current = m->second;
  auto &users = storageUsers[t.storage().unsafeGetStorageImpl()];
  // A storage freed earlier may have left its address to this one.
  llvm::erase_if(users, [](Tracked *u) { return u->impl.expired(); });
  users.push_back(&entry);
  // A view the importer can invert records what it views.
  Operation *op = m->second.getDefiningOp();
  if (!node || !op || op->getNumOperands() == 0 ||
      !isInvertibleView(op->getName().getStringRef()))
    return;
  Tracked *parent = trackedOf(node->inputs()[0]);
  if (!parent || !values.at(node->inputs()[0])
                      .toTensor()
                      .storage()
                      .is_alias_of(t.storage()))
    return;
  if (op->getName().getStringRef() == "torch.aten.permute")
    entry.dims = values.at(node->inputs()[1]).toIntVector();
  if (op->getName().getStringRef() == "torch.aten.narrow" &&
      (!values.at(node->inputs()[2]).isInt() ||
       !values.at(node->inputs()[3]).isInt()))
    return;
  if (op->getName().getStringRef() == "torch.aten.narrow")
    entry.dims = {values.at(node->inputs()[2]).toInt(),
                  values.at(node->inputs()[3]).toInt()};
  entry.parent = parent;
  entry.viewOp = op;
}

/// Whether two tensors share an element.
static bool overlaps(const at::Tensor &a, const at::Tensor &b) {
  if (!a.storage().is_alias_of(b.storage()))
    return false;
  if (a.numel() == 0 || b.numel() == 0)
    return false;
  if (a.element_size() != b.element_size())
    return true;
  int64_t n = a.storage().nbytes() / a.element_size();
  at::Tensor mask = at::zeros({n}, at::kBool);
  mask.as_strided(a.sizes(), a.strides(), a.storage_offset()).fill_(true);
  return mask.as_strided(b.sizes(), b.strides(), b.storage_offset())
      .any()
      .item<bool>();
}

/// An in-place write must not reach a parameter's memory through a view.
void Importer::checkNotParameterMemory(jit::Node *node, jit::Value *written) {
  auto v = values.find(written);
  if (v == values.end() || !v->second.isTensor())
    return;
  const at::Tensor &t = v->second.toTensor();
  for (const auto &[name, p] : parameterTensors)
    if (overlaps(p, t))
      failWriteTo(node, name, " through a view of it");
}

/// Parameters are read-only: a stage program is a function of them, the
/// same for every micro-batch. A buffer may be updated in place by an op
/// that writes it directly (it becomes a `pippy.assign`), not through a
/// view or an out= argument.
void Importer::failWriteTo(jit::Node *node, const std::string &name,
                           const std::string &how, const std::string &kind) {
  bool buffer = llvm::is_contained(buffers, name);
  fail(kind + describe(node) + " writes to " +
       (buffer ? "buffer '" : "parameter '") + name + "'" + how +
       (buffer ? "; pippy-import takes in-place updates of a buffer itself "
                 "(`buffer.add_(1)`), not through a view of it or as an "
                 "out= argument"
               : ""));
}

/// The IR value with a tracked tensor's contents, remade if stale.
Value Importer::resolve(Tracked &entry, jit::Node *user) {
  if (!entry.clobbered.empty())
    fail("a tensor read by " +
         (user ? describe(user) : std::string("the output")) +
         " was overwritten by in-place op " + entry.clobbered +
         " through a view that pippy-import cannot replay (split, "
         "chunk, unbind, expand, as_strided, ...); write that op out of "
         "place");
  if (entry.stale) {
    Value parent = resolve(*entry.parent, user);
    Operation *copy = builder.clone(*entry.viewOp);
    copy->setOperand(0, parent);
    entry.current = copy->getResult(0);
    entry.stale = false;
  }
  return entry.current;
}

/// `base` with `view`'s elements replaced by `src` (the scatter form of
/// the view op that made `view` from `base`).
Value Importer::emitScatter(Tracked &view, Value base, Value src,
                            Location loc) {
  Operation *op = view.viewOp;
  StringRef name = op->getName().getStringRef();
  auto create = [&](StringRef opName, ArrayRef<Value> operands) {
    OperationState state(loc, opName);
    state.addOperands(operands);
    state.addTypes(base.getType());
    return builder.create(state)->getResult(0);
  };
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  if (name == "torch.aten.select.int")
    return create("torch.aten.select_scatter",
                  {base, src, operand(1), operand(2)});
  if (name == "torch.aten.slice.Tensor")
    return create("torch.aten.slice_scatter",
                  {base, src, operand(1), operand(2), operand(3), operand(4)});
  if (name == "torch.aten.narrow")
    return create("torch.aten.slice_scatter",
                  {base, src, operand(1), emitInt(view.dims[0], loc),
                   emitInt(view.dims[0] + view.dims[1], loc), emitInt(1, loc)});
  if (name == "torch.aten.diagonal")
    return create("torch.aten.diagonal_scatter",
                  {base, src, operand(1), operand(2), operand(3)});
  if (name == "torch.aten.transpose.int")
    return create("torch.aten.transpose.int", {src, operand(1), operand(2)});
  if (name == "torch.aten.t")
    return create("torch.aten.t", {src});
  if (name == "torch.aten.permute") {
    int64_t rank = static_cast<int64_t>(view.dims.size());
    std::vector<int64_t> inverse(rank);
    for (int64_t i = 0; i < rank; ++i)
      inverse[(view.dims[i] % rank + rank) % rank] = i;
    return create("torch.aten.permute",
                  {src, emitConstant(c10::IValue(inverse), loc)});
  }
  // The rest keep the element order: reshape back.
  return create("torch.aten.reshape",
                {src, emitConstant(c10::IValue(view.parent->sizes), loc)});
}

/// After `node` wrote `result` into `written`: the written tensor, then
/// every tensor it views up to the root, get their new values; the other
/// tensors overlapping the written memory are remade or poisoned.
void Importer::recordWrite(jit::Node *node, jit::Value *writtenValue,
                           Value result) {
  Tracked *written = trackedOf(writtenValue);
  if (!written)
    return;
  Location loc = result.getLoc();
  std::set<Tracked *> fresh;
  Tracked *cur = written;
  Value value = result;
  for (;;) {
    cur->current = value;
    cur->written = true;
    cur->stale = false;
    fresh.insert(cur);
    if (!cur->parent)
      break;
    Value before = resolve(*cur->parent, node);
    value = emitScatter(*cur, before, value, loc);
    cur = cur->parent;
  }
  Tracked *root = cur;
  auto rootOf = [](Tracked *t) {
    while (t->parent)
      t = t->parent;
    return t;
  };
  const at::Tensor &t = values.at(writtenValue).toTensor();
  for (Tracked *other : storageUsers[t.storage().unsafeGetStorageImpl()]) {
    if (fresh.count(other))
      continue;
    // A tensor that is gone cannot be read again.
    c10::intrusive_ptr<c10::TensorImpl> alive = other->impl.lock();
    if (!alive || !overlaps(at::Tensor(alive), t))
      continue;
    other->written = true;
    if (rootOf(other) == root)
      other->stale = true;
    else if (other->clobbered.empty())
      other->clobbered = describe(node);
  }
}

} // namespace pippy::torchscript
