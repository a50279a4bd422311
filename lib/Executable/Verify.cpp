//===- Verify.cpp - checking a stage executable before use ----------------===//
//
// FlatBuffers' verifier proves that every offset, vector and string lies
// inside the buffer; it does not check enum values in structs and tables,
// nor that an index stored in one field is in range of another. This file
// does, so that the runtime (and the text printer) can follow any index of
// a verified executable without checking it again. A corrupt, truncated or
// foreign file is one error line, never an out-of-bounds read (fuzzed by
// fuzz/ExecutableFuzzer.cpp).
//
//===----------------------------------------------------------------------===//

#include "pippy/Executable/Format.h"

#include <cstdint>
#include <limits>
#include <set>

namespace pippy::exe {
namespace {

/// Accumulates the first failure; every check returns whether all held.
class Checker {
public:
  Checker(std::string &error, int tensorParallel)
      : tensorParallel(tensorParallel), error(error) {}

  bool fail(const std::string &message) {
    if (error.empty())
      error = message;
    return false;
  }

  bool spec(const TensorSpec *spec, const std::string &what) {
    if (!spec || !spec->sizes())
      return fail(what + " has no tensor type");
    if (spec->dtype() > DType::MAX)
      return fail(what + " has an unknown dtype");
    // FlatBuffers checks a vector's length for alignment, not its 8-byte
    // elements: a crafted file could have them read misaligned.
    if (spec->sizes()->size() > 0 &&
        reinterpret_cast<uintptr_t>(spec->sizes()->data()) % alignof(int64_t))
      return fail(what + " has misaligned sizes");
    for (int64_t size : *spec->sizes())
      if (size < 0)
        return fail(what + " has a negative size");
    return true;
  }

  /// Elements of `spec`, or -1 past 2^62 (no tensor that big is stored).
  static int64_t elements(const TensorSpec &spec) {
    int64_t n = 1;
    for (int64_t size : *spec.sizes()) {
      if (size != 0 && n > (int64_t(1) << 62) / size)
        return -1;
      n *= size;
    }
    return n;
  }

  bool constant(const Constant *c, const std::string &what, int depth = 0) {
    if (!c)
      return fail(what + " is missing");
    if (depth > 16)
      return fail(what + " nests lists too deeply");
    if (c->kind() > ValueKind::MAX || c->element() > ListElement::MAX)
      return fail(what + " has an unknown kind");
    switch (c->kind()) {
    case ValueKind::Str:
    case ValueKind::Device:
      if (!c->str_value())
        return fail(what + " has no text");
      return true;
    case ValueKind::Tensor: {
      if (!spec(c->tensor(), what) || !c->data())
        return fail(what + " has no data");
      int64_t n = elements(*c->tensor());
      if (n < 0 ||
          c->data()->size() != uint64_t(n) * dtypeSize(c->tensor()->dtype()))
        return fail(what + " holds " + std::to_string(c->data()->size()) +
                    " bytes, not those of " + specText(*c->tensor()));
      return true;
    }
    case ValueKind::List:
      if (!c->items())
        return fail(what + " has no items");
      for (const Constant *item : *c->items())
        if (!constant(item, what + " (an item)", depth + 1))
          return false;
      return true;
    case ValueKind::Tuple:
    case ValueKind::Other:
      return fail(what + " is of a kind constants cannot have");
    default:
      return true;
    }
  }

  bool slots(const flatbuffers::Vector<int32_t> *list, int numSlots,
             const std::string &what) {
    if (!list)
      return fail(what + " is missing");
    for (int32_t s : *list)
      if (s < 0 || s >= numSlots)
        return fail(what + " names slot " + std::to_string(s) + " of " +
                    std::to_string(numSlots));
    return true;
  }

  bool instruction(const Instruction *inst, const Program &program,
                   const std::string &what) {
    int numSlots = program.num_slots();
    if (!inst)
      return fail(what + " is missing");
    if (inst->kind() > InstructionKind::MAX ||
        inst->element() > ListElement::MAX)
      return fail(what + " has an unknown kind");
    if (inst->location() >= program.locations()->size())
      return fail(what + " has no location");
    if (inst->counted() < -1 ||
        (inst->counted() >= 0 &&
         uint32_t(inst->counted()) >= program.counted_ops()->size()))
      return fail(what + " counts an op that is not listed");
    if (!slots(inst->outputs(), numSlots, what + "'s outputs"))
      return false;
    if (inst->kind() == InstructionKind::Assign) {
      if (!inst->inputs() || inst->inputs()->size() != 2 ||
          inst->outputs()->size() != 0)
        return fail(what + " must assign one value to one buffer");
      if (!slots(inst->inputs(), numSlots, what + "'s inputs"))
        return false;
      for (const Parameter *param : *program.parameters())
        if (param && param->slot() == inst->inputs()->Get(0))
          return true;
      return fail(what + " assigns to a slot that is not a parameter");
    }
    if (inst->kind() != InstructionKind::Call) {
      if (inst->kind() != InstructionKind::Unpack &&
          inst->outputs()->size() != 1)
        return fail(what + " must have one output");
      if (inst->kind() == InstructionKind::Unpack &&
          (!inst->inputs() || inst->inputs()->size() != 1))
        return fail(what + " must unpack one value");
      return slots(inst->inputs(), numSlots, what + "'s inputs");
    }
    if (inst->op() >= program.operators()->size())
      return fail(what + " calls operator " + std::to_string(inst->op()) +
                  " of " + std::to_string(program.operators()->size()));
    if (!inst->args())
      return fail(what + " has no arguments");
    for (const Argument *arg : *inst->args())
      if (!arg || !arg->name() || arg->slot() < 0 || arg->slot() >= numSlots)
        return fail(what + " has an argument out of range");
    return true;
  }

  /// A parameter's shard (or none): a dimension of `whole` that divides
  /// into the tensor-parallel group's slices.
  bool shard(const Shard *s, const TensorSpec *whole) {
    if (!s)
      return true;
    int64_t rank = whole->sizes()->size();
    return s->dim() >= 0 && s->dim() < rank && s->parts() == tensorParallel &&
           whole->sizes()->Get(s->dim()) % s->parts() == 0;
  }

  bool program(const Program *p, const std::string &what) {
    if (!p || !p->slot_kinds() || !p->arguments() || !p->results() ||
        !p->parameters() || !p->constants() || !p->operators() || !p->code() ||
        !p->locations() || !p->counted_ops())
      return fail(what + " is incomplete");
    int numSlots = p->num_slots();
    if (numSlots < 0 || p->slot_kinds()->size() != uint32_t(numSlots))
      return fail(what + " has " + std::to_string(p->slot_kinds()->size()) +
                  " slot kinds for " + std::to_string(numSlots) + " slots");
    for (ValueKind kind : *p->slot_kinds())
      if (kind > ValueKind::MAX)
        return fail(what + " has a slot of unknown kind");
    if (!slots(p->arguments(), numSlots, what + "'s arguments") ||
        !slots(p->results(), numSlots, what + "'s results"))
      return false;
    for (const Parameter *param : *p->parameters())
      if (!param || !param->name() || param->slot() < 0 ||
          param->slot() >= numSlots ||
          !spec(param->spec(), what + "'s parameter") ||
          !shard(param->shard(), param->spec()))
        return fail(what + " has a malformed parameter");
    for (const ConstantSlot *c : *p->constants())
      if (!c || c->slot() < 0 || c->slot() >= numSlots ||
          !constant(c->value(), what + "'s constant"))
        return fail(what + " has a malformed constant");
    for (const Operator *op : *p->operators())
      if (!op || !op->name() || !op->overload() || !op->source_name())
        return fail(what + " has a malformed operator");
    for (uint32_t i = 0; i < p->code()->size(); ++i)
      if (!instruction(p->code()->Get(i), *p,
                       what + " instruction " + std::to_string(i)))
        return false;
    return true;
  }

  /// Stages in the whole pipeline (each has a rank in `stage_ranks`).
  static int stageCount(const Executable &exe) {
    return static_cast<int>(exe.stage_ranks()->size());
  }

  /// The world, each stage's rank, and the tables every executable has.
  bool placement(const Executable &exe) {
    if (exe.tensor_parallel() < 1)
      return fail("a tensor-parallel group of fewer than 1 rank");
    if (!exe.inputs() || !exe.outputs() || !exe.stage_ranks() ||
        !exe.stage_parameters() || !exe.stages() || !exe.transfers() ||
        !exe.tied() || !exe.source() || !exe.weights() || !exe.producer())
      return fail("incomplete: a table is missing");
    if (exe.num_ranks() < 1 || exe.rank() < 0 || exe.rank() >= exe.num_ranks())
      return fail("rank " + std::to_string(exe.rank()) +
                  " is outside a world of " + std::to_string(exe.num_ranks()));
    for (int32_t r : *exe.stage_ranks())
      if (r < 0 || r >= exe.num_ranks())
        return fail("a stage is placed on a rank outside the world");
    return true;
  }

  /// The pipeline's inputs and outputs.
  bool interface(const Executable &exe) {
    int numStages = stageCount(exe);
    if (exe.inputs()->size() == 0)
      return fail("the pipeline takes no input");
    for (const TensorSpec *in : *exe.inputs())
      if (!spec(in, "a pipeline input"))
        return false;
    if (exe.inputs()->Get(0)->sizes()->size() == 0)
      return fail("the pipeline's first input has no rows");
    if (exe.outputs()->size() == 0)
      return fail("the pipeline returns nothing");
    for (const StageResult *out : *exe.outputs())
      if (!out || out->stage() < 0 || out->stage() >= numStages)
        return fail("a pipeline output comes from no stage");
    return true;
  }

  /// Each stage's parameter names, types and shards.
  bool parameters(const Executable &exe) {
    int numStages = stageCount(exe);
    for (const StageParameters *sp : *exe.stage_parameters()) {
      if (!sp || !sp->names() || !sp->specs() || !sp->shards() ||
          sp->names()->size() != sp->specs()->size() ||
          sp->shards()->size() != sp->specs()->size() || sp->stage() < 0 ||
          sp->stage() >= numStages)
        return fail("a stage's parameter list is malformed");
      for (uint32_t i = 0; i < sp->specs()->size(); ++i) {
        const Shard *s = sp->shards()->Get(i);
        if (!sp->names()->Get(i))
          return fail("a stage's parameter has no name");
        if (!spec(sp->specs()->Get(i), "a stage's parameter"))
          return false;
        if (s->parts() != 1 && !shard(s, sp->specs()->Get(i)))
          return fail("a stage's parameter has a malformed shard");
      }
    }
    return true;
  }

  /// This rank's stages, each once; their indices go to `held`.
  bool stages(const Executable &exe, std::set<int> &held) {
    for (const Stage *s : *exe.stages()) {
      if (!stage(s, exe))
        return false;
      if (!held.insert(s->index()).second)
        return fail("stage " + std::to_string(s->index()) + " appears twice");
    }
    if (held.empty())
      return fail("rank " + std::to_string(exe.rank()) + " holds no stage");
    return true;
  }

  bool stage(const Stage *s, const Executable &exe) {
    if (!s)
      return fail("a stage is missing");
    std::string what = "stage " + std::to_string(s->index());
    if (s->index() < 0 || uint32_t(s->index()) >= exe.stage_ranks()->size())
      return fail(what + " is not a stage of the pipeline");
    if (exe.stage_ranks()->Get(s->index()) != exe.rank())
      return fail(what + " belongs to another rank");
    if (!program(s->program(), what) || !s->inputs())
      return fail(what + " is incomplete");
    if (s->inputs()->size() != s->program()->arguments()->size())
      return fail(what + " has " + std::to_string(s->inputs()->size()) +
                  " inputs for " +
                  std::to_string(s->program()->arguments()->size()) +
                  " program arguments");
    for (const StageInput *in : *s->inputs()) {
      if (!in || !spec(in->spec(), what + "'s input"))
        return fail(what + " has a malformed input");
      if (in->stage() < -1 || in->stage() >= s->index())
        return fail(what + " reads a stage that does not come before it");
      if (in->stage() == -1 && in->index() >= exe.inputs()->size())
        return fail(what + " reads a pipeline input that does not exist");
    }
    return true;
  }

  bool schedule(const Executable &exe, const std::set<int> &held) {
    const Schedule *s = exe.schedule();
    if (!s || !s->actions())
      return fail("the schedule is missing");
    if (s->kind() > ScheduleKind::MAX)
      return fail("the schedule is of an unknown kind");
    if (s->microbatches() < 1)
      return fail("the schedule has no micro-batches");
    for (const Action *a : *s->actions()) {
      if (a->kind() > ActionKind::MAX)
        return fail("the schedule has an action of unknown kind");
      if (!held.count(a->stage()))
        return fail("the schedule's action " + actionText(*a) +
                    " is for a stage this rank does not hold");
      if (hasMicrobatch(a->kind()) &&
          (a->microbatch() < 0 || a->microbatch() >= s->microbatches()))
        return fail("the schedule's action " + actionText(*a) +
                    " names a micro-batch out of range");
    }
    return true;
  }

  bool transfers(const Executable &exe, const std::set<int> &held) {
    int numStages = stageCount(exe);
    for (const Transfer *t : *exe.transfers()) {
      if (!t || !spec(t->spec(), "a transfer"))
        return fail("a transfer is malformed");
      if (t->producer_stage() < 0 || t->producer_stage() >= numStages ||
          t->consumer_stage() <= t->producer_stage() ||
          t->consumer_stage() >= numStages)
        return fail("a transfer connects stages that do not exist");
      if (!held.count(t->producer_stage()) && !held.count(t->consumer_stage()))
        return fail("a transfer neither starts nor ends on this rank");
      if (t->channel() >= kMaxChannels)
        return fail("a transfer's channel is out of range");
    }
    return true;
  }

  /// Tied groups: at least two stages, each on the rank that holds it.
  bool tied(const Executable &exe) {
    int numStages = stageCount(exe);
    for (const TiedGroup *g : *exe.tied()) {
      if (!g || !g->name() || !g->stages() || !g->ranks() ||
          g->stages()->size() != g->ranks()->size() || g->stages()->size() < 2)
        return fail("a tied group is malformed");
      for (uint32_t i = 0; i < g->stages()->size(); ++i) {
        int32_t s = g->stages()->Get(i);
        if (s < 0 || s >= numStages ||
            exe.stage_ranks()->Get(s) != g->ranks()->Get(i))
          return fail("tied group '" + g->name()->str() +
                      "' lists a stage that does not exist or its rank "
                      "wrongly");
      }
    }
    return true;
  }

  static constexpr uint32_t kMaxChannels = 1024;

private:
  int tensorParallel;
  std::string &error;
};

} // namespace

const Executable *verify(const uint8_t *data, size_t size, std::string &error) {
  error.clear();
  if (size < 8 ||
      !flatbuffers::BufferHasIdentifier(data, ExecutableIdentifier()))
    return error = "not a pippy stage executable (no PIPX identifier)", nullptr;
  // Tables of a later format version verify too (readers skip fields they
  // do not know), so a newer file is named by its version below.
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/64,
                                 /*max_tables=*/1 << 24);
  if (!verifier.VerifyBuffer<Executable>(ExecutableIdentifier()))
    return error = "truncated or corrupt (its layout does not verify)", nullptr;
  const Executable *exe = GetExecutable(data);
  if (exe->format_version() != kFormatVersion)
    return error = "written in format version " +
                   std::to_string(exe->format_version()) +
                   ", but this pippy reads version " +
                   std::to_string(kFormatVersion) +
                   "; lower the pipeline again with this pippy",
           nullptr;
  Checker check(error, exe->tensor_parallel());
  std::set<int> held;
  if (!check.placement(*exe) || !check.interface(*exe) ||
      !check.parameters(*exe) || !check.stages(*exe, held) ||
      !check.schedule(*exe, held) || !check.transfers(*exe, held) ||
      !check.tied(*exe))
    return nullptr;
  return exe;
}

} // namespace pippy::exe
