// Lifting fails with one message naming the problem.
// RUN: rm -rf %t && mkdir -p %t
// RUN: pippy-opt %s -split-input-file -verify-diagnostics --pippy-lift-params="weights=%t/w.safetensors"

func.func @missing_blob() {
  // expected-error @+1 {{'torch.vtensor.literal' op uses dense_resource<nothing_here>, which has no data in the file's dialect_resources section}}
  %w = torch.vtensor.literal(dense_resource<nothing_here> : tensor<2x2xf32>) : !torch.vtensor<[2,2],f32>
  return
}

// -----

func.func @marker_with_operands(%x: !torch.int) {
  // expected-error @+1 {{'torch.operator' op torch.pippy._pipe_split must take no operands and have no used results}}
  torch.operator "torch.pippy._pipe_split"(%x) : (!torch.int) -> ()
  return
}

// -----

func.func @elided() {
  // expected-error @+1 {{'torch.vtensor.literal' op uses dense_resource<__elided__>, which has no data in the file's dialect_resources section (the module was printed with its large constants elided; print it whole, or write it as bytecode)}}
  %w = torch.vtensor.literal(dense_resource<__elided__> : tensor<2x2xf32>) : !torch.vtensor<[2,2],f32>
  return
}
