// A .smelt artifact as the tools take it in place of a .mlir model: read (pinned to a SHA-256
// when asked), its entry checked against --entry, its CPU code checked and loaded.
#pragma once

#include "runtime/Artifact.h"

#include <optional>
#include <string>

namespace smelt::tools {

/// The artifact at `path`, its function checked against `entryName` (empty: any); its code is
/// not loaded. nullopt after printing why not (fail).
std::optional<rt::LoadedArtifact> readArtifactFile(const std::string &path,
                                                   const std::string &entryName,
                                                   const std::string &expectedSha256 = "");

/// readArtifactFile, then `executable.cpu` loaded (when it has kernels) and its placement
/// line saying what it was compiled for; nullopt after printing why not (fail).
std::optional<rt::LoadedArtifact> loadArtifactFile(const std::string &path,
                                                   const std::string &entryName,
                                                   const std::string &expectedSha256 = "");

} // namespace smelt::tools
