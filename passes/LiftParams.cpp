//===- LiftParams.cpp - weight literals to named parameters ---------------===//
//
// Lifts Torch-MLIR's floating-point tensor literals into `pippy.param`s whose
// values go to a safetensors file, and normalises `pipe_split()` markers.
//
//===----------------------------------------------------------------------===//

#include "pippy/Analysis/GraphIR.h"
#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Passes/Passes.h"
#include "pippy/Support/AtomicFile.h"
#include "pippy/Support/OpNames.h"
#include "pippy/Support/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#define DEBUG_TYPE "pippy-lift-params"

namespace mlir::pippy {
#define GEN_PASS_DEF_PIPPYLIFTPARAMS
#include "passes/Passes.h.inc"
} // namespace mlir::pippy

using namespace mlir;
using namespace mlir::pippy;
namespace st = ::pippy::safetensors;

namespace {

/// The safetensors dtype of a float element type, if the format has one.
std::optional<st::DType> getStorageDType(Type type) {
  if (type.isF32())
    return st::DType::F32;
  if (type.isF64())
    return st::DType::F64;
  if (type.isF16())
    return st::DType::F16;
  if (type.isBF16())
    return st::DType::BF16;
  if (isa<Float8E4M3FNType>(type))
    return st::DType::F8_E4M3;
  if (isa<Float8E5M2Type>(type))
    return st::DType::F8_E5M2;
  return std::nullopt;
}

/// The little-endian bytes of every element of `attr` (splats expanded).
std::vector<uint8_t> getDenseBytes(DenseElementsAttr attr) {
  std::vector<uint8_t> bytes;
  unsigned width = attr.getElementType().getIntOrFloatBitWidth();
  bytes.reserve(attr.getNumElements() * (width / 8));
  for (APFloat value : attr.getValues<APFloat>()) {
    APInt bits = value.bitcastToAPInt();
    for (unsigned i = 0; i < width / 8; ++i)
      bytes.push_back(
          static_cast<uint8_t>(bits.extractBitsAsZExtValue(8, i * 8)));
  }
  return bytes;
}

struct LiftParamsPass
    : public mlir::pippy::impl::PippyLiftParamsBase<LiftParamsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (weights.empty()) {
      module.emitError("pippy-lift-params needs the option weights=FILE");
      return signalPassFailure();
    }
    // A file the module came from (the IR read, or the model pippy-import
    // read) is an input: writing the weights there would destroy it.
    if (auto file = dyn_cast<FileLineColLoc>(module.getLoc()))
      if (::pippy::sameFile(file.getFilename().str(), weights)) {
        module.emitError("pippy-lift-params: weights=")
            << weights
            << " is the file this module was read from: writing it would "
               "destroy it; name another file";
        return signalPassFailure();
      }
    if (::mlir::failed(nameEntryForward(module)))
      return signalPassFailure();
    st::Writer writer;
    llvm::StringSet<> written;
    bool failed = false;

    module.walk([&](func::FuncOp func) {
      unsigned counter = 0;
      func.walk([&](Operation *op) {
        if (auto literal = dyn_cast<torch::ValueTensorLiteralOp>(op)) {
          if (::mlir::failed(
                  liftLiteral(literal, func, counter, writer, written)))
            failed = true;
          return;
        }
        if (auto marker = dyn_cast<torch::OperatorOp>(op))
          if (::mlir::failed(replaceSplitMarker(marker)))
            failed = true;
      });
    });
    if (failed)
      return signalPassFailure();
    // Random ops draw from streams numbered in the whole graph, before any
    // split (as pippy-import numbers a traced model's).
    ::pippy::numberRandomOps(module);

    // Buffers: running statistics found here, and those the user names.
    std::vector<std::string> bufferNames = findRunningStatistics(module);
    for (const std::string &name : buffers) {
      if (!written.contains(name)) {
        module.emitError("pippy-lift-params: buffers names '")
            << name << "', which is no lifted literal's parameter name";
        return signalPassFailure();
      }
      if (!llvm::is_contained(bufferNames, name))
        bufferNames.push_back(name);
    }
    if (!bufferNames.empty()) {
      llvm::json::Array list;
      for (const std::string &name : bufferNames)
        list.push_back(name);
      std::string json;
      llvm::raw_string_ostream os(json);
      os << llvm::json::Value(std::move(list));
      writer.setMetadata("buffers", json);
    }

    if (std::string error = writer.write(weights); !error.empty()) {
      module.emitError("cannot write weights: ") << error;
      return signalPassFailure();
    }
    module->setAttr("pippy.weights",
                    StringAttr::get(module.getContext(), weights));
  }

  /// Torch-MLIR's FX importer calls the model's function `main`; the graph
  /// IR calls it `forward`. Renames the only public function with a body
  /// when the module has no `forward`.
  LogicalResult nameEntryForward(ModuleOp module) {
    if (module.lookupSymbol<func::FuncOp>("forward"))
      return success();
    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        candidates.push_back(func);
    if (candidates.size() != 1)
      return success();
    func::FuncOp entry = candidates.front();
    auto forward = StringAttr::get(module.getContext(), "forward");
    if (::mlir::failed(SymbolTable::replaceAllSymbolUses(entry.getSymNameAttr(),
                                                         forward, module)))
      return entry.emitOpError("cannot be renamed to forward");
    entry.setSymNameAttr(forward);
    return success();
  }

  /// The names of lifted parameters read only as a batch norm's running
  /// mean or variance (operands 3 and 4 of every batch norm variant).
  static std::vector<std::string> findRunningStatistics(ModuleOp module) {
    llvm::StringMap<bool> onlyStatistics; // name -> every use a statistic
    std::vector<std::string> order;
    module.walk([&](ParamOp param) {
      bool statistic = !param.getResult().use_empty();
      for (OpOperand &use : param.getResult().getUses())
        statistic &= isRunningStatistic(use);
      auto [it, inserted] = onlyStatistics.try_emplace(param.getName(), true);
      if (inserted)
        order.push_back(param.getName().str());
      it->second &= statistic;
    });
    std::vector<std::string> names;
    for (const std::string &name : order)
      if (onlyStatistics.lookup(name))
        names.push_back(name);
    return names;
  }

  static bool isRunningStatistic(OpOperand &use) {
    Operation *user = use.getOwner();
    auto generic = dyn_cast<torch::OperatorOp>(user);
    std::optional<::pippy::AtenOpName> op = ::pippy::parseTorchOpName(
        generic ? generic.getName() : user->getName().getStringRef());
    bool batchNorm =
        op && op->ns == "aten" &&
        llvm::is_contained(
            {"batch_norm", "native_batch_norm", "_native_batch_norm_legit",
             "_native_batch_norm_legit_no_training", "instance_norm"},
            op->name);
    return batchNorm &&
           (use.getOperandNumber() == 3 || use.getOperandNumber() == 4);
  }

  LogicalResult liftLiteral(torch::ValueTensorLiteralOp literal,
                            func::FuncOp func, unsigned &counter,
                            st::Writer &writer, llvm::StringSet<> &written) {
    auto value = cast<ElementsAttr>(literal.getValue());
    auto shaped = cast<ShapedType>(value.getType());
    if (!isa<FloatType>(shaped.getElementType()) ||
        shaped.getNumElements() <= 1)
      return success();
    std::optional<st::DType> dtype = getStorageDType(shaped.getElementType());
    if (!dtype)
      return literal.emitOpError("has element type ")
             << shaped.getElementType()
             << ", which a safetensors file cannot store";

    std::string name;
    std::vector<uint8_t> bytes;
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
      DenseResourceElementsHandle handle = resource.getRawHandle();
      name = handle.getKey().str();
      const AsmResourceBlob *blob = handle.getBlob();
      if (!blob)
        return literal.emitOpError("uses dense_resource<")
               << name << ">, which has no data in the file's "
               << "dialect_resources section"
               << (name == "__elided__"
                       ? " (the module was printed with its large constants "
                         "elided; print it whole, or write it as bytecode)"
                       : "");
      ArrayRef<char> data = blob->getData();
      size_t expected = shaped.getNumElements() * st::dtypeSize(*dtype);
      if (data.size() != expected)
        return literal.emitOpError("dense_resource<")
               << name << "> holds " << data.size() << " bytes but " << shaped
               << " needs " << expected;
      bytes.assign(data.begin(), data.end());
    } else if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
      name = (func.getSymName() + ".literal" + Twine(counter++)).str();
      bytes = getDenseBytes(dense);
    } else {
      return literal.emitOpError("has a value of an unsupported kind: ")
             << value;
    }

    // One resource read by several literals is one (tied) parameter.
    if (written.insert(name).second) {
      std::string error = writer.add(
          name, *dtype, shaped.getShape().vec(),
          std::string_view(reinterpret_cast<const char *>(bytes.data()),
                           bytes.size()));
      if (!error.empty())
        return literal.emitOpError(error);
    }
    OpBuilder builder(literal);
    auto param =
        ParamOp::create(builder, literal.getLoc(), literal.getType(), name);
    literal.replaceAllUsesWith(param.getResult());
    literal.erase();
    return success();
  }

  LogicalResult replaceSplitMarker(torch::OperatorOp op) {
    if (op.getName() != "torch.pippy._pipe_split")
      return success();
    if (op.getNumOperands() != 0 || op->getNumRegions() != 0 ||
        llvm::any_of(op.getResults(), [](Value v) { return !v.use_empty(); }))
      return op.emitOpError("torch.pippy._pipe_split must take no operands "
                            "and have no used results");
    OpBuilder builder(op);
    SplitPointOp::create(builder, op.getLoc());
    op.erase();
    return success();
  }
};

} // namespace
