# Fails when a file of a lower layer includes a header of a higher one (docs/ARCHITECTURE.md).
#
#   cmake -DSOURCE_DIR=<tree> -P check_layers.cmake
#
# The compiler already refuses an upward include of an internal header (a layer's include
# path holds only its own folder and those below it); the public headers in include/epochrun/
# are visible to every layer, so each is given its layer here, and a new public header must be
# added to this table before anything builds.

cmake_minimum_required(VERSION 3.22)

# What each layer may include, itself included. The checkpoint layer is itself a stack of
# sub-layers, one folder of src/checkpoint/ each (docs/ARCHITECTURE.md, "The checkpoint layer"),
# held to the same rule: directory/ and the node-local level's redundancy/ and level/ are
# siblings above local/, as h5/ and parallel/ are above platform/.
set(checkpoint_below base platform parallel h5 format)
set(allowed_base base)
set(allowed_platform base platform)
set(allowed_parallel base platform parallel)
set(allowed_h5 base platform h5)
set(allowed_format base platform h5 format)
set(allowed_checkpoint/options ${checkpoint_below} checkpoint/options)
set(allowed_checkpoint/shared_file ${allowed_checkpoint/options} checkpoint/shared_file)
set(allowed_checkpoint/load ${allowed_checkpoint/shared_file} checkpoint/load)
set(allowed_checkpoint/local ${allowed_checkpoint/load} checkpoint/local)
set(allowed_checkpoint/redundancy ${allowed_checkpoint/local} checkpoint/redundancy)
set(allowed_checkpoint/level ${allowed_checkpoint/redundancy} checkpoint/level)
set(allowed_checkpoint/directory ${allowed_checkpoint/local} checkpoint/directory)
set(checkpoint_layers checkpoint/options checkpoint/shared_file checkpoint/load checkpoint/local
  checkpoint/redundancy checkpoint/level checkpoint/directory checkpoint/saver)
set(allowed_checkpoint/saver ${checkpoint_below} ${checkpoint_layers})
set(allowed_job base platform parallel job)
set(allowed_run ${checkpoint_below} ${checkpoint_layers} job run)
set(allowed_cli ${allowed_run} cli)

# The layer of each public header (the checkpoint layer's are the API of its lowest sub-layer:
# they include nothing of the library's).
set(public_base blob.hpp dtype.hpp errors.hpp export.hpp global_array.hpp logging.hpp names.hpp
  workspace.hpp)
set(public_parallel communicator.hpp mpi_session.hpp)
set(public_format blob_file.hpp checkpoint_format.hpp)
set(public_checkpoint/options array_io.hpp checkpoint_directory.hpp checkpoint_file.hpp
  checkpoint_policy.hpp retention.hpp uploader.hpp)
set(public_job blob_handle.hpp epoch_limiter.hpp job.hpp job_library.hpp job_options.hpp
  job_registry.hpp task.hpp)
set(public_run checkpoint_manager.hpp job_runner.hpp run_history.hpp run_summary.hpp
  stop_decision.hpp)
set(public_cli epochrun.hpp run_main.hpp)
set(layers base platform parallel h5 format ${checkpoint_layers} job run cli)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<tree> -P check_layers.cmake")
endif()

# layer_of_header(<include text> <var>): the layer owning `#include "<text>"`, or empty.
function(layer_of_header text var)
  set(${var} "" PARENT_SCOPE)
  if(text MATCHES "^epochrun/(.+)$")
    foreach(layer IN LISTS layers)
      set(name "${CMAKE_MATCH_1}")
      if(name IN_LIST public_${layer})
        set(${var} ${layer} PARENT_SCOPE)
        return()
      endif()
    endforeach()
    set(${var} "unassigned" PARENT_SCOPE)
    return()
  endif()
  foreach(layer IN LISTS layers)
    if(EXISTS "${SOURCE_DIR}/src/${layer}/${text}")
      set(${var} ${layer} PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

set(violations "")
# check_file(<file> <its layer>)
macro(check_file file layer)
  file(STRINGS "${file}" includes REGEX "^#include \"[^\"]+\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*$" "\\1" header "${line}")
    layer_of_header("${header}" owner)
    file(RELATIVE_PATH shown "${SOURCE_DIR}" "${file}")
    if(owner STREQUAL "unassigned")
      list(APPEND violations "${shown} includes ${header}, a public header with no layer in cmake/check_layers.cmake")
    elseif(owner AND NOT owner IN_LIST allowed_${layer})
      list(APPEND violations "${shown} (${layer}) includes ${header} (${owner})")
    endif()
  endforeach()
endmacro()

foreach(layer IN LISTS layers)
  file(GLOB_RECURSE files "${SOURCE_DIR}/src/${layer}/*.cpp" "${SOURCE_DIR}/src/${layer}/*.hpp")
  foreach(file IN LISTS files)
    check_file("${file}" ${layer})
  endforeach()
  foreach(header IN LISTS public_${layer})
    if(EXISTS "${SOURCE_DIR}/include/epochrun/${header}")
      check_file("${SOURCE_DIR}/include/epochrun/${header}" ${layer})
    endif()
  endforeach()
endforeach()
file(GLOB public_headers RELATIVE "${SOURCE_DIR}/include/epochrun" "${SOURCE_DIR}/include/epochrun/*.hpp")
foreach(header IN LISTS public_headers)
  layer_of_header("epochrun/${header}" owner)
  if(owner STREQUAL "unassigned")
    list(APPEND violations "include/epochrun/${header} has no layer in cmake/check_layers.cmake")
  endif()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "upward includes, against docs/ARCHITECTURE.md:\n  ${text}")
endif()
