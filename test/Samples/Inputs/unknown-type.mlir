func.func @f() {
  %0 = torch.aten.foo : !torch.intt
  return
}
