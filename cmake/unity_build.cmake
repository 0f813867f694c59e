# Adjustments of the unity build (IOTWIN_UNITY_BUILD), included after the targets exist.

# The Python module compiles the library sources once more (python/CMakeLists.txt), also in
# batches.
set(unity_python_dir)
if(TARGET iotwin_python_objects)
  set_target_properties(iotwin_python_objects PROPERTIES UNITY_BUILD ON
    UNITY_BUILD_BATCH_SIZE ${IOTWIN_UNITY_BATCH_SIZE})
  set(unity_python_dir ${PROJECT_SOURCE_DIR}/python)
endif()

# Sources compiled on their own: each defines a name in an anonymous namespace or at file scope
# that another source of its target defines differently.
function(iotwin_unity_exclude dir)
  list(TRANSFORM ARGN PREPEND ${PROJECT_SOURCE_DIR}/${dir}/ OUTPUT_VARIABLE sources)
  set_source_files_properties(${sources} DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}
    ${unity_python_dir} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

iotwin_unity_exclude(src/capture recorder.cc)
iotwin_unity_exclude(src/analysis compare_block.cc compare_query.cc compare_timing.cc
  report_text.cc)
iotwin_unity_exclude(src/interop fio_export.cc)

# A batch #includes the .cc files, so GCC takes them for headers and warns (-Wsubobject-linkage)
# where a class of the file has a member whose type is in the file's anonymous namespace; that
# cannot clash in one translation unit. Clang has no such warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL GNU)
  foreach(lib iotwin_base iotwin_format iotwin_capture iotwin_model iotwin_replay iotwin_analysis
              iotwin_interop iotwin_correlate iotwin_cli_objects iotwin_workload_lib
              iotwin_python_objects)
    if(TARGET ${lib})
      target_compile_options(${lib} PRIVATE -Wno-subobject-linkage)
    endif()
  endforeach()
endif()
