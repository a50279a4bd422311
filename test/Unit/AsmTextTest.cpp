//===- AsmTextTest.cpp - location aliases moved before the operation ------===//

#include "pippy/Support/AsmText.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace pippy;

namespace {

std::string printWithLocations(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(os, flags);
  return text;
}

// A module whose ops carry name, file and call-site locations, the last
// naming two other aliases.
constexpr const char *kModule = R"mlir(
module {
  func.func @f(%a: i32 loc("m.pt":0:0)) -> i32 {
    %0 = "test.op"(%a) : (i32) -> i32 loc("layers.0")
    %1 = "test.op"(%0) : (i32) -> i32 loc("layers.1")
    %2 = "test.op"(%1) : (i32) -> i32 loc(callsite("layers.0" at "m.pt":3:4))
    return %2 : i32 loc("m.pt":0:0)
  } loc("m.pt":0:0)
} loc("m.pt":0:0)
)mlir";

class AsmText : public ::testing::Test {
protected:
  AsmText() {
    context.loadDialect<mlir::func::FuncDialect>();
    context.allowUnregisteredDialects();
    module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  }
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(AsmText, AliasesMoveBeforeTheModuleAndReadBackTheSame) {
  ASSERT_TRUE(module);
  std::string printed = printWithLocations(*module);
  // The printer puts location aliases after the module.
  size_t moduleAt = printed.find("\nmodule ");
  ASSERT_NE(moduleAt, std::string::npos);
  ASSERT_NE(printed.find("= loc(\"layers.0\")", moduleAt), std::string::npos);

  std::string hoisted = hoistLocationAliases(printed);
  EXPECT_NE(hoisted, printed);
  EXPECT_EQ(hoisted.size(), printed.size());
  // Every alias definition now comes before the module, none after it.
  size_t newModuleAt = hoisted.find("\nmodule ");
  ASSERT_NE(newModuleAt, std::string::npos);
  EXPECT_EQ(hoisted.find("= loc(", newModuleAt), std::string::npos);
  EXPECT_NE(hoisted.find("= loc(\"layers.0\")"), std::string::npos);
  EXPECT_NE(hoisted.find("= loc(callsite("), std::string::npos);
  EXPECT_EQ(hoisted.back(), '\n');

  // The hoisted text reads back to the same module, locations included.
  auto reread = mlir::parseSourceString<mlir::ModuleOp>(hoisted, &context);
  ASSERT_TRUE(reread);
  EXPECT_EQ(printWithLocations(*reread), printed);
}

TEST_F(AsmText, TextWithoutTrailingAliasesIsUnchanged) {
  ASSERT_TRUE(module);
  std::string plain;
  llvm::raw_string_ostream os(plain);
  (*module)->print(os); // no locations printed
  EXPECT_EQ(plain.find("loc("), std::string::npos);
  EXPECT_EQ(hoistLocationAliases(plain), plain);
  EXPECT_EQ(hoistLocationAliases(""), "");
}

TEST(AsmTextLines, OnlyATrailingBlockAfterTheClosingBraceMoves) {
  // Aliases that open the file stay first; the trailing block follows them.
  EXPECT_EQ(hoistLocationAliases("#loc = loc(\"a\":0:0)\n!t = i32\nmodule {\n"
                                 "} loc(#loc1)\n#loc1 = loc(\"b\")\n"
                                 "#loc2 = loc(callsite(#loc1 at #loc))\n"),
            "#loc = loc(\"a\":0:0)\n!t = i32\n#loc1 = loc(\"b\")\n"
            "#loc2 = loc(callsite(#loc1 at #loc))\nmodule {\n} loc(#loc1)\n");
  // A resource section after the aliases: left as printed.
  std::string resources = "module {\n} loc(#loc1)\n#loc1 = loc(\"b\")\n\n"
                          "{-#\n  dialect_resources: {}\n#-}\n";
  EXPECT_EQ(hoistLocationAliases(resources), resources);
  // A trailing block not preceded by the end of an operation: left alone.
  std::string bare = "#loc1 = loc(\"b\")\n#loc2 = loc(\"c\")\n";
  EXPECT_EQ(hoistLocationAliases(bare), bare);
  std::string afterOp = "\"test.op\"() : () -> ()\n#loc1 = loc(\"b\")\n";
  EXPECT_EQ(hoistLocationAliases(afterOp), afterOp);
  // Non-location aliases at the end are not location aliases.
  std::string attr = "module {\n}\n#map = affine_map<(d0) -> (d0)>\n";
  EXPECT_EQ(hoistLocationAliases(attr), attr);
  // Trailing empty lines stay at the end.
  EXPECT_EQ(hoistLocationAliases("module {\n}\n#l = loc(\"b\")\n\n"),
            "#l = loc(\"b\")\nmodule {\n}\n\n");
}

} // namespace
