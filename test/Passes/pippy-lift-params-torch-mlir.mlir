// Torch-MLIR's FX importer output: the function is @main, and literals
// carry parameters and buffers alike. Lifting names the function forward,
// lists a batch norm's running statistics as buffers in the weights file,
// and lists the literals named by buffers=... too.
// RUN: rm -rf %t && mkdir -p %t
// RUN: pippy-opt %s --pippy-lift-params="weights=%t/w.safetensors buffers=torch_tensor_2_4_torch.float32" | FileCheck %s
// RUN: %pippy_python %pippy_src_root/utils/safetensors-dump.py %t/w.safetensors | FileCheck %s --check-prefix=FILE
// A buffers name that no lifted literal has is an error.
// RUN: not pippy-opt %s --pippy-lift-params="weights=%t/v.safetensors buffers=bn_mean" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: pippy-lift-params: buffers names 'bn_mean', which is no lifted literal's parameter name

// CHECK-LABEL: func.func @forward(
// CHECK-NOT: @main
module {
  func.func @main(%arg0: !torch.vtensor<[2,3,4],f32>) -> !torch.vtensor<[2,3,4],f32> {
    %0 = torch.vtensor.literal(dense_resource<torch_tensor_3_torch.float32> : tensor<3xf32>) : !torch.vtensor<[3],f32>
    %1 = torch.vtensor.literal(dense_resource<torch_tensor_3_torch.float32_1> : tensor<3xf32>) : !torch.vtensor<[3],f32>
    %2 = torch.vtensor.literal(dense_resource<torch_tensor_3_torch.float32_2> : tensor<3xf32>) : !torch.vtensor<[3],f32>
    %3 = torch.vtensor.literal(dense_resource<torch_tensor_3_torch.float32_3> : tensor<3xf32>) : !torch.vtensor<[3],f32>
    %4 = torch.vtensor.literal(dense_resource<torch_tensor_2_4_torch.float32> : tensor<2x4xf32>) : !torch.vtensor<[2,4],f32>
    %float1.000000e-01 = torch.constant.float 1.000000e-01
    %float1.000000e-05 = torch.constant.float 1.000000e-05
    // CHECK: torch.aten._native_batch_norm_legit_no_training
    %5:3 = torch.aten._native_batch_norm_legit_no_training %arg0, %0, %1, %2, %3, %float1.000000e-01, %float1.000000e-05 : !torch.vtensor<[2,3,4],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.float, !torch.float -> !torch.vtensor<[2,3,4],f32>, !torch.vtensor<[0],f32>, !torch.vtensor<[0],f32>
    %int1 = torch.constant.int 1
    %6 = torch.aten.add.Tensor %5#0, %4, %int1 : !torch.vtensor<[2,3,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,3,4],f32>
    return %6 : !torch.vtensor<[2,3,4],f32>
  }
}

// The weight and bias are trained; the running mean and variance (operands
// 3 and 4) and the literal named by buffers= are not.
// FILE: metadata buffers = ["torch_tensor_3_torch.float32_2","torch_tensor_3_torch.float32_3","torch_tensor_2_4_torch.float32"]
// FILE-NEXT: torch_tensor_3_torch.float32 F32 3 bytes=12 [1, 2, 3]
// FILE-NEXT: torch_tensor_3_torch.float32_1 F32 3 bytes=12 [0.5, 0.5, 0.5]
// FILE-NEXT: torch_tensor_3_torch.float32_2 F32 3 bytes=12 [0.1, 0.2, 0.3]
// FILE-NEXT: torch_tensor_3_torch.float32_3 F32 3 bytes=12 [1, 1, 2]
// FILE-NEXT: torch_tensor_2_4_torch.float32 F32 2x4 bytes=32

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_3_torch.float32: "0x040000000000803F0000004000004040",
      torch_tensor_3_torch.float32_1: "0x040000000000003F0000003F0000003F",
      torch_tensor_3_torch.float32_2: "0x04000000CDCCCC3DCDCC4C3E9A99993E",
      torch_tensor_3_torch.float32_3: "0x040000000000803F0000803F00000040",
      torch_tensor_2_4_torch.float32: "0x04000000000000000000000000000000286B6ECE0000000000000000286B6ECE286B6ECE"
    }
  }
#-}
