//===- pippy-import.cpp - TorchScript to pippy's graph IR -----------------===//
//
//   pippy-import model.pt --input-shapes 4x32xf32 -o model.mlir \
//       --weights model.safetensors
//
//===----------------------------------------------------------------------===//

#include "pippy/Import/TorchScript.h"
#include "pippy/Support/Allocator.h"
#include "pippy/Support/AsmText.h"
#include "pippy/Support/AtomicFile.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::OptionCategory importCategory("pippy-import options");
static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<model.pt>"),
                                      cl::cat(importCategory));
static cl::opt<std::string>
    inputShapes("input-shapes", cl::Required,
                cl::desc("one shape per forward argument at micro-batch "
                         "size, e.g. 4x32xf32 or 2x16xsi64,2x16xsi64"),
                cl::cat(importCategory));
static cl::opt<std::string> outputFile("o", cl::desc("output IR file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(importCategory));
static cl::opt<bool> emitBytecode(
    "emit-bytecode",
    cl::desc("write MLIR bytecode instead of text (smaller, and several times "
             "faster for pippy-opt and pippy-run to read)"),
    cl::cat(importCategory));
static cl::opt<std::string>
    weightsFile("weights", cl::Required,
                cl::desc("safetensors file that receives the parameters"),
                cl::value_desc("file"), cl::cat(importCategory));

static int fail(const Twine &message) {
  WithColor::error(errs(), "pippy-import") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  pippy::useLargeAllocatorPages();
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(importCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "pippy-import: traced TorchScript module to graph IR\n\n"
      "  Torch-MLIR output (.mlir) is already IR: lift its weight literals "
      "with\n  pippy-opt model.mlir --pippy-lift-params=weights=FILE\n");

  if (StringRef(inputFile).ends_with(".mlir") ||
      StringRef(inputFile).ends_with(".mlirbc"))
    return fail(inputFile +
                ": pippy-import reads traced TorchScript (.pt); Torch-MLIR "
                "output is imported with pippy-opt " +
                inputFile + " --pippy-lift-params=weights=FILE");

  // The weights are written during the import, the IR after it: neither
  // may be the module read, nor one the other.
  if (pippy::sameFile(weightsFile, inputFile))
    return fail("--weights " + weightsFile +
                " is the module being imported: "
                "writing it would destroy it; name another file");
  if (outputFile != "-" && pippy::sameFile(outputFile, inputFile))
    return fail("-o " + outputFile +
                " is the module being imported: "
                "writing it would destroy it; name another file");
  if (outputFile != "-" && pippy::sameFile(outputFile, weightsFile))
    return fail("-o and --weights name one file, " + outputFile +
                ": the IR would overwrite the weights");

  Expected<std::vector<pippy::InputShape>> shapes =
      pippy::parseInputShapes(inputShapes);
  if (!shapes)
    return fail("--input-shapes: " + toString(shapes.takeError()));

  mlir::MLIRContext context;
  pippy::ImportOptions options{inputFile, std::move(*shapes), weightsFile};
  auto module = pippy::importTorchScript(context, options);
  if (!module)
    return fail(inputFile + ": " + toString(module.takeError()));

  std::string bytes;
  {
    llvm::raw_string_ostream os(bytes);
    if (emitBytecode) {
      // Bytecode always keeps locations, so module paths survive.
      if (mlir::failed(mlir::writeBytecodeToFile(module->get(), os)))
        return fail("cannot write bytecode to " + outputFile);
    } else {
      // Module paths are locations: print them so passes can split by path,
      // their aliases first so that readers resolve each use at once. The
      // importer has verified the module.
      mlir::OpPrintingFlags flags;
      flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
      flags.assumeVerified();
      std::string text;
      llvm::raw_string_ostream textOs(text);
      (*module)->print(textOs, flags);
      os << pippy::hoistLocationAliases(text);
    }
  }
  if (outputFile == "-") {
    llvm::outs() << bytes;
    return 0;
  }
  // All at once: a failure leaves an existing file as it was.
  std::string error = pippy::writeFileAtomically(outputFile, bytes);
  if (!error.empty())
    return fail(error);
  return 0;
}
