#!/usr/bin/env bash
# libnccl.so.2 is one self-contained file: what swapping it in for NVIDIA's (PyTorch's
# site-packages/nvidia/nccl/lib/libnccl.so.2) relies on.
# Usage: alone_test.sh LIBNCCL API_TEST
#   - its NEEDED entries are system libraries only (no libcollectives, no libhwloc), and
#     it leaves no hwloc name for the loader to bind (hwloc is dlopened);
#   - copied alone into an empty folder, API_TEST (tests/nccl/api_test.cc) runs a few
#     cases on it with only that folder on LD_LIBRARY_PATH and hwloc made unloadable
#     (COLL_HWLOC_LIB names a missing file), as on a machine without libhwloc: the loader
#     takes our copy, the probe runs (NCCL_TOPO_DUMP_FILE) without hwloc, says so once per
#     process at INFO, and writes a topology with its CPUs.
set -uo pipefail
LIB=${1:?usage: alone_test.sh LIBNCCL API_TEST}
PROG=${2:?usage: alone_test.sh LIBNCCL API_TEST}
fail=0
say() { echo "FAIL: $*"; fail=1; }

needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $(echo $needed)"
# The sanitizers' runtimes too, in scripts/sanitize.sh's builds.
other=$(grep -Ev '^(libc|libstdc\+\+|libgcc_s|libm|libdl|librt|libpthread|ld-linux-x86-64|ld-linux-aarch64|libasan|libubsan|libtsan)\.so' <<<"$needed")
[ -n "$other" ] && say "$LIB needs libraries other than the system's: $(echo $other)"
hw=$(nm -D --undefined-only "$LIB" | grep -i hwloc)
[ -n "$hw" ] && say "$LIB leaves hwloc names to the loader: $(echo $hw)"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$LIB" "$dir/libnccl.so.2"
export LD_LIBRARY_PATH=$dir COLL_HWLOC_LIB=$dir/libhwloc.so.15 NCCL_TOPO_DUMP_FILE=$dir/topo.xml
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH NCCL_SOCKET_IFNAME=lo
loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$PROG" | grep -E 'libnccl|libcollectives|libhwloc')
echo "loads: $(echo $loaded)"
grep -q "libnccl.so.2 => $dir/libnccl.so.2" <<<"$loaded" || say "the program does not take $dir/libnccl.so.2"
grep -qE 'libcollectives|libhwloc' <<<"$loaded" && say "the program loads libcollectives or libhwloc"

if ! out=$(NCCL_API_TEST_MODE=threads NCCL_API_TEST_NRANKS=2 "$PROG" --warn NoTests comm_basics,group 2>&1); then
  echo "$out" | tail -20
  say "NCCL_API_TEST_MODE=threads NCCL_API_TEST_NRANKS=2 $PROG comm_basics,group"
fi
echo "$out" | grep -v ' INFO ' | tail -3
# Each case is a process of its own, probing once per rank and communicator: each says it
# once ("host:pid:tid" begins a log line).
told=$(grep 'topology probe: no hwloc' <<<"$out" | cut -d: -f2 | sort | uniq -c | awk '{print $1}' | sort -u | tr '\n' ' ')
[ "$told" = "1 " ] || say "each process should say once that it probes without hwloc; counts per process: '$told'"
[ "$(grep 'topology probe: no hwloc' <<<"$out" | cut -d: -f2 | sort -u | wc -l)" -eq 2 ] ||
  say "not every case's process said it probes without hwloc"
grep -q '<cpu ' "$dir/topo.xml" 2>/dev/null || say "no <cpu> in the topology the probe wrote without hwloc"
[ $fail -eq 0 ] && echo "PASS"
exit $fail
