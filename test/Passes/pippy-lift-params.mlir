// Floating-point literals with more than one element become named parameters
// whose values land in the weights file; integer and one-element literals
// stay; one resource read twice becomes one parameter; pipe_split markers
// become pippy.split_point.
// RUN: rm -rf %t && mkdir -p %t
// RUN: pippy-opt %s --pippy-lift-params="weights=%t/w.safetensors" | FileCheck %s
// RUN: %pippy_python %pippy_src_root/utils/safetensors-dump.py %t/w.safetensors | FileCheck %s --check-prefix=FILE

// CHECK: module attributes {pippy.weights = "{{.*}}w.safetensors"}
// CHECK-LABEL: func.func @forward(
func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,4],f32> {
  // CHECK:      %[[W:.*]] = pippy.param "fc_weight" : !torch.vtensor<[3,4],f32>
  // CHECK-NEXT: %[[B:.*]] = pippy.param "forward.literal0" : !torch.vtensor<[4],f32>
  // CHECK-NEXT: %[[I:.*]] = torch.vtensor.literal(dense<[1, 2]> : tensor<2xsi64>) : !torch.vtensor<[2],si64>
  // CHECK-NEXT: %[[S:.*]] = torch.vtensor.literal(dense<5.000000e-01> : tensor<1xf32>) : !torch.vtensor<[1],f32>
  // CHECK-NEXT: %[[H:.*]] = pippy.param "forward.literal1" : !torch.vtensor<[2],f16>
  // CHECK-NEXT: %[[W2:.*]] = pippy.param "fc_weight" : !torch.vtensor<[3,4],f32>
  %w = torch.vtensor.literal(dense_resource<fc_weight> : tensor<3x4xf32>) : !torch.vtensor<[3,4],f32>
  %b = torch.vtensor.literal(dense<[0.5, -1.0, 2.0, 0.25]> : tensor<4xf32>) : !torch.vtensor<[4],f32>
  %i = torch.vtensor.literal(dense<[1, 2]> : tensor<2xsi64>) : !torch.vtensor<[2],si64>
  %s = torch.vtensor.literal(dense<0.5> : tensor<1xf32>) : !torch.vtensor<[1],f32>
  %h = torch.vtensor.literal(dense<1.5> : tensor<2xf16>) : !torch.vtensor<[2],f16>
  %w2 = torch.vtensor.literal(dense_resource<fc_weight> : tensor<3x4xf32>) : !torch.vtensor<[3,4],f32>
  // CHECK: torch.aten.mm %arg0, %[[W]]
  %0 = torch.aten.mm %x, %w : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
  // CHECK-NEXT: pippy.split_point
  torch.operator "torch.pippy._pipe_split"() : () -> ()
  // CHECK-NEXT: torch.aten.mm %arg0, %[[W2]]
  %1 = torch.aten.mm %x, %w2 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
  return %1 : !torch.vtensor<[2,4],f32>
}

// FILE:      fc_weight F32 3x4 bytes=48 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
// FILE-NEXT: forward.literal0 F32 4 bytes=16 [0.5, -1, 2, 0.25]
// FILE-NEXT: forward.literal1 F16 2 bytes=4 [1.5, 1.5]{{$}}
// FILE-NOT: {{.}}

{-#
  dialect_resources: {
    builtin: {
      fc_weight: "0x040000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041"
    }
  }
#-}
