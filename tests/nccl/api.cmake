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
# `nccl_api_test_ours list` prints the cases; `nccl_api_test_ours procs -n 3 kill_root`
# runs one; -v prints each case's notes (the error texts it got, timings).
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
foreach(v ${NCCL_API_TEST_VARIANTS})
  set(exe nccl_api_test_${v})
  target_link_libraries(${exe} PRIVATE nccl_dropin Threads::Threads)
  target_link_libraries(${exe} PRIVATE coll_warnings)
  add_test(NAME nccl_api_${v}_local COMMAND ${exe} local -n 3)
  add_test(NAME nccl_api_${v}_threads COMMAND ${exe} threads -n 4)
  add_test(NAME nccl_api_${v}_procs_shm COMMAND ${exe} procs -n 3)
  set(modes local threads procs_shm)
  if(v STREQUAL ours)
    add_test(NAME nccl_api_${v}_procs_tcp COMMAND ${exe} procs -n 3)
    add_test(NAME nccl_api_${v}_procs_hosts COMMAND ${exe} procs -n 4)
    list(APPEND modes procs_tcp procs_hosts)
  endif()
  foreach(mode ${modes})
    set_tests_properties(nccl_api_${v}_${mode} PROPERTIES TIMEOUT 300 ENVIRONMENT "${NCCL_API_TEST_ENV}")
  endforeach()
endforeach()
set_tests_properties(nccl_api_ours_procs_tcp PROPERTIES ENVIRONMENT "${NCCL_API_TEST_ENV};COLL_SHM_DISABLE=1")
set_tests_properties(nccl_api_ours_procs_hosts PROPERTIES ENVIRONMENT "${NCCL_API_TEST_ENV};NCCL_API_TEST_HOSTS=2")
