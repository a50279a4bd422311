// Outlining fails with one message naming the marker or value at fault.
// RUN: pippy-opt %s -split-input-file -verify-diagnostics --pippy-outline-stages

func.func @empty_first_stage(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  // expected-error @+1 {{'pippy.split_point' op leaves stage 0 empty: no op lies between it and the previous split point or the start of the function}}
  pippy.split_point
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

func.func @empty_last_stage(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  // expected-error @+1 {{'pippy.split_point' op leaves stage 1 empty: no op follows it before the end of the function}}
  pippy.split_point
  return %0 : !torch.vtensor<[2],f32>
}

// -----

func.func @two_markers_in_a_row(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  pippy.split_point
  // expected-error @+1 {{'pippy.split_point' op leaves stage 1 empty}}
  pippy.split_point
  %1 = torch.aten.relu %0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}

// -----

func.func @non_tensor_crossing(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %int0 = torch.constant.int 0
  // expected-error @+1 {{'torch.aten.size.int' op result of type '!torch.int' is made in stage 0 and used in stage 1; only tensors can cross stages}}
  %n = torch.aten.size.int %x, %int0 : !torch.vtensor<[2],f32>, !torch.int -> !torch.int
  pippy.split_point
  %0 = torch.aten.mul.Scalar %x, %n : !torch.vtensor<[2],f32>, !torch.int -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

// A tensor whose shape depends on the data (pippy-import marks it) has only
// the example run's size in its type, so it cannot be sent.
func.func @data_dependent_shape(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[],f32> {
  %int0 = torch.constant.int 0
  %0 = torch.aten.gt.Scalar %x, %int0 : !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],i1>
  // expected-error @+1 {{'torch.aten.masked_select' op result 0 has a shape that depends on the data; it is made in stage 0 and used in stage 1, but only tensors of static shape can cross stages}}
  %1 = torch.aten.masked_select %x, %0 {pippy.data_dependent_shape = array<i64: 0>} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],i1> -> !torch.vtensor<[15],f32>
  pippy.split_point
  %none = torch.constant.none
  %2 = torch.aten.sum %1, %none : !torch.vtensor<[15],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %2 : !torch.vtensor<[],f32>
}
