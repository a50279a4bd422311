//===- InputShapes.cpp - the --input-shapes argument ----------------------===//

#include "pippy/Import/InputShapes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace pippy;

static const char *const kDtypes[] = {"f32",  "f64",  "f16", "bf16", "si64",
                                      "si32", "si16", "si8", "ui8",  "i1"};

llvm::Expected<std::vector<InputShape>>
pippy::parseInputShapes(llvm::StringRef text) {
  std::vector<InputShape> shapes;
  if (text.trim().empty())
    return llvm::createStringError("--input-shapes is empty; expected one "
                                   "shape per forward argument, e.g. 4x32xf32");
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',');
  for (auto [index, item] : llvm::enumerate(items)) {
    item = item.trim();
    llvm::SmallVector<llvm::StringRef> parts;
    item.split(parts, 'x');
    auto fail = [&, index = index, item = item](const llvm::Twine &why) {
      return llvm::createStringError("input " + llvm::Twine(index) + " ('" +
                                     item + "'): " + why);
    };
    if (parts.size() < 2)
      return fail("expected sizes and a dtype, e.g. 4x32xf32");
    InputShape shape;
    for (llvm::StringRef size : llvm::ArrayRef(parts).drop_back()) {
      int64_t value;
      if (size.getAsInteger(10, value) || value < 0)
        return fail("size '" + size + "' is not a non-negative integer");
      shape.sizes.push_back(value);
    }
    if (shape.sizes.front() == 0)
      return fail("0 rows: the first size is the micro-batch's rows, and a "
                  "micro-batch of none trains nothing");
    shape.dtype = parts.back().str();
    if (!llvm::is_contained(kDtypes, parts.back()))
      return fail("unknown dtype '" + parts.back() +
                  "'; expected one of f32, f64, f16, bf16, si64, si32, si16, "
                  "si8, ui8, i1");
    shapes.push_back(std::move(shape));
  }
  return shapes;
}
