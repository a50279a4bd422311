//===- pippy-opt.cpp - mlir-opt with pippy's dialects and passes ----------===//
//
// The driver for pippy's compiler passes: the func, arith, tensor and linalg
// dialects, Torch-MLIR's `torch` dialect (textual compatibility), the `pippy`
// dialect and every `--pippy-*` pass, with mlir-opt's standard flags.
//
//===----------------------------------------------------------------------===//

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/Format.h"
#include "pippy/Passes/Passes.h"
#include "pippy/Support/Allocator.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/ParseUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cstring>
#include <optional>

namespace {

/// Whether every option on the command line is one `runPlain` handles as
/// MlirOptMain does: the output file, passes and pipelines, and the options
/// of the context, the printer, the pass manager and the timer. Anything
/// else (-verify-diagnostics, -split-input-file, reproducers, remarks,
/// action logging, --dump-pass-pipeline, ...) goes to MlirOptMain.
bool onlyPlainOptions() {
  static const llvm::StringSet<> plain = {
      "o",
      "pass-pipeline",
      "p",
      "verify-each",
      "allow-unregistered-dialect",
      "no-implicit-module",
      "emit-bytecode",
      "emit-bytecode-version",
      "elide-resource-data-from-bytecode",
      "mlir-very-unsafe-disable-verifier-on-parsing",
      "mlir-disable-threading",
      "mlir-print-op-on-diagnostic",
      "mlir-print-stacktrace-on-diagnostic",
      "mlir-timing",
      "mlir-timing-display",
      "mlir-output-format",
      "mlir-pass-statistics",
      "mlir-pass-statistics-display",
      "mlir-print-ir-before",
      "mlir-print-ir-after",
      "mlir-print-ir-before-all",
      "mlir-print-ir-after-all",
      "mlir-print-ir-after-change",
      "mlir-print-ir-after-failure",
      "mlir-print-ir-module-scope",
      "mlir-print-ir-tree-dir",
      "mlir-pass-pipeline-crash-reproducer",
      "mlir-pass-pipeline-local-reproducer",
      "mlir-print-debuginfo",
      "mlir-pretty-debuginfo",
      "mlir-print-local-scope",
      "mlir-print-generic",
      "mlir-print-assume-verified",
      "mlir-print-value-users",
      "mlir-print-unique-ssa-ids",
      "mlir-print-skip-regions",
      "mlir-elide-elementsattrs-if-larger",
      "mlir-elide-resource-strings-if-larger",
      "mlir-print-elementsattrs-with-hex-if-larger",
      "mlir-use-nameloc-as-prefix",
  };
  for (const auto &entry : llvm::cl::getRegisteredOptions()) {
    if (entry.second->getNumOccurrences() == 0)
      continue;
    llvm::StringRef name = entry.first;
    // Each pass and pipeline name is a value of one list option.
    if (plain.contains(name) || mlir::PassInfo::lookup(name) ||
        mlir::PassPipelineInfo::lookup(name))
      continue;
    return false;
  }
  return true;
}

/// MlirOptMain's parse, passes and print for one input file, without what
/// the plain options leave unused: MlirOptMain always reads the whole input
/// for `expected-*` diagnostics (3% of a 10k-op split, on every call) and
/// starts a second context for its thread pool. The module and its context
/// are left to the end of the process instead of being torn down (another
/// 1-2%). Returns nullopt where MlirOptMain must run instead: standard
/// input, which it warns about when it is a terminal, and a file that does
/// not open, which it reports.
std::optional<mlir::LogicalResult>
runPlain(int argc, char **argv, llvm::StringRef inputFile,
         llvm::StringRef outputFile, mlir::DialectRegistry &registry,
         const mlir::MlirOptMainConfig &config) {
  using namespace mlir;
  if (inputFile == "-" || !onlyPlainOptions())
    return std::nullopt;
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    return std::nullopt;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFile, &error);
  if (!output)
    return std::nullopt;
  // Only now: its end shuts LLVM's statics down, which MlirOptMain needs.
  llvm::InitLLVM initLLVM(argc, argv);
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  sourceMgr->AddNewSourceBuffer(std::move(input), llvm::SMLoc());

  // Never destroyed: the process ends right after.
  auto *context = new MLIRContext(registry);
  context->allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  SourceMgrDiagnosticHandler diagnostics(*sourceMgr, context);

  DefaultTimingManager timingManager;
  applyDefaultTimingManagerCLOptions(timingManager);
  TimingScope timing = timingManager.getRootScope();

  // As MlirOptMain: the parser runs without the context's locks.
  bool threading = context->isMultithreadingEnabled();
  context->disableMultithreading();
  FallbackAsmResourceMap fallbackResourceMap;
  ParserConfig parseConfig(context, config.shouldVerifyOnParsing(),
                           &fallbackResourceMap);
  TimingScope parserTiming = timing.nest("Parser");
  OwningOpRef<Operation *> op = parseSourceFileForTool(
      sourceMgr, parseConfig, !config.shouldUseExplicitModule());
  parserTiming.stop();
  if (!op)
    return failure();
  context->enableMultithreading(threading);

  PassManager pm(op.get()->getName(), PassManager::Nesting::Implicit);
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(timing);
  if (failed(config.setupPassPipeline(pm)) || failed(pm.run(*op)))
    return failure();

  TimingScope outputTiming = timing.nest("Output");
  if (config.shouldEmitBytecode()) {
    BytecodeWriterConfig writerConfig(fallbackResourceMap);
    if (std::optional<int64_t> version = config.bytecodeVersionToEmit())
      writerConfig.setDesiredBytecodeVersion(*version);
    if (config.shouldElideResourceDataFromBytecode())
      writerConfig.setElideResourceDataFlag();
    if (failed(writeBytecodeToFile(op.get(), output->os(), writerConfig)))
      return failure();
  } else {
    if (config.bytecodeVersionToEmit())
      return emitError(UnknownLoc::get(context))
             << "bytecode version while not emitting bytecode";
    AsmState asmState(op.get(), OpPrintingFlags(), /*locationMap=*/nullptr,
                      &fallbackResourceMap);
    op.get()->print(output->os(), asmState);
    output->os() << '\n';
  }
  outputTiming.stop();
  output->keep();
  (void)op.release(); // with the context
  return success();
}

/// Where the output is written first: a new file beside `outputFile` (a
/// unique name), or `outputFile` itself for standard output, for anything
/// but a regular file (`/dev/null`, a pipe: never replaced by a file), or
/// where no file can be made there (the tool then reports why it cannot
/// write).
std::string stageOutput(const std::string &outputFile) {
  if (outputFile == "-")
    return outputFile;
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(outputFile, status) &&
      status.type() != llvm::sys::fs::file_type::regular_file)
    return outputFile;
  int fd = -1;
  llvm::SmallString<256> staged;
  if (llvm::sys::fs::createUniqueFile(outputFile + ".tmp-%%%%%%%%", fd, staged))
    return outputFile;
  llvm::sys::fs::closeFile(fd);
  return std::string(staged);
}

/// Renames the staged output over `outputFile` after a success, and removes
/// it after a failure.
mlir::LogicalResult finishOutput(const std::string &staged,
                                 const std::string &outputFile,
                                 mlir::LogicalResult result) {
  if (staged == outputFile)
    return result;
  if (mlir::failed(result)) {
    llvm::sys::fs::remove(staged);
    return result;
  }
  if (std::error_code error = llvm::sys::fs::rename(staged, outputFile)) {
    llvm::errs() << "pippy-opt: error: cannot write " << outputFile << ": "
                 << error.message() << "\n";
    llvm::sys::fs::remove(staged);
    return mlir::failure();
  }
  return result;
}

/// `pippy-opt --print-executable PATH...`: each stage executable (a
/// `.pipx` file, or every rank's in a folder) as text, for debugging.
int printExecutables(int argc, char **argv) {
  if (argc < 3) {
    llvm::errs() << "usage: pippy-opt --print-executable FILE|DIR...\n";
    return 1;
  }
  for (int i = 2; i < argc; ++i) {
    std::vector<std::string> files;
    if (llvm::sys::fs::is_directory(argv[i])) {
      for (int r = 0;; ++r) {
        std::string file =
            std::string(argv[i]) + "/" + pippy::exe::rankFileName(r);
        if (!llvm::sys::fs::exists(file))
          break;
        files.push_back(file);
      }
      if (files.empty()) {
        llvm::errs() << "pippy-opt: error: " << argv[i]
                     << " holds no rank0.pipx\n";
        return 1;
      }
    } else {
      files.push_back(argv[i]);
    }
    for (const std::string &file : files) {
      auto buffer =
          llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
      if (!buffer) {
        llvm::errs() << "pippy-opt: error: cannot open input file '" << file
                     << "': " << buffer.getError().message() << "\n";
        return 1;
      }
      // FlatBuffers reads aligned scalars: copy into an aligned buffer.
      std::vector<uint64_t> aligned(((*buffer)->getBufferSize() + 7) / 8);
      std::memcpy(aligned.data(), (*buffer)->getBufferStart(),
                  (*buffer)->getBufferSize());
      std::string error;
      const pippy::exe::Executable *exe =
          pippy::exe::verify(reinterpret_cast<const uint8_t *>(aligned.data()),
                             (*buffer)->getBufferSize(), error);
      if (!exe) {
        llvm::errs() << "pippy-opt: error: " << file << ": " << error << "\n";
        return 1;
      }
      llvm::outs() << "// " << file << "\n" << pippy::exe::toText(*exe);
    }
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && llvm::StringRef(argv[1]) == "--print-executable")
    return printExecutables(argc, argv);
  pippy::useLargeAllocatorPages();
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::sparse_tensor::SparseTensorDialect,
                  mlir::torch::TorchDialect, mlir::pippy::PippyDialect>();
  mlir::pippy::registerPippyPasses();
  mlir::pippy::registerPippyPipelines();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "pippy compiler driver\n", registry);
  // Defaults that differ from mlir-opt's, set on the parsed options unless
  // the command line gave them.
  auto setDefault = [](llvm::StringRef name, bool value) {
    auto *opt = static_cast<llvm::cl::opt<bool> *>(
        llvm::cl::getRegisteredOptions().lookup(name));
    if (opt && opt->getNumOccurrences() == 0)
      opt->setValue(value);
  };
  // A failing pass names its problem and location; dumping the whole
  // function after it only buries the message. Users can ask for it back.
  setDefault("mlir-print-op-on-diagnostic", false);
  // The parser verifies its input and the pass manager each pass's output,
  // so printing need not verify the result once more (on a 100k-op IR that
  // is a fifth of the printing time). When either verification is turned
  // off, the printer keeps its own.
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldVerifyPasses() && config.shouldVerifyOnParsing())
    setDefault("mlir-print-assume-verified", true);
  // The output is written beside the destination and renamed over it only
  // on success: a failing run leaves an existing file as it was.
  std::string staged = stageOutput(outputFile);
  mlir::LogicalResult result = mlir::failure();
  if (std::optional<mlir::LogicalResult> plain =
          runPlain(argc, argv, inputFile, staged, registry, config))
    result = *plain;
  else
    result = mlir::MlirOptMain(argc, argv, inputFile, staged, registry);
  return mlir::asMainReturnCode(finishOutput(staged, outputFile, result));
}
