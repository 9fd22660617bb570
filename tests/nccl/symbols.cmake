# The drop-in's ABI against NVIDIA's nccl.h of the release it implements
# (NCCL_NVIDIA_HEADER: .venv/nccl-reference, which scripts/deps.sh installs from
# python/nccl_reference.txt; both tests are skipped, exit 77, where it is absent):
#   nccl_symbols  every function the header declares (ncclX and pncclX) is a defined
#                 dynamic symbol of libnccl.so.2, its SONAME is libnccl.so.2, libnccl.so
#                 exists, and our header declares the same functions with compatible
#                 prototypes (symbols_test.sh);
#   nccl_layout   layout.c, compiled as C against each header, prints struct sizes and
#                 offsets, initializer values, enum values and NCCL_* macros: the two
#                 outputs must be identical.
set(NCCL_NVIDIA_HEADER ${CMAKE_SOURCE_DIR}/.venv/nccl-reference/nvidia/nccl/include/nccl.h CACHE FILEPATH
    "NVIDIA's nccl.h of the NCCL release the drop-in implements (its tests compare against it)")

add_test(NAME nccl_symbols
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/symbols_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(nccl_symbols PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                     ENVIRONMENT "NCCL_NVIDIA_HEADER=${NCCL_NVIDIA_HEADER}")

# Ours compiles as C without CUDA, so it is always built (and -pedantic-errors keeps it C99).
add_executable(nccl_layout_ours ${CMAKE_CURRENT_SOURCE_DIR}/layout.c)
target_include_directories(nccl_layout_ours PRIVATE ${CMAKE_SOURCE_DIR}/include/collectives/nccl)
target_link_libraries(nccl_layout_ours PRIVATE coll_warnings)
target_compile_options(nccl_layout_ours PRIVATE -pedantic-errors)
if(EXISTS ${NCCL_NVIDIA_HEADER})
  add_executable(nccl_layout_nvidia ${CMAKE_CURRENT_SOURCE_DIR}/layout.c)
  get_filename_component(NCCL_NVIDIA_INCLUDE ${NCCL_NVIDIA_HEADER} DIRECTORY)
  # NVIDIA's header includes cuda_runtime.h: CUDA's include folder, not its libraries.
  target_include_directories(nccl_layout_nvidia PRIVATE ${NCCL_NVIDIA_INCLUDE} /usr/local/cuda/include)
  add_test(NAME nccl_layout COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/layout_test.sh $<TARGET_FILE:nccl_layout_nvidia>
                                      $<TARGET_FILE:nccl_layout_ours>)
  set_tests_properties(nccl_layout PROPERTIES TIMEOUT 60)
else()
  add_test(NAME nccl_layout COMMAND bash ${CMAKE_SOURCE_DIR}/tests/skip_test.sh "${NCCL_NVIDIA_HEADER} not found")
  set_tests_properties(nccl_layout PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
endif()
