// The model the AOT tests compile with `smelt compile`: a matmul that takes the bias and relu
// as its epilogue (smelt-fuse folds them), then a row sum (a fusion) and an argmax.
func.func @main(%x: tensor<16x32xf32> {smelt.name = "x"}, %w: tensor<32x8xf32> {smelt.name = "w"},
                %b: tensor<8xf32> {smelt.name = "b"})
    -> (tensor<16x8xf32> {smelt.name = "y"}, tensor<16xf32> {smelt.name = "rowsum"}, tensor<16xi64>) {
  %0 = smelt.matmul %x, %w : tensor<16x32xf32>, tensor<32x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<16x8xf32>
  %2 = smelt.add %0, %1 : tensor<16x8xf32>
  %3 = smelt.relu %2 : tensor<16x8xf32>
  %4 = smelt.reduce sum %3 axes = [1] : tensor<16x8xf32>
  %5 = smelt.argmax %3 axis = 1 : tensor<16x8xf32>
  return %3, %4, %5 : tensor<16x8xf32>, tensor<16xf32>, tensor<16xi64>
}
