// Malformed torch types and ops give one diagnostic each, at the offending
// location.
// RUN: pippy-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{invalid dtype 'i32' for a torch tensor}}
func.func @signless_dtype(%arg0: !torch.vtensor<[2],i32>)

// -----

// expected-error @+1 {{invalid size -2 for a torch tensor}}
func.func @negative_size(%arg0: !torch.vtensor<[-2],f32>)

// -----

// expected-error @+1 {{expected a size or `?`}}
func.func @bad_size(%arg0: !torch.vtensor<[x],f32>)

// -----

// expected-error @+1 {{expected ','}}
func.func @missing_dtype(%arg0: !torch.vtensor<[2]>)

// -----

// expected-error @+1 {{invalid sparsity encoding 1 : i64; expected a #sparse_tensor.encoding}}
func.func @bad_sparsity(%arg0: !torch.vtensor<[2],f32,1>)

// -----

// expected-error @+1 {{unknown type `intt` in dialect `torch`}}
func.func @unknown_type(%arg0: !torch.intt)

// -----

// expected-error @+1 {{unknown type `integer` in dialect `torch`}}
func.func @unknown_nested_type(%arg0: !torch.list<integer>)

// -----

// expected-error @+1 {{expected '>'}}
func.func @unclosed_list(%arg0: !torch.list<int, int>)

// -----

// expected-error @+1 {{expected string}}
func.func @module_needs_class_name(%arg0: !torch.nn.Module<Foo>)

// -----

func.func @unknown_constant() {
  // expected-error @+1 {{custom op 'torch.constant.intt' is unknown}}
  %0 = torch.constant.intt 1
  return
}

// -----

func.func @not_an_operator_name() {
  // expected-error @+1 {{custom op 'torch.mm' is unknown}}
  %0 = torch.mm : !torch.int
  return
}

// -----

func.func @too_few_operand_types(%a: !torch.int, %b: !torch.int) {
  // expected-error @+1 {{expected 2 operand types but got 1}}
  %0 = torch.aten.add.int %a, %b : !torch.int -> !torch.int
  return
}

// -----

func.func @operand_type_mismatch(%a: !torch.int) {
  // expected-note @-1 {{prior use here}}
  // expected-error @+1 {{use of value '%a' expects different type than prior uses: '!torch.float' vs '!torch.int'}}
  %0 = torch.aten.neg.float %a : !torch.float -> !torch.float
  return
}

// -----

func.func @missing_result_types(%a: !torch.int) {
  // expected-error @+1 {{op binds 1 results but lists 0 result types}}
  %0 = torch.aten.neg.int %a : !torch.int
  return
}

// -----

func.func @literal_shape(%a: !torch.int) {
  // expected-error @+1 {{'torch.vtensor.literal' op value has shape [2] but the result type is '!torch.vtensor<[3],f32>'}}
  %0 = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[3],f32>
  return
}

// -----

func.func @literal_dtype() {
  // expected-error @+1 {{'torch.vtensor.literal' op value has element type 'f32' but the result dtype is 'f64'}}
  %0 = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[2],f64>
  return
}

// -----

func.func @list_element(%a: !torch.float) {
  // expected-error @+1 {{'torch.prim.ListConstruct' op element #0 has type '!torch.float' but the list holds '!torch.int'}}
  %0 = torch.prim.ListConstruct %a : (!torch.float) -> !torch.list<int>
  return
}

// -----

func.func @tuple_arity(%a: !torch.int) {
  // expected-error @+1 {{'torch.prim.TupleConstruct' op has 1 elements but the tuple type has 2}}
  %0 = torch.prim.TupleConstruct %a : !torch.int -> !torch.tuple<int, int>
  return
}

// -----

func.func @if_yield(%c: !torch.bool, %a: !torch.int) {
  %0 = torch.prim.If %c -> (!torch.int) {
    torch.prim.If.yield %a : !torch.int
  } else {
    // expected-error @+1 {{'torch.prim.If.yield' op yields types () but the torch.prim.If results are ('!torch.int')}}
    torch.prim.If.yield
  }
  return
}

// -----

func.func @loop_arguments(%n: !torch.int, %c: !torch.bool) {
  // expected-error @+1 {{'torch.prim.Loop' op body has 1 arguments; expected 2 (the iteration number and each loop-carried value)}}
  %0 = torch.prim.Loop %n, %c, init(%n) {
  ^bb0(%i: !torch.int):
    torch.prim.Loop.condition %c, iter(%i : !torch.int)
  } : (!torch.int, !torch.bool, !torch.int) -> !torch.int
  return
}

// -----

func.func @cast_value_semantics(%t: !torch.vtensor<[2],f32>) {
  // expected-error @+1 {{'torch.tensor_static_info_cast' op cannot change value semantics: '!torch.vtensor<[2],f32>' to '!torch.tensor<[2],f32>'}}
  %0 = torch.tensor_static_info_cast %t : !torch.vtensor<[2],f32> to !torch.tensor<[2],f32>
  return
}

// -----

func.func @bind_symbols(%t: !torch.vtensor<[?],f32>) {
  %s = torch.symbolic_int "s0" {min_val = 1, max_val = 8} : !torch.int
  // expected-error @+1 {{'torch.bind_symbolic_shape' op has 1 shape symbols but its map has 2 symbols}}
  torch.bind_symbolic_shape %t, [%s], affine_map<()[s0, s1] -> (s0)> : !torch.vtensor<[?],f32>
  return
}

// -----

func.func @unbound_results(%a: !torch.int) {
  // expected-error @+1 {{op binds 0 results but lists 1 result types}}
  torch.aten.neg.int %a : !torch.int -> !torch.int
  return
}

// -----

func.func @wrong_bool(%a: !torch.int) {
  // expected-error @+1 {{expected attribute value}}
  %0 = torch.constant.bool maybe
  return
}
