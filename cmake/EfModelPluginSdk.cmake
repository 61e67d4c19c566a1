# SPDX-License-Identifier: MIT
# The model plugin SDK of the installed package (include/ensemblefit/model/model_plugin.hpp):
# the kernels/ headers a plugin compiles (the model concept, duals, ef_math, the per-replica LM
# paths and the plugin entry), an INTERFACE target ensemblefit::model_sdk that carries their
# include folders and the flags the built-in models are compiled with, and
# ensemblefit_add_model() (cmake/ensemblefitModelPlugin.cmake). Only these headers are
# installed: nothing of src/ and no backend source.
set(EF_PLUGIN_SDK_HEADERS
    kernels/core/complex.hpp kernels/core/dual.hpp kernels/core/ef_math.hpp kernels/core/hd.hpp
    kernels/cpu/replica_paths.hpp kernels/cuda/replica_kernels.cuh
    kernels/fit/dense.hpp kernels/fit/fit_inputs.hpp kernels/fit/fit_plan.hpp kernels/fit/lanes.hpp
    kernels/fit/lm.hpp kernels/fit/lm_normal.hpp kernels/fit/plan_dispatch.hpp kernels/fit/resample.hpp
    kernels/fit/whiten.hpp
    kernels/models/builtin_models.hpp kernels/models/dis_mellin.hpp kernels/models/formula_model.hpp
    kernels/models/mellin_math.hpp kernels/models/model_variant.hpp kernels/models/plugin_model.hpp
    kernels/plugin/model_plugin_entry.hpp kernels/plugin/model_plugin_gpu.cuh)
foreach(h ${EF_PLUGIN_SDK_HEADERS})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ensemblefit/${dir})
endforeach()

# The ABI version a plugin records, read from the header so that the two never disagree.
file(STRINGS include/ensemblefit/model/model_plugin.hpp EF_ABI_LINE
     REGEX "^#define EF_MODEL_PLUGIN_ABI_VERSION [0-9]+")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" EF_MODEL_PLUGIN_ABI_VERSION "${EF_ABI_LINE}")

add_library(ef_model_sdk INTERFACE)
add_library(ensemblefit::model_sdk ALIAS ef_model_sdk)
set_target_properties(ef_model_sdk PROPERTIES EXPORT_NAME model_sdk)
target_include_directories(ef_model_sdk INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/ensemblefit>)
# Random123 (resample.hpp): a system folder is left to the compiler (an -I/usr/include would
# break libstdc++'s #include_next).
if(NOT RANDOM123_INCLUDE_DIR IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  target_include_directories(ef_model_sdk INTERFACE ${RANDOM123_INCLUDE_DIR})
endif()
target_compile_features(ef_model_sdk INTERFACE cxx_std_20)
# The same rounding as the built-ins: no contraction of a*b+c into an FMA (see CMakeLists.txt).
target_compile_options(ef_model_sdk INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
target_link_libraries(ef_model_sdk INTERFACE OpenMP::OpenMP_CXX)
install(TARGETS ef_model_sdk EXPORT ensemblefitTargets)

configure_file(cmake/ensemblefitModelPlugin.cmake ${PROJECT_BINARY_DIR}/ensemblefitModelPlugin.cmake @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ensemblefitModelPlugin.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ensemblefit)
