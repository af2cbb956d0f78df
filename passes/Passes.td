// Smelt's passes. Each is defined in passes/<Name>.cpp and tested by tests/passes/<name>.mlir.
#ifndef SMELT_PASSES_TD
#define SMELT_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"smelt-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: a loss function becomes one returning loss and gradients";
  let description = [{
    For the function named by `func` returning a rank-0 float loss (its first result), adds
    `@<func>_grad`: the same arguments, returning the loss followed by its gradient with
    respect to each chosen argument (`wrt`: `params` picks the arguments marked `smelt.param`,
    `all` every float argument; the default takes params when there are any). Gradient
    results are named `grad/<argument name>`. Each op's rule is its DifferentiableOpInterface
    implementation (ir/Vjp.cpp); only ops between the arguments and the loss are
    differentiated.

    ```mlir
    func.func @main(%w: tensor<3xf32>, %x: tensor<3xf32>) -> tensor<f32> {
      %0 = smelt.mul %w, %x : tensor<3xf32>
      %1 = smelt.reduce sum %0 axes = [0] : tensor<3xf32>
      return %1 : tensor<f32>
    }
    // becomes, beside it:
    func.func @main_grad(%w: tensor<3xf32>, %x: tensor<3xf32>)
        -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) {
      ...  // d/dw = x, d/dx = w
    }
    ```
  }];
  let options = [
    Option<"function", "func", "std::string", /*default=*/"\"main\"",
           "The loss function to differentiate">,
    Option<"wrt", "wrt", "std::string", /*default=*/"\"\"",
           "Arguments to differentiate with respect to: params, all (default: params if any "
           "argument is marked smelt.param, else all)">,
  ];
  let statistics = [
    Statistic<"numBackwardOps", "backward-ops", "Ops built for the gradient computation">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

#endif // SMELT_PASSES_TD
