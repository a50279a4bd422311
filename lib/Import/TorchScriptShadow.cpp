//===- TorchScriptShadow.cpp - data-dependent shapes: the shadow run ------===//
//
// Ops whose result size depends on tensor contents (nonzero, masked_select,
// boolean indexing, unique, ...) start a second, shadow run of the
// TorchScript importer: their result gets one more row there, a number read
// out of a tensor (`item`, `int(t)`) one more unit, and every node
// downstream runs again on the shadow values. A size or count that differs
// between the two runs is not folded into a constant, and a tensor whose
// shape differs is marked `pippy.data_dependent_shape` (the indices of such
// results), so that no stage boundary is placed across it. Models without
// such ops run once.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImpl.h"

#include "pippy/Dialect/Torch/TorchDialect.h"

#include <optional>

using namespace mlir;
namespace td = ::mlir::torch;

namespace pippy::torchscript {

/// Ops whose result size depends on tensor contents, and the dimension
/// that grows.
static std::optional<int64_t> dataDependentDim(jit::Node *node,
                                               const jit::Stack &inputs) {
  static const std::set<std::string> kRows = {
      "aten::nonzero",    "aten::masked_select",
      "aten::argwhere",   "aten::unique_consecutive",
      "aten::_unique2",   "aten::_unique",
      "aten::unique_dim", "aten::repeat_interleave"};
  std::string kind = node->kind().toQualString();
  if (kRows.count(kind))
    return 0;
  if (kind != "aten::index" || inputs.size() < 2 || !inputs[1].isList())
    return std::nullopt;
  // Only a boolean (or uint8) mask makes the size depend on the data;
  // integer index tensors give their own, static, shape. The indexed
  // dimensions become one block of the result, where the first of them
  // was when they are adjacent, else in front.
  std::vector<int64_t> indexed;
  bool mask = false;
  int64_t position = 0;
  for (const c10::IValue &index : inputs[1].toListRef()) {
    if (!index.isNone()) {
      indexed.push_back(position);
      if (index.isTensor() && (index.toTensor().scalar_type() == at::kBool ||
                               index.toTensor().scalar_type() == at::kByte))
        mask = true;
    }
    ++position;
  }
  if (!mask)
    return std::nullopt;
  bool adjacent = indexed.back() - indexed.front() + 1 ==
                  static_cast<int64_t>(indexed.size());
  return adjacent ? indexed.front() : 0;
}

const c10::IValue &Importer::shadowOf(jit::Value *v) {
  auto it = shadow.find(v);
  return it != shadow.end() ? it->second : values.at(v);
}

static bool sameShape(const c10::IValue &a, const c10::IValue &b) {
  if (a.isTensor() && b.isTensor())
    return !a.toTensor().defined() || !b.toTensor().defined()
               ? a.toTensor().defined() == b.toTensor().defined()
               : a.toTensor().sizes() == b.toTensor().sizes();
  if (a.isList() && b.isList()) {
    auto la = a.toListRef(), lb = b.toListRef();
    if (la.size() != lb.size())
      return false;
    for (size_t i = 0; i < la.size(); ++i)
      if (!sameShape(la[i], lb[i]))
        return false;
    return true;
  }
  if (a.isTuple() && b.isTuple()) {
    const auto &ea = a.toTupleRef().elements();
    const auto &eb = b.toTupleRef().elements();
    if (ea.size() != eb.size())
      return false;
    for (size_t i = 0; i < ea.size(); ++i)
      if (!sameShape(ea[i], eb[i]))
        return false;
    return true;
  }
  return true;
}

/// Whether a shape-derived value (a size, a count, a list of sizes, a
/// 0-d tensor made from one) differs between the two runs.
bool Importer::shadowDiffers(jit::Value *v) {
  if (opaque.count(v))
    return true;
  auto it = shadow.find(v);
  if (it == shadow.end())
    return false;
  const c10::IValue &a = values.at(v), &b = it->second;
  if (a.isTensor() && b.isTensor())
    return a.toTensor().sizes() != b.toTensor().sizes() ||
           (a.toTensor().numel() == 1 &&
            !at::equal(a.toTensor(), b.toTensor()));
  if (a.isTensor() || b.isTensor())
    return true;
  return !(a == b);
}

void Importer::copyShadow(jit::Value *from, jit::Value *to) {
  if (auto it = shadow.find(from); it != shadow.end())
    shadow[to] = it->second;
  if (opaque.count(from))
    opaque.insert(to);
}

void Importer::executeShadow(jit::Node *node) {
  bool any = false, shapes = false, blind = false;
  for (jit::Value *input : node->inputs()) {
    blind |= opaque.count(input) != 0;
    if (auto it = shadow.find(input); it != shadow.end()) {
      any = true;
      shapes |= !sameShape(it->second, values.at(input));
    }
  }
  auto blindOutputs = [&] {
    for (jit::Value *output : node->outputs())
      opaque.insert(output);
  };
  if (blind)
    return blindOutputs();
  static const std::set<std::string> kScalarOfTensor = {
      "aten::item", "aten::Int", "aten::Float", "aten::_local_scalar_dense",
      "aten::ScalarImplicit"};
  if (node->outputs().size() == 1 && node->inputs().size() == 1 &&
      dataDependent.count(node->input()) &&
      kScalarOfTensor.count(node->kind().toQualString())) {
    const c10::IValue &v = values.at(node->output());
    if (v.isInt())
      shadow[node->output()] = v.toInt() + 1;
    else if (v.isDouble())
      shadow[node->output()] = v.toDouble() + 1;
    return;
  }
  jit::Stack stack;
  for (jit::Value *input : node->inputs())
    stack.push_back(shadowOf(input));
  wrapNumbers(node, stack);
  std::optional<int64_t> grows = dataDependentDim(node, stack);
  if (!any && !grows)
    return;
  // An in-place op must not write into a tensor the main run owns.
  std::string name = node->kind().toUnqualString();
  if (!stack.empty() && stack[0].isTensor() && name.size() > 1 &&
      name.back() == '_' && !shadow.count(node->inputs()[0]))
    stack[0] = stack[0].toTensor().clone();
  try {
    runNode(node, stack);
  } catch (const std::exception &) {
    if (shapes)
      blindOutputs(); // cannot tell which sizes follow the data
    return;
  }
  if (stack.size() != node->outputs().size())
    return;
  if (grows && stack[0].isTensor()) {
    const at::Tensor &main = values.at(node->outputs()[0]).toTensor();
    at::Tensor t = stack[0].toTensor();
    int64_t d = *grows < t.dim() ? *grows : 0;
    if (t.dim() > 0 && t.sizes() == main.sizes()) {
      std::vector<int64_t> row(t.sizes().begin(), t.sizes().end());
      row[d] = 1;
      stack[0] = at::cat({t, at::zeros(row, t.options())}, d);
    }
  }
  for (size_t i = 0; i < stack.size(); ++i)
    shadow[node->outputs()[i]] = stack[i];
}

/// Marks the op of each result whose shape differs between the runs.
void Importer::markDataDependentShapes(jit::Node *node) {
  std::map<Operation *, std::vector<int64_t>> marked;
  for (jit::Value *output : node->outputs()) {
    auto m = mapped.find(output);
    if (m == mapped.end() || !isa<td::BaseTensorType>(m->second.getType()))
      continue;
    bool differs = opaque.count(output) != 0;
    if (auto it = shadow.find(output); !differs && it != shadow.end())
      differs = !sameShape(it->second, values.at(output));
    auto result = dyn_cast<OpResult>(m->second);
    if (differs && result)
      marked[result.getOwner()].push_back(result.getResultNumber());
  }
  for (auto &[op, results] : marked)
    op->setAttr("pippy.data_dependent_shape",
                builder.getDenseI64ArrayAttr(results));
}

} // namespace pippy::torchscript
