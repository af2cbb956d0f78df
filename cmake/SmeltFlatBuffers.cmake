# The AOT artifact's plan schema (runtime/ArtifactPlan.fbs) compiled by flatc into
# <build>/generated/runtime/ArtifactPlan_generated.h, which `target` includes as
# "runtime/ArtifactPlan_generated.h". Used by the runtime and by the standalone fuzz build.
find_program(SMELT_FLATC flatc REQUIRED)
function(smelt_artifact_plan_header target root)
  set(dir ${CMAKE_BINARY_DIR}/generated/runtime)
  set(header ${dir}/ArtifactPlan_generated.h)
  if(NOT TARGET SmeltArtifactPlanHeader)
    add_custom_command(OUTPUT ${header}
      COMMAND ${SMELT_FLATC} --cpp --gen-object-api --scoped-enums -o ${dir}
              ${root}/runtime/ArtifactPlan.fbs
      DEPENDS ${root}/runtime/ArtifactPlan.fbs
      COMMENT "flatc runtime/ArtifactPlan.fbs")
    add_custom_target(SmeltArtifactPlanHeader DEPENDS ${header})
  endif()
  add_dependencies(${target} SmeltArtifactPlanHeader)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/generated>)
endfunction()
