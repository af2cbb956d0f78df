// Loading a .smelt artifact for `smelt run`, `smelt bench` and `smelt dump` (ArtifactFile.h).
#include "tools/smelt/ArtifactFile.h"

#include "tools/smelt/Commands.h"

#include "codegen/CudaSources.h"
#include "runtime/CpuObject.h"

namespace smelt::tools {

std::optional<rt::LoadedArtifact> readArtifactFile(const std::string &path,
                                                   const std::string &entryName,
                                                   const std::string &expectedSha256) {
  rt::Expected<rt::LoadedArtifact> artifact =
      rt::readArtifact(path, {.expectedSha256 = expectedSha256});
  if (!artifact)
    return fail(artifact.message()), std::nullopt;
  const std::string &name = artifact->executable.name;
  if (!entryName.empty() && entryName != name)
    return fail("--entry " + entryName + ": " + path + " holds @" + name +
                " only; `smelt compile --entry` makes others"),
           std::nullopt;
  return std::move(*artifact);
}

std::optional<rt::LoadedArtifact> loadArtifactFile(const std::string &path,
                                                   const std::string &entryName,
                                                   const std::string &expectedSha256) {
  std::optional<rt::LoadedArtifact> artifact = readArtifactFile(path, entryName, expectedSha256);
  if (!artifact)
    return std::nullopt;
  rt::Executable &exe = artifact->executable;
  if (exe.cuda)
    if (rt::Status kept = codegen::keepCudaSource(*exe.cuda); !kept.ok())
      return fail(path + ": " + kept.message()), std::nullopt;
  if (!exe.kernels.empty()) {
    if (artifact->extras.cpuObject.empty())
      return fail(path + ": the artifact has no CPU code (target " + artifact->extras.target +
                  "); compile it with --target=cpu"),
             std::nullopt;
    rt::Expected<std::shared_ptr<const rt::CpuCode>> cpu =
        rt::loadCpuObject(artifact->extras.cpuObject, artifact->extras.cpuSymbols);
    if (!cpu)
      return fail(path + ": " + cpu.message()), std::nullopt;
    exe.cpu = std::move(*cpu);
  }
  exe.placement = "as compiled for " + artifact->extras.target + " by " +
                  artifact->extras.producer;
  return artifact;
}

} // namespace smelt::tools
