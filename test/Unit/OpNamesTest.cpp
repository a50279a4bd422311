//===- OpNamesTest.cpp - torch op names to ATen operator names ------------===//

#include "pippy/Support/OpNames.h"

#include "gtest/gtest.h"

using namespace pippy;

namespace {

TEST(OpNames, OverloadedAtenOp) {
  auto op = parseTorchOpName("torch.aten.add.Tensor");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->ns, "aten");
  EXPECT_EQ(op->name, "add");
  EXPECT_EQ(op->overload, "Tensor");
  EXPECT_EQ(op->qualifiedName(), "aten::add");
  EXPECT_EQ(op->str(), "aten::add.Tensor");
}

TEST(OpNames, DefaultOverload) {
  auto op = parseTorchOpName("torch.aten.linear");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->str(), "aten::linear");
  EXPECT_TRUE(op->overload.empty());
}

TEST(OpNames, InPlaceDunderAndOtherNamespaces) {
  EXPECT_EQ(parseTorchOpName("torch.aten.add_.Tensor")->str(),
            "aten::add_.Tensor");
  EXPECT_EQ(parseTorchOpName("torch.aten.__and__.Tensor")->str(),
            "aten::__and__.Tensor");
  EXPECT_EQ(parseTorchOpName("torch.prim.NumToTensor.Scalar")->str(),
            "prim::NumToTensor.Scalar");
  EXPECT_EQ(parseTorchOpName("torch.prims.convert_element_type")->str(),
            "prims::convert_element_type");
  EXPECT_EQ(parseTorchOpName("torch.quantized.linear")->str(),
            "quantized::linear");
}

TEST(OpNames, RejectsNamesOutsideTheGrammar) {
  EXPECT_FALSE(parseTorchOpName("aten.add.Tensor"));
  EXPECT_FALSE(parseTorchOpName("torch.aten"));
  EXPECT_FALSE(parseTorchOpName("torch.aten..Tensor"));
  EXPECT_FALSE(parseTorchOpName("torch.aten.add.Tensor.extra"));
  EXPECT_FALSE(parseTorchOpName("torch.aten.1add"));
  EXPECT_FALSE(parseTorchOpName("torch.aten.add-x"));
}

TEST(OpNames, RoundTripsThroughSchemaNames) {
  for (const char *schema :
       {"aten::add.Tensor", "aten::linear", "prim::NumToTensor.Scalar",
        "aten::_convolution.deprecated", "prims::sum"}) {
    auto op = parseSchemaName(schema);
    ASSERT_TRUE(op) << schema;
    EXPECT_EQ(op->str(), schema);
    auto back = parseTorchOpName(getTorchOpName(*op));
    ASSERT_TRUE(back) << schema;
    EXPECT_EQ(*back, *op);
  }
  EXPECT_EQ(getTorchOpName(*parseSchemaName("aten::add.Tensor")),
            "torch.aten.add.Tensor");
}

TEST(OpNames, RejectsMalformedSchemaNames) {
  EXPECT_FALSE(parseSchemaName("add.Tensor"));
  EXPECT_FALSE(parseSchemaName("aten::"));
  EXPECT_FALSE(parseSchemaName("aten::add."));
  EXPECT_FALSE(parseSchemaName("aten::add.Tensor.x"));
}

} // namespace
