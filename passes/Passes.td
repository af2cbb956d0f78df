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
    `all` every float argument, `0,2` those argument numbers, as JAX's argnums; the default
    takes params when there are any). The builder's Graph::gradients runs this pass. Gradient
    results are named `grad/<argument name>`. Each op's rule is its DifferentiableOpInterface
    implementation (ir/Vjp.cpp); ops that state Smelt_NoGradient stop the gradient; only ops
    between the arguments and the loss are differentiated.

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
           "Arguments to differentiate with respect to: params, all, or argument numbers "
           "'0,2' (default: params if any argument is marked smelt.param, else all)">,
  ];
  let statistics = [
    Statistic<"numBackwardOps", "backward-ops", "Ops built for the gradient computation">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

def BucketAllReduce : Pass<"smelt-bucket-all-reduce", "mlir::ModuleOp"> {
  let summary = "Combine all_reduces into buckets, each placed where its last operand is ready";
  let description = [{
    A data-parallel step all-reduces every gradient; one collective per tensor pays the
    collective's latency once per tensor. This pass (XLA's all-reduce combiner, PyTorch DDP's
    buckets) combines all_reduces of the same kind, replica count, element type and device
    into buckets of at most `bucket-bytes` (a larger tensor makes a bucket of its own), taken
    in the order their operands become ready: the backward pass produces the last layer's
    gradients first. Each bucket is one multi-operand all_reduce placed right after its last
    operand's producer, so the executor starts it while the rest of the backward pass runs.
    Run it last: fusion may move producers.

    ```mlir
    %g1 = ... // ready first
    %g2 = ...
    %r1 = smelt.all_reduce mean %g1 replicas = 2 : tensor<10xf32>
    %r2 = smelt.all_reduce mean %g2 replicas = 2 : tensor<256x10xf32>
    // becomes, right after %g2's producer
    %r1, %r2 = smelt.all_reduce mean %g1, %g2 replicas = 2 : tensor<10xf32>, tensor<256x10xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"4 << 20",
           "The most bytes one bucket holds (0: every all_reduce alone, only moved early)">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "All-reduces left after combining">,
    Statistic<"numCombined", "combined", "All-reduces folded into another's bucket">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

def Fuse : Pass<"smelt-fuse", "mlir::ModuleOp"> {
  let summary = "Producer-consumer and sibling fusion into smelt.fusion kernels";
  let description = [{
    Groups elementwise, convert, broadcast_in_dim, reshape, transpose, gather, iota and splat
    constant ops into their consumers, and into reduces as the roots of reduction kernels;
    merges sibling kernels that read the same value; outlines each group as a `smelt.fusion`
    that codegen renders as one kernel (CUDA C++ or LLVM). A cost model weighs the bytes a
    fusion saves (the intermediate's write and read, and a kernel launch) against the
    arithmetic it recomputes; vetoes keep a reduce the root of its own kernel and refuse
    fusions that would make a cycle. passes/Fuse.cpp documents the algorithm. Every decision
    is recorded with its reason: `report=FILE` writes them (`-` for stdout).

    First, with `epilogues` (the default), the bias add and the activation after a matmul or
    conv2d fold into the op when the library that runs it applies them before storing its
    result (oneDNN: bias and relu, tanh, logistic, relu6, hardswish or swish, after a conv2d
    too unless `conv-epilogues=false`; cuBLASLt: bias and relu after a matmul);
    passes/Epilogues.h lists the conditions. Run it after smelt-autodiff.

    Codegen compiles only kernels and library calls, so every elementwise, shape and reduce op
    must end up in a fusion: with `one-op-per-kernel` each gets a kernel of its own, which is
    what the pipeline runs when fusion is off.

    ```mlir
    %0 = smelt.matmul %x, %w : tensor<256x784xf32>, tensor<784x512xf32>
    %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<512xf32> -> tensor<256x512xf32>
    %2 = smelt.add %0, %1 : tensor<256x512xf32>
    %3 = smelt.relu %2 : tensor<256x512xf32>
    %4 = smelt.exp %3 : tensor<256x512xf32>
    // becomes (epilogues=false leaves the matmul alone and fuses add, relu and exp)
    %0 = smelt.matmul %x, %w bias %b activation relu
        : tensor<256x784xf32>, tensor<784x512xf32>, tensor<512xf32>
    %1 = smelt.fusion loop (%0) : (tensor<256x512xf32>) -> tensor<256x512xf32> {
    ^bb0(%m: tensor<256x512xf32>):
      %e = smelt.exp %m : tensor<256x512xf32>
      smelt.yield %e : tensor<256x512xf32>
    }
    ```
  }];
  let options = [
    Option<"reportPath", "report", "std::string", /*default=*/"\"\"",
           "Write every fusion decision and its reason to this file (- for stdout)">,
    Option<"oneOpPerKernel", "one-op-per-kernel", "bool", /*default=*/"false",
           "Fuse nothing: every elementwise, shape, reduce and iota op becomes a kernel of its "
           "own (what the pipeline does without fusion, as XLA runs each op as a kernel)">,
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "Fold the bias add and activation after a matmul or conv2d into the library call "
           "(oneDNN post-ops, cuBLASLt epilogues); not with one-op-per-kernel">,
    Option<"convEpilogues", "conv-epilogues", "bool", /*default=*/"true",
           "Fold into conv2d on the CPU too (oneDNN's convolution applies them as it stores its "
           "result); false leaves them to the fused kernel after it">,
  ];
  let statistics = [
    Statistic<"numFusions", "fusions", "Fusion kernels formed">,
    Statistic<"numDuplicated", "duplicated", "Producers copied into a consumer's kernel">,
    Statistic<"numRejected", "rejected", "Fusible producers left out, with a reason">,
    Statistic<"numSiblingsMerged", "siblings-merged", "Sibling kernels merged into one">,
    Statistic<"numEpilogues", "epilogues", "Matmuls and conv2ds given a bias or activation">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

def DonateInPlace : Pass<"smelt-donate-in-place", "mlir::func::FuncOp"> {
  let summary = "Write the new value of a donated argument into its buffer (input/output aliasing)";
  let description = [{
    A train step donates its parameters and optimizer state (argument attribute
    `smelt.donated`: the caller gives the buffer to the run, as JAX's donate_argnums) and
    returns their new values. In a function on one GPU without copies, this pass lets the
    result that replaces a donated argument be written into the argument's buffer when the
    argument's last reader is a loop fusion that reads it only elementwise (each element read
    by the thread that writes the same element of the result, before it writes it), the result
    has the argument's type and is returned, and the argument is not. The result returned
    under the argument's own smelt.name is preferred, so that the state keeps its block from
    step to step. The choice is `smelt.in_place` on the fusion, one entry per result: the input
    it overwrites, or -1. Run it after fusion and the scheduling passes, before
    smelt-assign-buffers, which then gives such a result no bytes of its own.

    ```mlir
    %new = smelt.fusion loop (%w, %g) {smelt.device = "gpu:0"} ... // w - 0.1 * g
    return %new   // %w is {smelt.donated}: %new gets smelt.in_place = array<i64: 0>
    ```
  }];
}

def GpuConvLayouts : Pass<"smelt-gpu-conv-layouts", "mlir::ModuleOp"> {
  let summary = "Give the convolutions on a GPU cuDNN's filter layout and symmetric padding";
  let description = [{
    cuDNN's legacy convolution calls read the filter as KRSC ([F, KH, KW, C/G]) and pad both
    sides of a dimension alike. For every conv2d, conv2d_backward_input and
    conv2d_backward_filter placed on a GPU (run after smelt-place-devices, before smelt-fuse),
    this pass makes both explicit ops, so the runtime copies nothing: the filter is transposed
    to OHWI before the convolutions that read it, the filter gradient is written as OHWI and
    transposed back (`filter_layout = ohwi` on the ops), and where top != bottom or left !=
    right the convolution pads the smaller amount itself and reads an input zero-padded by the
    rest (smelt.pad), its input gradient then sliced out of the padded one (smelt.slice). A
    constant filter's transpose folds; the others fuse. CPU convolutions are left alone.

    ```mlir
    %y = smelt.conv2d %x, %w strides = [2, 2] padding = [0, 1, 0, 1] dilation = [1, 1]
        {smelt.device = "gpu:0"} : tensor<8x28x28x1xf32>, tensor<3x3x1x32xf32>
    // becomes
    %p = smelt.pad %x low = [0, 0, 0, 0] high = [0, 1, 1, 0] value = 0.0 ...
    %k = smelt.transpose %w, permutation = [3, 0, 1, 2] ...   // tensor<32x3x3x1xf32>
    %y = smelt.conv2d %p, %k strides = [2, 2] padding = [0, 0, 0, 0] dilation = [1, 1]
        filter_layout = ohwi ...
    ```
  }];
  let statistics = [
    Statistic<"numRewritten", "rewritten", "Convolutions given the OHWI filter layout">,
  ];
}

def GroupHostSteps : Pass<"smelt-group-host-steps", "mlir::func::FuncOp"> {
  let summary = "Order a function on a GPU and the CPU so the host's steps cut it into few segments";
  let description = [{
    The compiler's schedule cuts a function into a segment wherever the device changes, and
    each host segment between GPU work makes the host wait for the GPU. In a function with GPU
    steps, this pass hoists the host steps that need nothing a device computes (random numbers
    from an argument's offset, say) to the top, where they form one host segment before the
    device's work, and sinks every other host step (and the copy of its result back onto the
    device) to just before its first user, past the device work that does not need it, so
    that work joins one segment. All_reduces keep their places (smelt-bucket-all-reduce's),
    and functions without GPU steps are left as they are. Run it after fusion and bucketing,
    before smelt-assign-buffers, which works out liveness in the final order.

    ```mlir
    %0 = smelt.exp %x {smelt.device = "gpu:0"}
    %1 = smelt.copy %0 {smelt.device = "cpu:0"}
    %2 = smelt.rng_normal ... offset %1 {smelt.device = "cpu:0"}
    %3 = smelt.copy %2 {smelt.device = "gpu:0"}
    %4 = smelt.tanh %0 {smelt.device = "gpu:0"}   // does not need %2
    %5 = smelt.mul %3, %4 {smelt.device = "gpu:0"}
    // becomes exp, tanh, copy, rng_normal, copy, mul: gpu:0, cpu:0, gpu:0 with tanh in the
    // first GPU segment
    ```
  }];
  let statistics = [
    Statistic<"numHoisted", "hoisted", "Host steps moved above the device's work">,
    Statistic<"numSunk", "sunk", "Host steps and their copies moved down to their first user">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

def MixedPrecision : Pass<"smelt-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Compute matmuls, convolutions and what follows them in bf16 or f16";
  let description = [{
    Keras' mixed_bfloat16 / mixed_float16 policies as a rewrite (passes/MixedPrecision.cpp): the
    allow list (matmul, conv2d and its gradients) computes in the low type; the infer list
    (elementwise arithmetic, compare, select, shape ops, pooling) follows an operand already
    in it when its other operands are cheap to cast; the deny list (exp, log, pow, sqrt,
    rsqrt, erf, sin, cos, reductions, argmax, random numbers) stays f32; each op states its
    list in ir/SmeltOps.td (Smelt_Precision). Every value keeps its type:
    a rewritten op's result is converted back to f32 for its users, and cast pairs between
    low ops fold. Arguments (f32 master weights) and results stay f32. Run it before
    smelt-autodiff so gradients reach the weights in f32.

    ```mlir
    %0 = smelt.matmul %x, %w : tensor<256x784xf32>, tensor<784x512xf32>
    %1 = smelt.relu %0 : tensor<256x512xf32>
    // becomes (policy=mixed_bf16)
    %xl = smelt.convert %x : tensor<256x784xf32> -> tensor<256x784xbf16>
    %wl = smelt.convert %w : tensor<784x512xf32> -> tensor<784x512xbf16>
    %0 = smelt.matmul %xl, %wl : tensor<256x784xbf16>, tensor<784x512xbf16>
    %1 = smelt.relu %0 : tensor<256x512xbf16>
    %2 = smelt.convert %1 : tensor<256x512xbf16> -> tensor<256x512xf32>
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"mixed_bf16\"",
           "f32, mixed_bf16 or mixed_f16">,
    Option<"functionName", "func", "std::string", /*default=*/"\"\"",
           "Only this function (default: every function)">,
    Option<"keepReplaced", "keep-replaced", "bool", /*default=*/"false",
           "Leave the replaced f32 ops in place, unused, for a builder that still holds their "
           "values (canonicalize removes them)">,
  ];
  let statistics = [
    Statistic<"numLowPrecisionOps", "low-precision-ops", "Ops computing in bf16/f16">,
    Statistic<"numCasts", "casts", "Converts left after folding cast pairs">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

def PlaceDevices : Pass<"smelt-place-devices", "mlir::ModuleOp"> {
  let summary = "Give every op a device, with soft fallback to the CPU and copies between";
  let description = [{
    Sets `smelt.device` on every op: the device its builder scope asked for, else the default
    (gpu:0 when `devices` lists one, else cpu:0). An op whose device does not exist, or that
    the GPU has no kernel for (in its dtype), falls back to cpu:0 and the reason is recorded;
    with `strict` that is an error naming the op. Arguments and results live on cpu:0, and a
    `smelt.copy` is inserted wherever a value crosses devices. The function gets
    `smelt.placement`, a one-line summary the tools print; `log-device-placement` prints every
    op's device (TensorFlow's tf.debugging.set_log_device_placement).

    ```mlir
    %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1]
        : tensor<1x4x4x1xf64>, tensor<3x3x1x1xf64>
    // with devices=cpu:0,gpu:0 gets {smelt.device = "cpu:0"}, and the function
    // smelt.placement = "... 1 op on cpu:0 (conv2d: no GPU kernel for 'conv2d' in f64)"
    ```
  }];
  let options = [
    Option<"devices", "devices", "std::string", /*default=*/"\"cpu:0\"",
           "The devices that exist, comma-separated (cpu:0 always does)">,
    Option<"defaultDevice", "default-device", "std::string", /*default=*/"\"\"",
           "Where ops without a scope go (default: gpu:0 when it exists, else cpu:0)">,
    Option<"noGpuReason", "no-gpu-reason", "std::string", /*default=*/"\"\"",
           "Why there is no GPU, for the summary (from device discovery)">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "An op that cannot run where it asked is an error, not a fallback">,
    Option<"logDevicePlacement", "log-device-placement", "bool", /*default=*/"false",
           "Print every op's device to stderr">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

def AssignBuffers : Pass<"smelt-assign-buffers", "mlir::func::FuncOp"> {
  let summary = "Buffer liveness and arena offsets at compile time: the peak bytes each device holds in one run";
  let description = [{
    Works out, before anything runs, when each value is taken and given back (the executors'
    model: a step takes its results when it runs, a value goes back after its last reader,
    returned values and all_reduce buffers stay to the end, constants are held all run, and a
    GPU holds the arguments it reads), gives every value a step takes an offset into one arena
    per device (values live at the same time never overlap; the largest placed first, at the
    lowest free 64-byte aligned offset), and from that the peak bytes per device: held bytes
    plus the arena. Writes the offsets on each step as `smelt.arena_offsets` and the peaks on
    the function as `smelt.peak_bytes`; `smelt compile` prints them, the dump's manifest
    carries them, and the executors, which take one arena block per run, measure exactly
    them. A function on several devices gets one arena per segment of the executor's schedule
    (the steps cut where one that is not a copy runs on another device), a value the segment
    hands on living to its end; its peak is held bytes plus the most bytes live at once. Run it
    last.

    ```mlir
    func.func @main(%x: tensor<256xf32>) -> tensor<f32> {
      %0 = smelt.exp %x : tensor<256xf32>                 // 1 KiB at offset 0
      %1 = smelt.reduce sum %0 axes = [0] : tensor<256xf32>  // 4 B at 1024: %0 is still live
      return %1 : tensor<f32>
    }
    // gets {smelt.peak_bytes = {"cpu:0" = 1028 : i64}}, and the steps
    // {smelt.arena_offsets = array<i64: 0>} and {smelt.arena_offsets = array<i64: 1024>}
    ```
  }];
  let statistics = [
    Statistic<"numPeakBytes", "peak-bytes", "Peak bytes, summed over devices">,
  ];
  let dependentDialects = ["smelt::SmeltDialect"];
}

#endif // SMELT_PASSES_TD
