//===- Program.cpp - the stage interpreter --------------------------------===//
//
// Runs a loaded program (ProgramLoader.cpp loads it): one instruction after
// another over value slots, random ops seeded from their key, a failing op
// named with its stage and location.
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Program.h"

#include "Device.h"
#include "MixedPrecision.h"
#include "WeightGradients.h"

#include <ATen/ATen.h>

#include <chrono>

namespace pippy {

namespace {

/// SplitMix64's finaliser: consecutive inputs give unrelated outputs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Seeds the default CPU generator for one call of random op `stream`: a
/// counter-based draw, a function of the key and the stream alone.
void seedRandomOp(const RandomKey &key, int stream) {
  uint64_t seed = mix(
      mix(mix(mix(key.seed) ^ uint64_t(key.step)) ^ uint64_t(key.microbatch)) ^
      uint64_t(stream));
  at::Generator generator =
      key.device.is_cpu() ? at::detail::getDefaultCPUGenerator()
                          : at::globalContext().defaultGenerator(key.device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
}

} // namespace

void Program::execute(const Instruction &inst, ::torch::jit::Stack &stack,
                      std::vector<c10::IValue> &slots,
                      const RandomKey *random) const {
  static const RandomKey zeros;
  stack.clear();
  for (int s : inst.inputs)
    stack.push_back(slots[s]);
  if (inst.randomStream >= 0)
    seedRandomOp(random ? *random : zeros, inst.randomStream);
  switch (inst.kind) {
  case Kind::Dispatch:
    inst.handle->callBoxed(stack);
    break;
  case Kind::FusedLinear: {
    const at::Tensor &weight = stack[1].toTensor();
    if (!at::GradMode::is_enabled() || !weight.requires_grad()) {
      inst.handle->callBoxed(stack);
      break;
    }
    at::Tensor out = rt::fusedLinear(stack[0].toTensor(), weight, stack[2]);
    stack.clear();
    stack.emplace_back(std::move(out));
    break;
  }
  case Kind::Operator:
    (*inst.operation)(stack);
    break;
  case Kind::Convolution:
    rt::callAsTracedConvolution(*inst.handle, stack);
    break;
  case Kind::BuildList: {
    c10::impl::GenericList list(inst.listElement);
    list.reserve(stack.size());
    for (c10::IValue &v : stack)
      list.push_back(std::move(v));
    stack.clear();
    stack.emplace_back(std::move(list));
    break;
  }
  case Kind::BuildTuple: {
    auto tuple = c10::ivalue::Tuple::create(std::move(stack));
    stack.clear();
    stack.emplace_back(std::move(tuple));
    break;
  }
  case Kind::Assign: {
    // In place, as the model's own `buffer.add_(1)` is: a backward that
    // saved the old value fails as it would in PyTorch.
    at::NoGradGuard noGrad;
    stack[0].toTensor().copy_(stack[1].toTensor());
    stack.clear();
    break;
  }
  case Kind::Unpack: {
    c10::IValue container = std::move(stack.back());
    stack.clear();
    if (container.isTuple())
      for (const c10::IValue &e : container.toTupleRef().elements())
        stack.push_back(e);
    else
      for (const c10::IValue &e : container.toListRef())
        stack.push_back(e);
    if (stack.size() != inst.outputs.size())
      throw RuntimeError("unpacked " + std::to_string(stack.size()) +
                         " values into " + std::to_string(inst.outputs.size()));
    break;
  }
  }
  for (size_t i = 0; i < inst.outputs.size(); ++i)
    slots[inst.outputs[i]] = std::move(stack[i]);
}

std::string Program::describe(const Instruction &inst) const {
  return describeInstruction(
      stageName, inst.op >= 0 ? opSourceNames[inst.op] : "",
      inst.location >= 0 ? locations[inst.location] : std::string());
}

std::vector<c10::IValue> Program::run(
    const std::vector<c10::IValue> &args,
    const std::map<std::string, at::Tensor> &params,
    const std::vector<int> *capture, std::vector<c10::IValue> *captured,
    std::vector<int64_t> *opNanoseconds, const RandomKey *random) const {
  if (args.size() != argSlots.size())
    throw RuntimeError("expected " + std::to_string(argSlots.size()) +
                       " inputs but got " + std::to_string(args.size()));
  std::vector<c10::IValue> slots = constantSlots;
  for (size_t i = 0; i < args.size(); ++i)
    slots[argSlots[i]] = args[i];
  for (const auto &[s, name] : paramSlots) {
    auto it = params.find(name);
    if (it == params.end())
      throw RuntimeError("no value for parameter '" + name + "'");
    slots[s] = it->second;
  }

  ::torch::jit::Stack stack;
  stack.reserve(16);
  std::chrono::steady_clock::time_point started;
  for (const Instruction &inst : code) {
    if (opNanoseconds) {
      rt::synchronize(device);
      started = std::chrono::steady_clock::now();
    }
    try {
      execute(inst, stack, slots, random);
    } catch (const c10::Error &e) {
      throw RuntimeError(describe(inst) + ": " + e.what_without_backtrace());
    } catch (const std::exception &e) {
      throw RuntimeError(describe(inst) + ": " + e.what());
    }
    if (opNanoseconds) {
      rt::synchronize(device);
      if (inst.countedOp >= 0)
        (*opNanoseconds)[inst.countedOp] +=
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - started)
                .count();
    }
  }
  std::vector<c10::IValue> results;
  results.reserve(resultSlots.size());
  for (int s : resultSlots)
    results.push_back(slots[s]);
  if (capture)
    for (int s : *capture)
      captured->push_back(slots[s]);
  return results;
}

std::vector<std::pair<size_t, Program::Linear>> Program::ownLinears() const {
  std::map<int, int> uses;
  for (const Instruction &inst : code)
    for (int s : inst.inputs)
      ++uses[s];
  for (int s : resultSlots)
    ++uses[s];
  std::map<int, std::string> paramName;
  for (const auto &[s, name] : paramSlots)
    paramName[s] = name;
  std::vector<std::pair<size_t, Linear>> result;
  for (size_t i = 0; i < code.size(); ++i) {
    const Instruction &inst = code[i];
    if ((inst.kind != Kind::Dispatch && inst.kind != Kind::FusedLinear) ||
        inst.inputs.size() != 3 || inst.outputs.size() != 1)
      continue;
    const c10::OperatorName &name = inst.handle->schema().operator_name();
    if (name.name != "aten::linear" || !name.overload_name.empty())
      continue;
    int weight = inst.inputs[1], bias = inst.inputs[2];
    bool biasIsNone = isConstant[bias] && constantSlots[bias].isNone();
    if (!paramName.count(weight) || uses[weight] != 1)
      continue;
    if (!biasIsNone && (!paramName.count(bias) || uses[bias] != 1))
      continue;
    result.push_back({i,
                      {inst.inputs[0], inst.outputs[0], paramName[weight],
                       biasIsNone ? "" : paramName[bias]}});
  }
  return result;
}

std::vector<Program::Linear> Program::linearsWithOwnParameters() const {
  std::vector<Linear> result;
  for (auto &[index, linear] : ownLinears())
    result.push_back(std::move(linear));
  return result;
}

void Program::runConvolutionsAsTraced() {
  for (Instruction &inst : code)
    if (inst.kind == Kind::Dispatch &&
        inst.handle->operator_name() ==
            c10::OperatorName("aten::_convolution", ""))
      inst.kind = Kind::Convolution;
}

void Program::fuseWeightGradients(const std::set<std::string> &weights) {
  for (const auto &[index, linear] : ownLinears())
    code[index].kind =
        weights.count(linear.weight) ? Kind::FusedLinear : Kind::Dispatch;
}

} // namespace pippy
