// A point that matches no module, or is malformed, is an error naming it.
// RUN: not pippy-opt %s --pippy-annotate-split-points="points=layers.9:begin" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not pippy-opt %s --pippy-annotate-split-points="points=layers.0:middle" 2>&1 | FileCheck %s --check-prefix=BADKIND
// NOMATCH: error: split point 'layers.9:begin' matches no op: no op has module path 'layers.9' or a path inside it
// BADKIND: error: split point 'layers.0:middle' must be <module path>:begin or <module path>:end
func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32> loc("layers.0")
  return %0 : !torch.vtensor<[2,4],f32>
}
