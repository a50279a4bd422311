//===- Program.h - the stage interpreter ------------------------*- C++ -*-===//
//
// A program of a stage executable (Executable.fbs), loaded once: every
// operator resolved by name and overload to a c10::OperatorHandle through
// the ATen dispatcher (prim ops through the JIT operator registry, newer
// ones through pippy's ExtraOps), each call's arguments bound to the
// running schema by name (an argument the executable omits takes the
// schema's default), constants converted to IValues, values in numbered
// slots. Running it is a loop over instructions with no lookups or string
// work; autograd records the graph when grad mode is on.
//
// Runtime code: it uses libtorch and may throw `RuntimeError`.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_PROGRAM_H
#define PIPPY_RUNTIME_PROGRAM_H

#include "pippy/Executable/Executable_generated.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace pippy {

/// A failure a user can cause (bad program, missing weight, shape mismatch).
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Static description of a tensor crossing the program boundary.
struct TensorSpec {
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
};

/// What seeds a random op's call (Executable.fbs `random_stream`): the run's
/// --seed, the training step and the micro-batch. With the op's stream they
/// make the call's numbers, whichever rank, schedule or resumed run makes
/// the call.
struct RandomKey {
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t microbatch = 0;
  /// Whose generator draws: the CPU's, or the rank's GPU's (its numbers
  /// differ from the CPU's for the same seed, as PyTorch's do).
  c10::Device device = c10::kCPU;
};

class Program {
public:
  /// What a forward means. In training, normalisations use batch statistics
  /// and update running ones, dropout drops, and `Assign` updates buffers;
  /// evaluation is `model.eval()`'s: every schema argument named `training`
  /// or `train` is false, a random op (bernoulli, uniform, normal,
  /// rand_like, randn_like) is its expected value (a stochastic-depth mask
  /// keeps every row), and buffers keep their values.
  enum class Semantics { Training, Evaluation };

  /// Loads a verified program (pippy::exe::verify). An operator the
  /// running libtorch lacks, or arguments that do not bind to its schema,
  /// are errors naming `stage` ("stage 1"), the op and its location.
  /// `device`: where the rank computes; the program's tensor constants
  /// go there, and its device constants name it where they name the CPU.
  static Program load(const exe::Program &program, const std::string &stage,
                      Semantics semantics = Semantics::Training,
                      at::Device device = at::kCPU);
  /// The program of the first stage of an executable's bytes, verified
  /// first (tests and benches).
  static Program loadFirstStage(const std::string &bytes,
                                Semantics semantics = Semantics::Training);

  /// Runs the program. `params` maps every parameter name to its tensor.
  /// An op that fails is an error naming it (describe) with ATen's reason.
  /// With `capture`, also appends the values of those slots to `captured`.
  /// Each random op runs on the default CPU generator seeded from `random`
  /// (all zeros when none is given) and its stream.
  std::vector<c10::IValue> run(const std::vector<c10::IValue> &args,
                               const std::map<std::string, at::Tensor> &params,
                               const std::vector<int> *capture = nullptr,
                               std::vector<c10::IValue> *captured = nullptr,
                               std::vector<int64_t> *opNanoseconds = nullptr,
                               const RandomKey *random = nullptr) const;

  /// The ops the balancer counts (all but parameters and constants), in
  /// block order, by name; `run` adds each one's time to `opNanoseconds`
  /// (one entry per such op) when given (on a GPU, the time until its
  /// kernels are done).
  const std::vector<std::string> &countedOps() const { return countedOpNames; }

  /// An `aten::linear` whose weight (and bias, if any) are parameters that
  /// nothing else in the program uses: its weight gradient over many
  /// micro-batches is one matrix product of the stacked output gradients
  /// and inputs, which the executor can defer.
  struct Linear {
    int inputSlot, outputSlot;
    std::string weight, bias; ///< bias empty when there is none
  };
  std::vector<Linear> linearsWithOwnParameters() const;

  /// Makes the linears of `linearsWithOwnParameters` whose weight is in
  /// `weights` add their weight and bias gradients to the parameters'
  /// `grad` during backward, with no autograd accumulation for either: the
  /// weight gradient as one `addmm_` into `grad` where the BLAS gives that
  /// the same bits as a separate product and sum (probed per shape), else
  /// as the product then `add_`. The gradients are autograd's bit for bit.
  /// Only for parameters no hook watches, that no other program shares and
  /// that no `autograd::grad` call asks for; without grad mode, or for a
  /// weight that needs no gradient, the plain op runs.
  void fuseWeightGradients(const std::set<std::string> &weights);

  /// Runs `aten::_convolution` (what tracing records for every
  /// convolution) as the op it was traced from, `conv2d`,
  /// `conv_transpose1d`, ...: autocast's policy names those, so under
  /// mixed precision each convolution takes the dtype it takes in PyTorch.
  void runConvolutionsAsTraced();

  /// Parameter names in first-use order, with their static types.
  const std::vector<std::pair<std::string, TensorSpec>> &parameters() const {
    return paramSpecs;
  }
  size_t numInstructions() const { return code.size(); }

private:
  enum class Kind {
    Dispatch,
    Operator,
    BuildList,
    BuildTuple,
    Unpack,
    FusedLinear, // aten::linear, gradients accumulated in place
    Assign,      // inputs: a buffer and its new value, copied into it
    Convolution, // aten::_convolution run as conv2d, ... (mixed precision)
  };
  struct Instruction {
    Kind kind;
    c10::optional<c10::OperatorHandle> handle;
    mutable c10::optional<torch::jit::Operation> operation;
    c10::TypePtr listElement; // BuildList
    std::vector<int> inputs;
    std::vector<int> outputs;
    int countedOp = -1;    // index into countedOpNames
    int randomStream = -1; // a random op's stream (RandomKey)
    int op = -1;           // a Call's index into opSourceNames
    int location = -1;     // index into locations
  };
  /// "stage 1: 'torch.aten.mm' at module 'h.0' (model.mlir:4:8)", as errors
  /// name an instruction.
  std::string describe(const Instruction &inst) const;
  /// The same text from its parts; `op` is empty for an instruction that
  /// is no operator call.
  static std::string describeInstruction(const std::string &stage,
                                         const std::string &op,
                                         const std::string &where);
  /// Runs one instruction: its inputs from `slots`, its outputs into them.
  void execute(const Instruction &inst, torch::jit::Stack &stack,
               std::vector<c10::IValue> &slots, const RandomKey *random) const;
  std::string stageName;
  /// Where it runs: on a GPU, `run` waits for each op's kernels before it
  /// reads the clock for `opNanoseconds`.
  at::Device device = at::kCPU;
  std::vector<std::string> opSourceNames, locations;
  std::vector<std::string> countedOpNames;
  /// The linears `linearsWithOwnParameters` lists, with their indices into
  /// `code`.
  std::vector<std::pair<size_t, Linear>> ownLinears() const;

  std::vector<Instruction> code;
  std::vector<c10::IValue> constantSlots; // prefilled slot values
  std::vector<bool> isConstant;
  std::vector<int> argSlots, resultSlots;
  std::vector<std::pair<int, std::string>> paramSlots;
  std::vector<std::pair<std::string, TensorSpec>> paramSpecs;
  int numSlots = 0;

  friend class ProgramLoader;
};

/// Takes `param`'s gradient away (zero_grad with set_to_none), keeping the
/// buffer of a fused linear's weight (Program::fuseWeightGradients) for that
/// weight's next gradient, which is written into it instead of a new one.
void releaseGradient(at::Tensor &param);

/// Fused linears' weight and bias gradients (Program::fuseWeightGradients),
/// held back so that a stage's input gradients are ready, and can be sent
/// to the previous stage, before the weight gradients are computed. While a
/// `Scope` lives, the backward of a fused linear on this thread queues its
/// weight and bias gradients here instead of adding them (autograd runs a
/// CPU graph on the thread that calls backward; on any other thread they
/// are added at once, as without a scope). `run` adds them in the order
/// they were queued, with the kernels and operands the backward would have
/// used, so the gradients keep their bits. The queue holds each linear's
/// input and output gradient until it runs.
class WeightGradientQueue {
public:
  class Scope {
  public:
    explicit Scope(WeightGradientQueue &queue);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    WeightGradientQueue *previous;
  };

  void push(std::function<void()> work) { pending.push_back(std::move(work)); }
  /// Adds every queued gradient, oldest first, and empties the queue.
  void run();
  bool empty() const { return pending.empty(); }

private:
  std::vector<std::function<void()>> pending;
};

/// The sizes and dtype of an executable's tensor spec.
TensorSpec toTensorSpec(const exe::TensorSpec &spec);
/// `Float[2, 8]`, as errors print a tensor's type.
std::string specText(const TensorSpec &spec);

} // namespace pippy

#endif // PIPPY_RUNTIME_PROGRAM_H
