// The weights option is required.
// RUN: not pippy-opt %s --pippy-lift-params 2>&1 | FileCheck %s
// CHECK: error: pippy-lift-params needs the option weights=FILE
func.func @f() {
  return
}
