// Every registered torch op and the shared default format print exactly as
// Torch-MLIR prints them (SSA names of constants included), and the printed
// form, the generic form and bytecode all read back to the same IR.
// RUN: pippy-opt %s -split-input-file | FileCheck %s --strict-whitespace
// RUN: pippy-opt %s -split-input-file | pippy-opt -split-input-file | FileCheck %s --strict-whitespace
// RUN: pippy-opt %s -split-input-file --mlir-print-op-generic | pippy-opt -split-input-file | FileCheck %s --strict-whitespace

// CHECK-LABEL: func.func @constants()
func.func @constants() -> (!torch.int, !torch.int, !torch.float, !torch.float, !torch.bool, !torch.bool, !torch.none, !torch.str, !torch.Device, !torch.number, !torch.number) {
  // CHECK-NEXT: %int1 = torch.constant.int 1
  %0 = torch.constant.int 1
  // CHECK-NEXT: %int-9223372036854775808 = torch.constant.int -9223372036854775808
  %1 = torch.constant.int -9223372036854775808
  // CHECK-NEXT: %int5 = torch.constant.int 5 {test = "value"}
  %int5 = torch.constant.int 5 {test = "value"}
  // CHECK-NEXT: %float1.000000e-02 = torch.constant.float 1.000000e-02
  %2 = torch.constant.float 0.01
  // CHECK-NEXT: %float-3.250000e00 = torch.constant.float -3.250000e+00
  %3 = torch.constant.float -3.25
  // CHECK-NEXT: %true = torch.constant.bool true
  %4 = torch.constant.bool true
  // CHECK-NEXT: %false = torch.constant.bool false
  %5 = torch.constant.bool false
  // CHECK-NEXT: %none = torch.constant.none
  %6 = torch.constant.none
  // CHECK-NEXT: %str = torch.constant.str "floor"
  %7 = torch.constant.str "floor"
  // CHECK-NEXT: %cuda3A0 = torch.constant.device "cuda:0"
  %8 = torch.constant.device "cuda:0"
  // CHECK-NEXT: %0 = "torch.constant.number"() <{value = 1 : i64}> : () -> !torch.number
  %9 = "torch.constant.number"() <{value = 1 : i64}> : () -> !torch.number
  // CHECK-NEXT: %1 = "torch.constant.number"() <{value = 2.500000e+00 : f64}> : () -> !torch.number
  %10 = "torch.constant.number"() <{value = 2.5 : f64}> : () -> !torch.number
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : !torch.int, !torch.int, !torch.float, !torch.float, !torch.bool, !torch.bool, !torch.none, !torch.str, !torch.Device, !torch.number, !torch.number
}

// Float constants print as MLIR prints an f64: the exponent form where it
// reads back exactly, the shortest exact decimal where it does not, and
// infinities and NaN in hexadecimal. The SSA name is always the exponent
// form. A value seen again prints the same.
// CHECK-LABEL: func.func @float_texts()
func.func @float_texts() -> (!torch.float, !torch.float, !torch.float, !torch.float, !torch.float, !torch.float, !torch.float) {
  // CHECK-NEXT: %float1.234570e00 = torch.constant.float 1.2345678899999999
  %0 = torch.constant.float 1.23456789
  // CHECK-NEXT: %float1.234570e00_0 = torch.constant.float 1.2345678899999999
  %1 = torch.constant.float 1.23456789
  // CHECK-NEXT: %floatInf = torch.constant.float 0x7FF0000000000000
  %2 = torch.constant.float 0x7FF0000000000000
  // CHECK-NEXT: %floatNaN = torch.constant.float 0x7FF8000000000000
  %3 = torch.constant.float 0x7FF8000000000000
  // CHECK-NEXT: %float-0.000000e00 = torch.constant.float -0.000000e+00
  %4 = torch.constant.float -0.0
  // CHECK-NEXT: %float1.000000e300 = torch.constant.float 1.000000e+300 {note = 1 : i64}
  %5 = torch.constant.float 1.0e300 {note = 1}
  // CHECK-NEXT: %float1.234570e00_1 = torch.constant.float 1.2345678899999999
  %6 = torch.constant.float 1.23456789
  return %0, %1, %2, %3, %4, %5, %6 : !torch.float, !torch.float, !torch.float, !torch.float, !torch.float, !torch.float, !torch.float
}

// Unregistered ops in the shared format: operands, attributes, no operands,
// no results, several results, overloads, any namespace.
// CHECK-LABEL: func.func @default_format(
func.func @default_format(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3,4],f32>, %n: !torch.int) -> !torch.vtensor<[2,4],f32> {
  // CHECK: %0 = torch.aten.mm %arg0, %arg1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
  %0 = torch.aten.mm %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
  // CHECK: %1 = torch.aten.add.Tensor %0, %0, %arg2 {pippy.note = "x"} : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f32>
  %1 = torch.aten.add.Tensor %0, %0, %n {pippy.note = "x"} : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f32>
  // CHECK: %2:2 = torch.aten.max.dim %1, %arg2, %false : !torch.vtensor<[2,4],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2],f32>, !torch.vtensor<[2],si64>
  %false = torch.constant.bool false
  %values, %indices = torch.aten.max.dim %1, %n, %false : !torch.vtensor<[2,4],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2],f32>, !torch.vtensor<[2],si64>
  // CHECK: torch.aten._assert_scalar %arg2, %str : !torch.int, !torch.str
  %str = torch.constant.str "message"
  torch.aten._assert_scalar %n, %str : !torch.int, !torch.str
  // CHECK: %3 = torch.prim.device : !torch.Device
  %dev = torch.prim.device : !torch.Device
  // CHECK: torch.prim.RaiseException : 
  torch.prim.RaiseException :
  // CHECK: %4 = torch.prims.convert_element_type %0, %arg2 : !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f16>
  %4 = torch.prims.convert_element_type %0, %n : !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f16>
  // CHECK: %5 = torch.quantized_decomposed.quantize_per_tensor %0 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],si8>
  %5 = torch.quantized_decomposed.quantize_per_tensor %0 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],si8>
  // Higher-order operators have a single name and the shared format.
  // CHECK: %6:2 = torch.hop_flex_attention %0, %0, %0, %false {enable_gqa = true} : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.bool -> !torch.vtensor<[2,4],f32>, !torch.none
  %6:2 = torch.hop_flex_attention %0, %0, %0, %false {enable_gqa = true} : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.bool -> !torch.vtensor<[2,4],f32>, !torch.none
  return %1 : !torch.vtensor<[2,4],f32>
}

// CHECK-LABEL: func.func @literals_casts_copies(
func.func @literals_casts_copies(%t: !torch.tensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  // CHECK: %0 = torch.vtensor.literal(dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %0 = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  // CHECK: %1 = torch.vtensor.literal(dense<7> : tensor<si64>) : !torch.vtensor<[],si64>
  %1 = torch.vtensor.literal(dense<7> : tensor<si64>) : !torch.vtensor<[],si64>
  // CHECK: %2 = torch.vtensor.literal(dense_resource<blob> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %2 = torch.vtensor.literal(dense_resource<blob> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  // CHECK: %3 = torch.tensor.literal(dense<true> : tensor<2xi1>) : !torch.tensor<[2],i1>
  %3 = torch.tensor.literal(dense<true> : tensor<2xi1>) : !torch.tensor<[2],i1>
  // CHECK: %4 = torch.tensor_static_info_cast %0 : !torch.vtensor<[2],f32> to !torch.vtensor<*,f32>
  %4 = torch.tensor_static_info_cast %0 : !torch.vtensor<[2],f32> to !torch.vtensor<*,f32>
  // CHECK: %5 = torch.copy.to_vtensor %arg0 : !torch.vtensor<[2],f32>
  %5 = torch.copy.to_vtensor %t : !torch.vtensor<[2],f32>
  // CHECK: %6 = torch.copy.to_tensor %5 : !torch.tensor<[2],f32>
  %6 = torch.copy.to_tensor %5 : !torch.tensor<[2],f32>
  // CHECK: torch.overwrite.tensor.contents %0 overwrites %6 : !torch.vtensor<[2],f32>, !torch.tensor<[2],f32>
  torch.overwrite.tensor.contents %0 overwrites %6 : !torch.vtensor<[2],f32>, !torch.tensor<[2],f32>
  // CHECK: %int1 = torch.constant.int 1
  // CHECK: %7 = torch.derefine %int1 : !torch.int to !torch.optional<int>
  %int1 = torch.constant.int 1
  %7 = torch.derefine %int1 : !torch.int to !torch.optional<int>
  // CHECK: %float1.000000e-01 = torch.constant.float 1.000000e-01
  // CHECK: %8 = torch.per_tensor_affine.create %1, %float1.000000e-01, %int1 : !torch.vtensor<[],si64>, !torch.float, !torch.int -> !torch.vtensor<[],!torch.qint8>
  %scale = torch.constant.float 0.1
  %8 = torch.per_tensor_affine.create %1, %scale, %int1 : !torch.vtensor<[],si64>, !torch.float, !torch.int -> !torch.vtensor<[],!torch.qint8>
  // CHECK: %9 = torch.linear_params.create %0, %0 : !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>
  // CHECK: %10 = torch.linear_params.create %0 : !torch.vtensor<[2],f32>
  %9 = torch.linear_params.create %0, %0 : !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>
  %10 = torch.linear_params.create %0 : !torch.vtensor<[2],f32>
  // CHECK: %11 = torch.symbolic_int "s0" {min_val = 2, max_val = 1024} : !torch.int
  // CHECK: torch.bind_symbolic_shape %0, [%11], affine_map<()[s0] -> (s0)> : !torch.vtensor<[2],f32>
  %s0 = torch.symbolic_int "s0" {min_val = 2, max_val = 1024} : !torch.int
  torch.bind_symbolic_shape %0, [%s0], affine_map<()[s0] -> (s0)> : !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// CHECK-LABEL: func.func @containers(
func.func @containers(%a: !torch.int, %b: !torch.vtensor<[2],f32>) {
  // CHECK: %0 = torch.prim.ListConstruct %arg0, %arg0 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.prim.ListConstruct %a, %a : (!torch.int, !torch.int) -> !torch.list<int>
  // CHECK: %1 = torch.prim.ListConstruct  : () -> !torch.list<int>
  %1 = torch.prim.ListConstruct : () -> !torch.list<int>
  // CHECK: %2 = torch.prim.ListConstruct %arg1 : (!torch.vtensor<[2],f32>) -> !torch.list<optional<vtensor<[2],f32>>>
  %2 = torch.prim.ListConstruct %b : (!torch.vtensor<[2],f32>) -> !torch.list<optional<vtensor<[2],f32>>>
  // CHECK: %3:2 = torch.prim.ListUnpack %0 : !torch.list<int> -> !torch.int, !torch.int
  %3:2 = torch.prim.ListUnpack %0 : !torch.list<int> -> !torch.int, !torch.int
  // CHECK: %4 = torch.prim.TupleConstruct %arg0, %arg1 : !torch.int, !torch.vtensor<[2],f32> -> !torch.tuple<int, vtensor<[2],f32>>
  %4 = torch.prim.TupleConstruct %a, %b : !torch.int, !torch.vtensor<[2],f32> -> !torch.tuple<int, vtensor<[2],f32>>
  // CHECK: %5:2 = torch.prim.TupleUnpack %4 : !torch.tuple<int, vtensor<[2],f32>> -> !torch.int, !torch.vtensor<[2],f32>
  %5:2 = torch.prim.TupleUnpack %4 : !torch.tuple<int, vtensor<[2],f32>> -> !torch.int, !torch.vtensor<[2],f32>
  // CHECK: %str = torch.constant.str "k"
  // CHECK: %6 = torch.prim.DictConstruct keys(%str : !torch.str) values(%arg0 : !torch.int) -> !torch.dict<str, int>
  // CHECK: %7 = torch.prim.DictConstruct keys() values() -> !torch.dict<str, int>
  %k = torch.constant.str "k"
  %6 = torch.prim.DictConstruct keys(%k : !torch.str) values(%a : !torch.int) -> !torch.dict<str, int>
  %7 = torch.prim.DictConstruct keys() values() -> !torch.dict<str, int>
  // CHECK: torch.prim.Print(%arg0, %str) : !torch.int, !torch.str
  torch.prim.Print(%a, %k) : !torch.int, !torch.str
  // CHECK: %8 = torch.aten.format(%str, %arg0) : !torch.str, !torch.int -> !torch.str
  %8 = torch.aten.format(%k, %a) : !torch.str, !torch.int -> !torch.str
  // CHECK: %9 = torch.prim.tolist(%arg1, %arg0, %arg0) : !torch.vtensor<[2],f32>, !torch.int, !torch.int -> !torch.list<float>
  %9 = torch.prim.tolist(%b, %a, %a) : !torch.vtensor<[2],f32>, !torch.int, !torch.int -> !torch.list<float>
  // An element with more static information than the list's element type.
  // CHECK: torch.prim.ListConstruct %arg1 : (!torch.vtensor<[2],f32>) -> !torch.list<vtensor<[?],f32>>
  %refined = torch.prim.ListConstruct %b : (!torch.vtensor<[2],f32>) -> !torch.list<vtensor<[?],f32>>
  return
}

// CHECK-LABEL: func.func @control_flow(
func.func @control_flow(%c: !torch.bool, %n: !torch.int) -> !torch.int {
  // CHECK:      %0 = torch.prim.If %arg0 -> (!torch.int) {
  // CHECK-NEXT:   torch.prim.If.yield %arg1 : !torch.int
  // CHECK-NEXT: } else {
  // CHECK-NEXT:   torch.prim.If.yield %arg1 : !torch.int
  // CHECK-NEXT: }
  %0 = torch.prim.If %c -> (!torch.int) {
    torch.prim.If.yield %n : !torch.int
  } else {
    torch.prim.If.yield %n : !torch.int
  }
  // CHECK:      torch.prim.If %arg0 -> () {
  // CHECK-NEXT:   torch.prim.If.yield
  // CHECK-NEXT: } else {
  torch.prim.If %c -> () {
    torch.prim.If.yield
  } else {
    torch.prim.If.yield
  }
  // CHECK:      %1:2 = torch.prim.Loop %arg1, %arg0, init(%0, %arg1) {
  // CHECK-NEXT: ^bb0(%arg2: !torch.int, %arg3: !torch.int, %arg4: !torch.int):
  // CHECK-NEXT:   torch.prim.Loop.condition %arg0, iter(%arg3, %arg4 : !torch.int, !torch.int)
  // CHECK-NEXT: } : (!torch.int, !torch.bool, !torch.int, !torch.int) -> (!torch.int, !torch.int)
  %1:2 = torch.prim.Loop %n, %c, init(%0, %n) {
  ^bb0(%i: !torch.int, %x: !torch.int, %y: !torch.int):
    torch.prim.Loop.condition %c, iter(%x, %y : !torch.int, !torch.int)
  } : (!torch.int, !torch.bool, !torch.int, !torch.int) -> (!torch.int, !torch.int)
  // CHECK:      torch.prim.Loop %arg1, %arg0, init() {
  // CHECK-NEXT: ^bb0(%arg2: !torch.int):
  // CHECK-NEXT:   torch.prim.Loop.condition %arg0, iter()
  torch.prim.Loop %n, %c, init() {
  ^bb0(%i: !torch.int):
    torch.prim.Loop.condition %c, iter()
  } : (!torch.int, !torch.bool) -> ()
  // CHECK:      %2 = torch.operator "onnx.If"(%arg0) : (!torch.bool) -> !torch.int {
  // CHECK-NEXT:   torch.operator_terminator %arg1 : !torch.int
  // CHECK-NEXT: }, {
  // CHECK-NEXT:   torch.operator_terminator %0 : !torch.int
  // CHECK-NEXT: }
  %2 = torch.operator "onnx.If"(%c) : (!torch.bool) -> !torch.int {
    torch.operator_terminator %n : !torch.int
  }, {
    torch.operator_terminator %0 : !torch.int
  }
  // CHECK: torch.operator "torch.pippy._pipe_split"() : () -> ()
  torch.operator "torch.pippy._pipe_split"() : () -> ()
  // CHECK: torch.runtime.assert %arg0, "must hold"
  torch.runtime.assert %c, "must hold"
  // CHECK: torch.prim.Store "x", %arg1 : !torch.int
  // CHECK: %3 = torch.prim.Load "x" : !torch.int
  torch.prim.Store "x", %n : !torch.int
  %3 = torch.prim.Load "x" : !torch.int
  return %0 : !torch.int
}

// CHECK-LABEL: func.func @calculate(
func.func @calculate(%t: !torch.vtensor<[2],f32>, %l: !torch.list<int>) -> !torch.vtensor<[2],f32> {
  // CHECK:      %0 = torch.shape.calculate {
  // CHECK-NEXT:   torch.shape.calculate.yield %arg0 : !torch.vtensor<[2],f32>
  // CHECK-NEXT: } shapes {
  // CHECK-NEXT:   torch.shape.calculate.yield.shapes %arg1 : !torch.list<int>
  // CHECK-NEXT: } : !torch.vtensor<[2],f32>
  %0 = torch.shape.calculate {
    torch.shape.calculate.yield %t : !torch.vtensor<[2],f32>
  } shapes {
    torch.shape.calculate.yield.shapes %l : !torch.list<int>
  } : !torch.vtensor<[2],f32>
  // CHECK:      %1 = torch.dtype.calculate {
  // CHECK:      } dtypes {
  // CHECK-NEXT:   torch.dtype.calculate.yield.dtypes %int6 : !torch.int
  %int6 = torch.constant.int 6
  %1 = torch.dtype.calculate {
    torch.dtype.calculate.yield %0 : !torch.vtensor<[2],f32>
  } dtypes {
    torch.dtype.calculate.yield.dtypes %int6 : !torch.int
  } : !torch.vtensor<[2],f32>
  // CHECK: %2 = torch.promote_dtypes %arg1, %arg1 : (!torch.list<int>, !torch.list<int>) -> !torch.int
  %2 = torch.promote_dtypes %l, %l : (!torch.list<int>, !torch.list<int>) -> !torch.int
  return %1 : !torch.vtensor<[2],f32>
}

// -----

// The TorchScript object graph and global slots.
// CHECK-LABEL: torch.class_type @c {
// CHECK-NEXT:    torch.attr "b" : !torch.bool
// CHECK-NEXT:    torch.attr private "t" : !torch.tensor
// CHECK-NEXT:    torch.method "get", @get
// CHECK-NEXT:    torch.method private "helper", @get
// CHECK-NEXT:  }
torch.class_type @c {
  torch.attr "b" : !torch.bool
  torch.attr private "t" : !torch.tensor
  torch.method "get", @get
  torch.method private "helper", @get
}
func.func private @get(%self: !torch.nn.Module<"c">) -> !torch.bool {
  // CHECK: %0 = torch.prim.GetAttr %arg0["b"] : !torch.nn.Module<"c"> -> !torch.bool
  %0 = torch.prim.GetAttr %self["b"] : !torch.nn.Module<"c"> -> !torch.bool
  // CHECK: torch.prim.SetAttr %arg0["b"] = %0 : !torch.nn.Module<"c">, !torch.bool
  torch.prim.SetAttr %self["b"] = %0 : !torch.nn.Module<"c">, !torch.bool
  // CHECK: %1 = torch.prim.CallMethod %arg0["get"] () : !torch.nn.Module<"c">, () -> !torch.bool
  %1 = torch.prim.CallMethod %self["get"] () : !torch.nn.Module<"c">, () -> !torch.bool
  // CHECK: %2 = torch.prim.CreateObject !torch.nn.Module<"c">
  %2 = torch.prim.CreateObject !torch.nn.Module<"c">
  return %0 : !torch.bool
}

// -----

// CHECK:      %true = torch.constant.bool true
// CHECK-NEXT: %0 = torch.nn_module {
// CHECK-NEXT:   torch.slot "b", %true : !torch.bool
// CHECK-NEXT: } : !torch.nn.Module<"c">
%true = torch.constant.bool true
%m = torch.nn_module {
  torch.slot "b", %true : !torch.bool
} : !torch.nn.Module<"c">

// CHECK: torch.global_slot "private" @slot0 : !torch.int
// -----

torch.global_slot "private" @slot0 : !torch.int
// CHECK:      torch.global_slot.module_initializer {
// CHECK-NEXT:   %int3 = torch.constant.int 3
// CHECK-NEXT:   torch.initialize.global_slots [
// CHECK-NEXT:     @slot0(%int3 : !torch.int)
// CHECK-NEXT:   ]
// CHECK-NEXT: }
torch.global_slot.module_initializer {
  %int3 = torch.constant.int 3
  torch.initialize.global_slots [
    @slot0(%int3 : !torch.int)
  ]
}
func.func @slots() {
  // CHECK: %0 = torch.global_slot.get @slot0 : !torch.int
  // CHECK: torch.global_slot.set @slot0 = %0 : !torch.int
  %0 = torch.global_slot.get @slot0 : !torch.int
  torch.global_slot.set @slot0 = %0 : !torch.int
  return
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
