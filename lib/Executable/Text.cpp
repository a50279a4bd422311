//===- Text.cpp - stage executables as text -------------------------------===//
//
// The text form `pippy-opt --print-executable` prints, the action text form
// shared by schedules, traces and errors, and the small naming helpers of
// Format.h.
//
//===----------------------------------------------------------------------===//

#include "pippy/Executable/Format.h"

#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace pippy::exe {

std::string rankFileName(int rank) {
  return "rank" + std::to_string(rank) + ".pipx";
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::f64:
  case DType::si64:
  case DType::complex_f32:
    return 8;
  case DType::f32:
  case DType::si32:
  case DType::complex_f16:
    return 4;
  case DType::f16:
  case DType::bf16:
  case DType::si16:
    return 2;
  case DType::si8:
  case DType::ui8:
  case DType::i1:
    return 1;
  case DType::complex_f64:
    return 16;
  }
  return 0;
}

std::string dtypeText(DType dtype) {
  switch (dtype) {
  case DType::complex_f32:
    return "complex<f32>";
  case DType::complex_f64:
    return "complex<f64>";
  case DType::complex_f16:
    return "complex<f16>";
  default:
    return EnumNameDType(dtype);
  }
}

std::string specText(const TensorSpec &spec) {
  std::string text = dtypeText(spec.dtype()) + "[";
  for (uint32_t i = 0; i < spec.sizes()->size(); ++i)
    text += (i ? ", " : "") + std::to_string(spec.sizes()->Get(i));
  return text + "]";
}

const char *scheduleKindText(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved1F1B:
    return "interleaved-1f1b";
  case ScheduleKind::LoopedBFS:
    return "looped-bfs";
  case ScheduleKind::ZBH1:
    return "zb-h1";
  case ScheduleKind::ZB1P:
    return "zb1p";
  case ScheduleKind::ZBV:
    return "zbv";
  case ScheduleKind::DualPipeV:
    return "dualpipev";
  case ScheduleKind::Custom:
    break;
  }
  return "custom";
}

std::optional<ScheduleKind> parseScheduleKind(const std::string &text) {
  for (ScheduleKind kind : EnumValuesScheduleKind())
    if (text == scheduleKindText(kind))
      return kind;
  return std::nullopt;
}

bool hasMicrobatch(ActionKind kind) {
  return kind != ActionKind::AllReduceTied && kind != ActionKind::Step &&
         kind != ActionKind::Weight;
}

namespace {

struct ActionName {
  ActionKind kind;
  const char *text;
};
// Longest spellings first, so that `SEND_F` is not read as `S`...; `W` with
// a micro-batch is BackwardWeight, without one Weight.
const ActionName kActionNames[] = {
    {ActionKind::AllReduceTied, "ALLREDUCE_TIED"},
    {ActionKind::SendF, "SEND_F"},
    {ActionKind::RecvF, "RECV_F"},
    {ActionKind::SendB, "SEND_B"},
    {ActionKind::RecvB, "RECV_B"},
    {ActionKind::Step, "STEP"},
    {ActionKind::BackwardWeight, "W"},
    {ActionKind::Weight, "W"},
    {ActionKind::BackwardInput, "I"},
    {ActionKind::Forward, "F"},
    {ActionKind::Backward, "B"},
};

} // namespace

std::string actionText(ActionKind kind, int stage, int microbatch) {
  std::string text = std::to_string(stage);
  for (const ActionName &name : kActionNames)
    if (name.kind == kind) {
      text += name.text;
      break;
    }
  if (hasMicrobatch(kind))
    text += std::to_string(microbatch);
  return text;
}

namespace {

/// The non-negative decimal number `text` is, if it is one that fits.
std::optional<int> number(const std::string &text) {
  if (text.empty() || text.size() > 9)
    return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

} // namespace

std::optional<Action> parseAction(const std::string &text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  std::optional<int> stage = number(text.substr(0, digits));
  if (!stage)
    return std::nullopt;
  std::string rest = text.substr(digits);
  for (const ActionName &name : kActionNames) {
    std::string word = name.text;
    if (rest.compare(0, word.size(), word) != 0)
      continue;
    std::string tail = rest.substr(word.size());
    if (!hasMicrobatch(name.kind)) {
      if (tail.empty())
        return Action(name.kind, *stage, 0);
      continue; // `W3` is BackwardWeight, listed before Weight
    }
    if (tail.empty() && name.kind == ActionKind::BackwardWeight)
      continue;
    std::optional<int> microbatch = number(tail);
    if (!microbatch)
      return std::nullopt;
    return Action(name.kind, *stage, *microbatch);
  }
  return std::nullopt;
}

namespace {

const char *const kListElements[] = {"any",    "tensor", "int",     "float",
                                     "bool",   "number", "tensor?", "int?",
                                     "float?", "bool?",  "number?", "any?"};

std::string listElementText(ListElement e) {
  return kListElements[static_cast<int>(e)];
}

std::string constantText(const Constant &c) {
  std::ostringstream os;
  switch (c.kind()) {
  case ValueKind::Int:
    os << "int " << c.int_value();
    break;
  case ValueKind::Float: {
    char buffer[40];
    std::snprintf(buffer, sizeof(buffer), "%.17g", c.float_value());
    os << "float " << buffer;
    break;
  }
  case ValueKind::Bool:
    os << "bool " << (c.bool_value() ? "true" : "false");
    break;
  case ValueKind::None:
    os << "none";
    break;
  case ValueKind::Str:
    os << "str \"" << c.str_value()->str() << "\"";
    break;
  case ValueKind::Device:
    os << "device \"" << c.str_value()->str() << "\"";
    break;
  case ValueKind::Tensor:
    os << "tensor " << specText(*c.tensor()) << " (" << c.data()->size()
       << " bytes" << (c.wrapped_number() ? ", a wrapped number" : "") << ")";
    break;
  case ValueKind::List: {
    os << "list<" << listElementText(c.element()) << "> [";
    for (uint32_t i = 0; i < c.items()->size(); ++i)
      os << (i ? ", " : "") << constantText(*c.items()->Get(i));
    os << "]";
    break;
  }
  default:
    os << "?";
  }
  return os.str();
}

std::string slotList(const flatbuffers::Vector<int32_t> &slots) {
  std::string text;
  for (uint32_t i = 0; i < slots.size(); ++i)
    text += (i ? ", %" : "%") + std::to_string(slots.Get(i));
  return text;
}

void printInstruction(const Instruction &inst, const Program &program,
                      std::ostream &os) {
  os << "    ";
  if (inst.outputs()->size())
    os << slotList(*inst.outputs()) << " = ";
  switch (inst.kind()) {
  case InstructionKind::Call: {
    const Operator *op = program.operators()->Get(inst.op());
    os << op->name()->str();
    if (op->overload()->size())
      os << "." << op->overload()->str();
    os << "(";
    for (uint32_t i = 0; i < inst.args()->size(); ++i) {
      const Argument *arg = inst.args()->Get(i);
      os << (i ? ", " : "");
      if (arg->name()->size())
        os << arg->name()->str() << "=";
      os << "%" << arg->slot();
    }
    os << ")";
    break;
  }
  case InstructionKind::BuildList:
    os << "list<" << listElementText(inst.element()) << ">("
       << slotList(*inst.inputs()) << ")";
    break;
  case InstructionKind::BuildTuple:
    os << "tuple(" << slotList(*inst.inputs()) << ")";
    break;
  case InstructionKind::Unpack:
    os << "unpack " << slotList(*inst.inputs());
    break;
  case InstructionKind::Assign:
    os << "assign %" << inst.inputs()->Get(0) << " = %"
       << inst.inputs()->Get(1);
    break;
  }
  if (inst.random_stream() >= 0)
    os << " random " << inst.random_stream();
  os << "  # " << program.locations()->Get(inst.location())->str() << "\n";
}

void printStage(const Stage &stage, std::ostream &os) {
  const Program &p = *stage.program();
  os << "stage " << stage.index() << " (" << p.num_slots() << " slots, "
     << p.code()->size() << " instructions, counted ops from "
     << stage.counted_op_offset() << ")\n";
  for (uint32_t i = 0; i < stage.inputs()->size(); ++i) {
    const StageInput *in = stage.inputs()->Get(i);
    os << "  %" << p.arguments()->Get(i) << " = ";
    if (in->stage() < 0)
      os << "pipeline input " << in->index();
    else
      os << "stage " << in->stage() << " result " << in->index();
    os << " : " << specText(*in->spec())
       << (in->gets_gradient() ? ", gradient sent back" : "") << "\n";
  }
  for (const Parameter *param : *p.parameters())
    os << "  %" << param->slot() << " = param \"" << param->name()->str()
       << "\" : " << specText(*param->spec())
       << (param->shard()
               ? ", slice of " + std::to_string(param->shard()->parts()) +
                     " along dim " + std::to_string(param->shard()->dim())
               : "")
       << (param->gets_gradient() ? "" : ", no gradient reaches it") << "\n";
  for (const ConstantSlot *c : *p.constants())
    os << "  %" << c->slot() << " = " << constantText(*c->value()) << "\n";
  os << "  code:\n";
  for (const Instruction *inst : *p.code())
    printInstruction(*inst, p, os);
  os << "  results: " << slotList(*p.results()) << "\n";
}

} // namespace

std::string toText(const Executable &exe) {
  std::ostringstream os;
  char hash[24];
  std::snprintf(hash, sizeof(hash), "%016" PRIx64, exe.pipeline_hash());
  os << "pippy stage executable, format " << exe.format_version()
     << ", written by " << exe.producer()->str() << "\n";
  os << "rank " << exe.rank() << " of " << exe.num_ranks() << ", pipeline "
     << hash;
  if (exe.tensor_parallel() > 1)
    os << ", sharded over " << exe.tensor_parallel()
       << " tensor-parallel ranks";
  os << "\n";
  os << "source: " << exe.source()->str() << "\n";
  os << "weights: " << exe.weights()->str() << "\n";
  os << "inputs:";
  for (uint32_t i = 0; i < exe.inputs()->size(); ++i)
    os << (i ? ", " : " ") << specText(*exe.inputs()->Get(i));
  os << "\noutputs:";
  for (uint32_t i = 0; i < exe.outputs()->size(); ++i)
    os << (i ? ", " : " ") << "stage " << exe.outputs()->Get(i)->stage()
       << " result " << exe.outputs()->Get(i)->index();
  os << " (the loss is on the first)\nstages on ranks:";
  for (uint32_t s = 0; s < exe.stage_ranks()->size(); ++s)
    os << (s ? ", " : " ") << s << " -> " << exe.stage_ranks()->Get(s);
  os << "\n";
  for (const Stage *stage : *exe.stages())
    printStage(*stage, os);
  os << "transfers:\n";
  for (const Transfer *t : *exe.transfers())
    os << "  stage " << t->producer_stage() << " result "
       << t->producer_result() << " -> stage " << t->consumer_stage()
       << " input " << t->consumer_input() << ", channel " << t->channel()
       << ", " << specText(*t->spec())
       << (t->gradient() ? ", gradient back" : "") << "\n";
  const Schedule &s = *exe.schedule();
  os << "schedule " << scheduleKindText(s.kind()) << ", " << s.microbatches()
     << " micro-batches" << (s.split_backward() ? ", split backward" : "")
     << ":\n ";
  for (const Action *a : *s.actions())
    os << " " << actionText(*a);
  os << "\ntied groups:";
  if (exe.tied()->size() == 0)
    os << " none";
  os << "\n";
  for (const TiedGroup *g : *exe.tied()) {
    os << "  \"" << g->name()->str() << "\": stages [";
    for (uint32_t i = 0; i < g->stages()->size(); ++i)
      os << (i ? ", " : "") << g->stages()->Get(i);
    os << "], ranks [";
    for (uint32_t i = 0; i < g->ranks()->size(); ++i)
      os << (i ? ", " : "") << g->ranks()->Get(i);
    os << "]" << (g->gets_gradient() ? "" : ", no gradient reaches it") << "\n";
  }
  return os.str();
}

} // namespace pippy::exe
