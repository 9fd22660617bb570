# api_test.cc, written only against nccl.h, built against each header and linked only
# with the drop-in (libnccl.so.2, which holds the whole library):
#   nccl_api_test_ours    Collectives' include/collectives/nccl/nccl.h (no CUDA needed)
#   nccl_api_test_nvidia  NVIDIA's nccl.h (NCCL_NVIDIA_HEADER, symbols.cmake), where it exists
# Each runs as CTest tests nccl_api_<variant>_<mode>:
#   local          process-level calls, InitAll, one-thread groups of ranks (3 ranks)
#   threads        4 ranks as threads of one process
#   procs_shm      3 ranks as forked processes over shared memory
#   procs_tcp      3 processes over TCP (COLL_SHM_DISABLE=1)
#   procs_hosts    4 processes on 2 simulated hosts (COLL_HOSTID per process): shm and TCP
# NVIDIA's header decides only what the calls compile to, not which transport carries
# them: its variant runs local, threads and procs_shm (procs_tcp and procs_hosts are the
# same library code the ours variant runs; ~27 s of CI).
# A Catch2 program: `nccl_api_test_ours --list-tests` prints the cases with the modes they
# run in (tags); `nccl_api_test_ours kill_root` runs one in its first mode, and
# NCCL_API_TEST_MODE / NCCL_API_TEST_NRANKS pick another (api_test.cc's header lists the
# variables; NCCL_API_TEST_NOTES=1 prints each case's notes).
set(NCCL_API_TEST_VARIANTS ours)
add_executable(nccl_api_test_ours ${CMAKE_CURRENT_SOURCE_DIR}/api_test.cc)
target_include_directories(nccl_api_test_ours PRIVATE ${CMAKE_SOURCE_DIR}/include/collectives/nccl)
if(EXISTS ${NCCL_NVIDIA_HEADER})
  add_executable(nccl_api_test_nvidia ${CMAKE_CURRENT_SOURCE_DIR}/api_test.cc)
  # NVIDIA's header includes cuda_runtime.h: CUDA's include folder, not its libraries.
  target_include_directories(nccl_api_test_nvidia PRIVATE ${NCCL_NVIDIA_INCLUDE} /usr/local/cuda/include)
  list(APPEND NCCL_API_TEST_VARIANTS nvidia)
  # The device API's host calls, against NVIDIA's nccl_device/host.h (C++).
  add_executable(nccl_device_api_test ${CMAKE_CURRENT_SOURCE_DIR}/device_api_test.cc)
  target_include_directories(nccl_device_api_test PRIVATE ${NCCL_NVIDIA_INCLUDE} /usr/local/cuda/include)
  target_link_libraries(nccl_device_api_test PRIVATE nccl_dropin)
  add_test(NAME nccl_device_api COMMAND nccl_device_api_test)
  set_tests_properties(nccl_device_api PROPERTIES TIMEOUT 60 ENVIRONMENT "NCCL_SOCKET_IFNAME=lo")
endif()

# Rendezvous on loopback; dead peers and missing ranks are reported within seconds.
set(NCCL_API_TEST_ENV "NCCL_SOCKET_IFNAME=lo;COLL_BOOTSTRAP_TIMEOUT_S=10")
# nccl_api_test(NAME program mode ranks [more environment...]): the cases of one mode.
function(nccl_api_test name exe mode nranks)
  add_test(NAME ${name} COMMAND ${exe} --warn NoTests [${mode}])
  math(EXPR timeout "300 * ${COLL_TEST_TIMEOUT_SCALE}")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} LABELS catch2 ENVIRONMENT
                       "${NCCL_API_TEST_ENV};NCCL_API_TEST_MODE=${mode};NCCL_API_TEST_NRANKS=${nranks};${ARGN}")
endfunction()
foreach(v ${NCCL_API_TEST_VARIANTS})
  set(exe nccl_api_test_${v})
  target_link_libraries(${exe} PRIVATE nccl_dropin Threads::Threads Catch2::Catch2)
  target_link_libraries(${exe} PRIVATE coll_warnings)
  nccl_api_test(nccl_api_${v}_local ${exe} local 3)
  nccl_api_test(nccl_api_${v}_threads ${exe} threads 4)
  nccl_api_test(nccl_api_${v}_procs_shm ${exe} procs 3)
  if(v STREQUAL ours)
    nccl_api_test(nccl_api_${v}_procs_tcp ${exe} procs 3 COLL_SHM_DISABLE=1)
    nccl_api_test(nccl_api_${v}_procs_hosts ${exe} procs 4 NCCL_API_TEST_HOSTS=2)
  endif()
endforeach()
