// Every type of Torch-MLIR's grammar prints back in Torch-MLIR's syntax, and
// the printed form reads back unchanged.
// RUN: pippy-opt %s | FileCheck %s
// RUN: pippy-opt %s | pippy-opt | FileCheck %s
// RUN: pippy-opt %s --mlir-print-op-generic | pippy-opt | FileCheck %s
// RUN: pippy-opt %s --emit-bytecode | pippy-opt | FileCheck %s

#CSR = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>

// CHECK-LABEL: func.func @tensors(
// CHECK-SAME: %arg0: !torch.vtensor<[2,3],f32>
// CHECK-SAME: %arg1: !torch.vtensor<[?,4,?],bf16>
// CHECK-SAME: %arg2: !torch.vtensor<[],si64>
// CHECK-SAME: %arg3: !torch.vtensor<*,f16>
// CHECK-SAME: %arg4: !torch.vtensor
// CHECK-SAME: %arg5: !torch.vtensor<[2],unk>
// CHECK-SAME: %arg6: !torch.tensor<[2,3],i1>
// CHECK-SAME: %arg7: !torch.tensor
// CHECK-SAME: %arg8: !torch.vtensor<[4],ui8>
// CHECK-SAME: %arg9: !torch.vtensor<[4],si8>
// CHECK-SAME: %arg10: !torch.vtensor<[4],f8E4M3FN>
// CHECK-SAME: %arg11: !torch.vtensor<[4],f8E5M2>
// CHECK-SAME: %arg12: !torch.vtensor<[4],f8E8M0FNU>
// CHECK-SAME: %arg13: !torch.vtensor<[16,5],complex<f32>>
// CHECK-SAME: %arg14: !torch.vtensor<[?,?,?,?],!torch.qint8>
// CHECK-SAME: %arg15: !torch.vtensor<[1],!torch.quint8>
// CHECK-SAME: %arg16: !torch.vtensor<[1],!torch.qint32>
// CHECK-SAME: %arg17: !torch.vtensor<[8,8],f32,#sparse>
// CHECK-SAME: %arg18: !torch.vtensor<[2],f64>
// CHECK-SAME: %arg19: !torch.vtensor<[2],si4>
// CHECK-SAME: %arg20: !torch.tensor<*,!torch.qint16>
func.func @tensors(
    %arg0: !torch.vtensor<[2,3],f32>, %arg1: !torch.vtensor<[?,4,?],bf16>,
    %arg2: !torch.vtensor<[],si64>, %arg3: !torch.vtensor<*,f16>,
    %arg4: !torch.vtensor, %arg5: !torch.vtensor<[2],unk>,
    %arg6: !torch.tensor<[2, 3], i1>, %arg7: !torch.tensor<*,unk>,
    %arg8: !torch.vtensor<[4],ui8>, %arg9: !torch.vtensor<[4],si8>,
    %arg10: !torch.vtensor<[4],f8E4M3FN>, %arg11: !torch.vtensor<[4],f8E5M2>,
    %arg12: !torch.vtensor<[4],f8E8M0FNU>,
    %arg13: !torch.vtensor<[16,5],complex<f32>>,
    %arg14: !torch.vtensor<[?,?,?,?],!torch.qint8>,
    %arg15: !torch.vtensor<[1],!torch.quint8>,
    %arg16: !torch.vtensor<[1],!torch.qint32>,
    %arg17: !torch.vtensor<[8,8],f32,#CSR>,
    %arg18: !torch.vtensor<[2],f64>, %arg19: !torch.vtensor<[2],si4>,
    %arg20: !torch.tensor<*,!torch.qint16>) {
  return
}

// CHECK-LABEL: func.func @scalars(
// CHECK-SAME: %arg0: !torch.int, %arg1: !torch.float, %arg2: !torch.bool,
// CHECK-SAME: %arg3: !torch.none, %arg4: !torch.str, %arg5: !torch.Device,
// CHECK-SAME: %arg6: !torch.Generator, %arg7: !torch.number, %arg8: !torch.any,
// CHECK-SAME: %arg9: !torch.LinearParams, %arg10: !torch.qint8,
// CHECK-SAME: %arg11: !torch.quint8, %arg12: !torch.qint32, %arg13: !torch.qint16)
func.func @scalars(%arg0: !torch.int, %arg1: !torch.float, %arg2: !torch.bool,
                   %arg3: !torch.none, %arg4: !torch.str, %arg5: !torch.Device,
                   %arg6: !torch.Generator, %arg7: !torch.number,
                   %arg8: !torch.any, %arg9: !torch.LinearParams,
                   %arg10: !torch.qint8, %arg11: !torch.quint8,
                   %arg12: !torch.qint32, %arg13: !torch.qint16) {
  return
}

// Nested types drop the `!torch.` prefix; tuples, unions and dicts separate
// their members with ", ".
// CHECK-LABEL: func.func @containers(
// CHECK-SAME: %arg0: !torch.list<int>
// CHECK-SAME: %arg1: !torch.list<optional<vtensor<[4,4],i1>>>
// CHECK-SAME: %arg2: !torch.optional<list<float>>
// CHECK-SAME: %arg3: !torch.tuple<int, vtensor<[2],f32>, str>
// CHECK-SAME: %arg4: !torch.tuple<>
// CHECK-SAME: %arg5: !torch.union<int, float, none>
// CHECK-SAME: %arg6: !torch.dict<str, list<int>>
// CHECK-SAME: %arg7: !torch.nn.Module<"__torch__.MyModule">
// CHECK-SAME: %arg8: !torch.list<list<tuple<int, Device>>>
// CHECK-SAME: %arg9: !torch.optional<tensor>
// CHECK-SAME: %arg10: !torch.list<vtensor<[2],!torch.qint8>>
func.func @containers(%arg0: !torch.list<int>,
                      %arg1: !torch.list<optional<vtensor<[4,4],i1>>>,
                      %arg2: !torch.optional<list<float>>,
                      %arg3: !torch.tuple<int,vtensor<[2],f32>,str>,
                      %arg4: !torch.tuple<>,
                      %arg5: !torch.union<int, float, none>,
                      %arg6: !torch.dict<str, list<int>>,
                      %arg7: !torch.nn.Module<"__torch__.MyModule">,
                      %arg8: !torch.list<list<tuple<int, Device>>>,
                      %arg9: !torch.optional<tensor>,
                      %arg10: !torch.list<vtensor<[2],!torch.qint8>>) {
  return
}
