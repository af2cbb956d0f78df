// Tensors whose bytes live beside the model (TensorProto.data_location EXTERNAL): what
// torch.onnx.export writes by default and the only form of a model over protobuf's 2 GB.
// Each tensor names a file relative to the model's folder, and optionally an offset, a length
// and the file's SHA-1 (ONNX's onnx.proto, "external_data"). Files are memory-mapped once;
// large weights stay views into the mapping, which their constants keep alive.
#pragma once

#include "frontend/onnx/NodeImporter.h"

#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <memory>
#include <string>

namespace smelt::onnx {

class ExternalData {
public:
  /// For the model at `modelPath`: locations are relative to its folder.
  explicit ExternalData(const std::string &modelPath);

  /// The bytes of external tensor `proto` (`what` names it in errors), a view into its
  /// mapped file. Fails on a location that is absolute, goes up a folder or resolves outside
  /// the model's folder; a file that is missing, not a regular file, shorter than the range,
  /// or whose SHA-1 is not the stated checksum; a range that overlaps another tensor's; a
  /// length other than the tensor's shape needs.
  WeightBytes read(const ::onnx::TensorProto &proto, const TensorLayout &layout,
                   const std::string &what);
  /// `proto` as a Weight whose bytes stay in the mapped file (copied only when misaligned
  /// for the element type).
  Weight weight(const ::onnx::TensorProto &proto, const std::string &what);
  /// Moves an external tensor's bytes into its raw_data, for tensors read as values.
  void inlineInto(::onnx::TensorProto &proto, const std::string &what);

private:
  struct File {
    std::shared_ptr<llvm::MemoryBuffer> buffer;
    std::string location;
    /// The ranges read so far: begin -> (end, the tensor's name).
    std::map<uint64_t, std::pair<uint64_t, std::string>> ranges;
    bool checksumVerified = false;
  };
  File &open(const std::string &location, const std::string &what);
  void claimRange(File &file, uint64_t begin, uint64_t end, const std::string &what);

  std::string folder_;                // the model's folder, as given
  std::string realFolder_;            // the same with symbolic links resolved
  std::map<std::string, File> files_; // by resolved path
};

} // namespace smelt::onnx
