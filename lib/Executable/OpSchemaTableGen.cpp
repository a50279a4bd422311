//===- OpSchemaTableGen.cpp - argument names of every operator -----------===//
//
// A build step, not a tool: prints, as C++ table rows, the argument names of
// every operator schema the libtorch it is linked with has (the
// dispatcher's, the JIT registry's and pippy's extra operators), sorted by
// `ns::name.overload`. The lowering stores each call's operands under these
// names, so that an executable binds its arguments by name in whatever
// libtorch runs it. Where one name has schemas of several lengths (pippy's
// two `scaled_dot_product_attention`), the longest is kept: the shorter
// ones are its prefixes.
//
//===----------------------------------------------------------------------===//

#include "ExtraOps.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

std::map<std::string, std::vector<std::string>> table;

void add(const c10::FunctionSchema &schema) {
  std::string key = schema.name();
  if (!schema.overload_name().empty())
    key += "." + schema.overload_name();
  std::vector<std::string> names;
  for (const c10::Argument &arg : schema.arguments())
    names.push_back(arg.name());
  std::vector<std::string> &entry = table[key];
  if (names.size() > entry.size())
    entry = std::move(names);
}

} // namespace

int main() {
  c10::Dispatcher &dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName &name : dispatcher.getAllOpNames())
    if (auto handle = dispatcher.findSchema(name))
      if (handle->hasSchema())
        add(handle->schema());
  for (const std::shared_ptr<torch::jit::Operator> &op :
       torch::jit::getAllOperators())
    add(op->schema());
  for (const c10::FunctionSchema *schema : pippy::rt::extraOperatorSchemas())
    add(*schema);
  std::printf("// Generated at build time from libtorch %s by "
              "lib/Executable/OpSchemaTableGen.cpp.\n",
              TORCH_VERSION);
  for (const auto &[key, names] : table) {
    std::string joined;
    for (const std::string &n : names)
      joined += (joined.empty() ? "" : ",") + n;
    std::printf("{\"%s\", \"%s\"},\n", key.c_str(), joined.c_str());
  }
  return 0;
}
