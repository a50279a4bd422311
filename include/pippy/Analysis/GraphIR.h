//===- GraphIR.h - facts about ops of the graph IR --------------*- C++ -*-===//
//
// What the splitting passes need to know about an op of the graph IR: which
// module it belongs to, and whether it is a parameter or constant that every
// stage using it can hold a copy of (instead of receiving it).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_ANALYSIS_GRAPHIR_H
#define PIPPY_ANALYSIS_GRAPHIR_H

#include "pippy/Dialect/Pippy/PippyDialect.h"

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>

namespace pippy {

/// The module path of a location (`NameLoc("layers.4.attn")`, possibly
/// wrapped in a fused location); none when it has no path.
std::optional<std::string> getModulePath(mlir::Location loc);

/// Whether `path` is `module` or lies inside it (`layers.4.attn` is inside
/// `layers.4`, `layers.40` is not).
bool isInModule(llvm::StringRef path, llvm::StringRef module);

/// Parameters, constants, tensor literals, and lists or tuples built only of
/// these: values each stage copies rather than receives.
bool isReplicable(mlir::Operation *op);

/// Whether `use` is a training-time in-place update of a stage's buffer:
/// the buffer operand of a `pippy.assign`, or the running statistics of a
/// normalisation in training mode (`aten.batch_norm`, `native_batch_norm`,
/// `instance_norm` with input statistics), which the kernel updates.
bool updatesInPlace(mlir::OpOperand &use);

/// Whether a use of `param` updates it in place: a buffer that is stage
/// state, which every op using it must share one stage with.
bool isStageState(mlir::pippy::ParamOp param);

/// Whether ATen operator `name` (functional, no namespace: `dropout`,
/// `bernoulli`, `rand_like`, ...) draws random numbers.
bool isRandomOp(llvm::StringRef name);

/// The attribute pippy-import puts on a random op: an integer, the op's
/// stream, unique in the imported graph. The runtime seeds each call from
/// (--seed, step, micro-batch, stream), so that the numbers drawn do not
/// depend on how the model is split or scheduled.
inline constexpr llvm::StringLiteral kRandomStreamAttr = "pippy.random_stream";

/// Gives each random ATen op under `root` that has no stream yet one of its
/// own, in walk order, after those already given (Torch-MLIR input, which
/// `--pippy-lift-params` numbers before any split).
void numberRandomOps(mlir::Operation *root);

/// The attribute pippy-import puts on a 0-d `torch.vtensor.literal` that
/// TorchScript treats as a number (a wrapped number: `int_tensor * 0.5` is
/// float32); the runtime marks the tensor it makes the same way.
inline constexpr llvm::StringLiteral kWrappedNumberAttr =
    "pippy.wrapped_number";

/// The attribute pippy-import puts on an op whose results (their indices)
/// have shapes that depend on tensor contents (nonzero, masked_select, ...).
inline constexpr llvm::StringLiteral kDataDependentShapeAttr =
    "pippy.data_dependent_shape";

/// Whether `value`'s shape depends on tensor contents: its static type is
/// only the example run's, so it cannot be sent between stages.
bool hasDataDependentShape(mlir::Value value);

/// Which of `body`'s arguments can get a gradient when the values its
/// terminator returns at the positions `wanted` marks get one: those with a
/// path to such a value through values that can carry a gradient (float or
/// complex tensors, and the lists, tuples and optionals that may hold them),
/// not cut by an op whose results never require one (`aten.detach`,
/// `aten.zeros_like`, ...). Autograd gives an argument without such a path
/// no gradient at all (PyTorch's None), which is not the same as a zero
/// gradient: weight decay and momentum skip a parameter whose gradient is
/// None. An argument with a path may still get none (a path through an op
/// without a derivative for that operand), so the answer errs towards true.
llvm::SmallVector<bool> argumentsReachingResults(mlir::Block &body,
                                                 llvm::ArrayRef<bool> wanted);

/// The same from values of `body` (`seeds`) instead of returned ones: the
/// loss is taken on the first element of a tuple result, so only that
/// element's inputs get gradients.
llvm::SmallVector<bool> argumentsReaching(mlir::Block &body,
                                          llvm::ArrayRef<mlir::Value> seeds);

/// Every value of `body` (arguments and op results) with such a path to
/// one of `seeds`, the seeds included: a parameter op's result outside it
/// gets no gradient.
llvm::DenseSet<mlir::Value> valuesReaching(mlir::Block &body,
                                           llvm::ArrayRef<mlir::Value> seeds);

/// Reads the elements of a tuple (or of a list nothing else reads) built in
/// `body` from the values it was built of: a `torch.prim.TupleUnpack`, a
/// `torch.prim.ListUnpack` or a `torch.prim.TupleIndex` with a constant index
/// of a `TupleConstruct` or `ListConstruct` gives way to the construct's
/// operands, and the construct goes when nothing else reads it. Tracing
/// leaves such pairs at every module that returns a tuple, its caller
/// unpacking it; folded, only tensors are live after the module's last op,
/// so a split point can go there (`block:end`). The values are the same.
/// Returns how many unpacking ops it removed.
unsigned foldContainerRoundTrips(mlir::Block &body);

/// The stage of `pipeline` with index `index`; null when there is none.
mlir::pippy::StageOp getStage(mlir::pippy::PipelineOp pipeline, int64_t index);

} // namespace pippy

#endif // PIPPY_ANALYSIS_GRAPHIR_H
