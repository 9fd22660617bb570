// perf_tests' pieces: option parsing, size lists, shapes, bus-bandwidth factors and the
// launcher environment detection.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launch.h"
#include "perf.h"
#include "device_mem.h"

using namespace perf;

namespace {

int parse(Coll c, std::vector<std::string> args, Options* o, bool* stop) {
  *o = Options();
  args.insert(args.begin(), "x_perf");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parseOptions(c, static_cast<int>(argv.size()), argv.data(), o, stop);
}

}  // namespace

TEST_CASE("perf options: nccl-tests letters and defaults", "[perf]") {
  Options o;
  bool stop = false;
  REQUIRE(parse(Coll::kAllReduce, {}, &o, &stop) == 0);
  REQUIRE_FALSE(stop);
  REQUIRE(o.minBytes == 32u << 20);
  REQUIRE(o.iters == 20);
  REQUIRE(o.check == 1);
  REQUIRE(o.types == std::vector<collDataType_t>{collFloat32});
  REQUIRE(o.offset == -1);

  Options p;
  REQUIRE(parse(Coll::kAllReduce,
                {"-b", "8",   "-e", "128M", "-f", "2", "-n", "5", "-w", "2", "-m", "3",        "-c",       "0",
                 "-o", "all", "-d", "all",  "-z", "1", "-a", "3", "-t", "4", "-J", "out.json", "--offset", "56"},
                &p, &stop) == 0);
  REQUIRE(p.minBytes == 8);
  REQUIRE(p.maxBytes == 128u << 20);
  REQUIRE(p.stepFactor == 2);
  REQUIRE(p.iters == 5);
  REQUIRE(p.warmupIters == 2);
  REQUIRE(p.aggIters == 3);
  REQUIRE(p.check == 0);
  REQUIRE(p.ops.size() == 6);  // nccl-tests' all: the five built-in ops, then mulsum
  REQUIRE(p.ops.back() == kMulSum);
  REQUIRE(p.types.size() == 12);
  REQUIRE(p.average == 3);
  REQUIRE(p.nthreads == 4);
  REQUIRE(p.outputFile == "out.json");
  REQUIRE(p.offset == 56);

  Options q;
  REQUIRE(parse(Coll::kBroadcast,
                {"--minbytes", "1K", "--maxbytes", "1K", "--root", "all", "--datatype", "fp8_e5m2", "--op", "max"}, &q,
                &stop) == 0);
  REQUIRE(q.root == -1);
  REQUIRE(q.types == std::vector<collDataType_t>{collFloat8e5m2});
  REQUIRE(q.ops == std::vector<collRedOp_t>{collSum});                      // broadcast has no op
  REQUIRE(parse(Coll::kGather, {"-r", "3", "-o", "max"}, &q, &stop) == 0);  // a root, no op
  REQUIRE(q.root == 3);
  REQUIRE(q.ops == std::vector<collRedOp_t>{collSum});
  REQUIRE(parse(Coll::kScatter, {"-r", "all"}, &q, &stop) == 0);
  REQUIRE(q.root == -1);
}

TEST_CASE("perf options: -o mulsum is nccl-tests' PreMulSum", "[perf]") {
  Options o;
  bool stop = false;
  for (Coll c : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter}) {
    REQUIRE(parse(c, {"-o", "mulsum"}, &o, &stop) == 0);
    REQUIRE(o.ops == std::vector<collRedOp_t>{kMulSum});
    REQUIRE(parse(c, {"--op", "all"}, &o, &stop) == 0);
    REQUIRE(o.ops == std::vector<collRedOp_t>{collSum, collProd, collMax, collMin, collAvg, kMulSum});
  }
  for (Coll c : {Coll::kBroadcast, Coll::kAllGather, Coll::kSendRecv}) {  // no op to scale
    REQUIRE(parse(c, {"-o", "mulsum"}, &o, &stop) == 0);
    REQUIRE(o.ops == std::vector<collRedOp_t>{collSum});
  }
  REQUIRE(parse(Coll::kAllReduce, {"-o", "premulsum"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"-o", "MulSum"}, &o, &stop) == 2);

  collRedOp_t op;
  REQUIRE(parseOp("mulsum", &op));
  REQUIRE(op == kMulSum);
  REQUIRE(std::string(opName(kMulSum)) == "mulsum");  // the table's and the JSON's redop
  REQUIRE(std::string(opName(collAvg)) == "avg");
  REQUIRE(std::string(opName(static_cast<collRedOp_t>(kMulSum + 1))) == "?");
}

TEST_CASE("perf mulsum scalar: nccl-tests' 1 on even ranks, 2 on odd, in the type", "[perf]") {
  auto bytes = [](collDataType_t t, int rank) {
    unsigned char b[8] = {};
    preMulScalar(t, rank, b);
    uint64_t v = 0;
    std::memcpy(&v, b, sizeof(v));
    return v;
  };
  auto f32 = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint64_t>(u);
  };
  auto f64 = [](double f) {
    uint64_t u;
    std::memcpy(&u, &f, 8);
    return u;
  };
  REQUIRE(bytes(collFloat32, 0) == f32(1.0f));
  REQUIRE(bytes(collFloat32, 1) == f32(2.0f));
  REQUIRE(bytes(collFloat32, 6) == f32(1.0f));
  REQUIRE(bytes(collFloat64, 3) == f64(2.0));
  REQUIRE(bytes(collFloat16, 1) == 0x4000);  // 2.0 in IEEE half
  REQUIRE(bytes(collFloat16, 2) == 0x3c00);  // 1.0
  REQUIRE(bytes(collBfloat16, 1) == 0x4000);
  REQUIRE(bytes(collFloat8e4m3, 1) == 0x40);
  REQUIRE(bytes(collFloat8e5m2, 1) == 0x40);
  REQUIRE(bytes(collFloat8e5m2, 0) == 0x3c);
  REQUIRE(bytes(collInt8, 5) == 2);  // one byte written, the rest untouched
  REQUIRE(bytes(collUint64, 4) == 1);
  REQUIRE(bytes(collInt32, 7) == 2);
}

TEST_CASE("perf options: bad values are refused by name", "[perf]") {
  Options o;
  bool stop = false;
  REQUIRE(parse(Coll::kAllReduce, {"-d", "float128"}, &o, &stop) == 2);
  REQUIRE(stop);
  REQUIRE(parse(Coll::kAllReduce, {"-o", "xor"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"-b", "lots"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"-b", "2M", "-e", "1M"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"-g", "2"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"--mem", "gpu"}, &o, &stop) == 2);
  // --mem device needs a usable GPU; auto (the default) picks device only where one is.
  const bool gpu = perf::deviceUsable(nullptr);
  REQUIRE(parse(Coll::kAllReduce, {"--mem", "device"}, &o, &stop) == (gpu ? 0 : 2));
  Options a;
  REQUIRE(parse(Coll::kAllReduce, {}, &a, &stop) == 0);
  REQUIRE(a.mem == (gpu ? "device" : "host"));
  REQUIRE(parse(Coll::kAllReduce, {"-r", "-3"}, &o, &stop) != 0);
  REQUIRE(parse(Coll::kAllReduce, {"-n", "0"}, &o, &stop) != 0);
  REQUIRE(parse(Coll::kAllReduce, {"--bogus"}, &o, &stop) != 0);
  REQUIRE(parse(Coll::kAllReduce, {"--offset", "4096"}, &o, &stop) != 0);
}

TEST_CASE("perf options: --wire times the compressed calls, float buffers only", "[perf]") {
  Options o;
  bool stop = false;
  REQUIRE(parse(Coll::kAllReduce, {}, &o, &stop) == 0);
  REQUIRE(o.wire == kNoWire);
  for (auto [name, t] : std::map<std::string, collDataType_t>{
           {"half", collFloat16}, {"fp16", collFloat16}, {"bfloat16", collBfloat16}, {"bf16", collBfloat16}}) {
    REQUIRE(parse(Coll::kReduceScatter, {"--wire", name}, &o, &stop) == 0);
    REQUIRE(o.wire == t);
  }
  for (Coll c : {Coll::kAllGather, Coll::kBroadcast, Coll::kReduce})
    REQUIRE(parse(c, {"--wire", "half", "-d", "float"}, &o, &stop) == 0);
  // -o all: the four ops compressed collectives take.
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "bf16", "-o", "all"}, &o, &stop) == 0);
  REQUIRE(o.ops == std::vector<collRedOp_t>{collSum, collMax, collMin, collAvg});
  for (Coll c : {Coll::kSendRecv, Coll::kAllToAll, Coll::kGather, Coll::kScatter})
    REQUIRE(parse(c, {"--wire", "half"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "half", "-d", "int32"}, &o, &stop) == 2);
  REQUIRE(stop);
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "half", "-d", "all"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "half", "-d", "bfloat16"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "float"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "fp8_e4m3"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kAllReduce, {"--wire", "half", "-o", "prod"}, &o, &stop) == 2);
  REQUIRE(parse(Coll::kReduce, {"--wire", "half", "-o", "mulsum"}, &o, &stop) == 2);
}

TEST_CASE("perf --wire bound: collectives.h's formula", "[perf]") {
  // fp16: n 2^-11 S_b (1 + n 2^-10) + n 2^-149; bf16: n 2^-8 S (1 + n 2^-7) + n 2^-133.
  REQUIRE(wireBound(collFloat16, 2, 1024.0) == 2 * 0.5 * (1 + 2.0 / 1024) + 2 * 0x1p-149);
  REQUIRE(wireBound(collBfloat16, 4, 256.0) == 4 * 1.0 * (1 + 4.0 / 128) + 4 * 0x1p-133);
  REQUIRE(wireBound(collFloat16, 1, 0.0) == 0x1p-149);  // a copy of zeros: exact but for the floor
}

TEST_CASE("perf sizes, shapes and bus bandwidth follow nccl-tests", "[perf]") {
  Options o;
  o.minBytes = 8;
  o.maxBytes = 64;
  o.stepFactor = 2;
  REQUIRE(sizeList(o) == std::vector<size_t>{8, 16, 32, 64});
  o.stepFactor = 1;
  o.stepBytes = 20;
  REQUIRE(sizeList(o) == std::vector<size_t>{8, 28, 48});

  REQUIRE(busBwFactor(Coll::kAllReduce, 4) == Approx(1.5));
  REQUIRE(busBwFactor(Coll::kAllReduce, 2) == Approx(1.0));
  REQUIRE(busBwFactor(Coll::kAllGather, 4) == Approx(0.75));
  REQUIRE(busBwFactor(Coll::kReduceScatter, 8) == Approx(0.875));
  REQUIRE(busBwFactor(Coll::kAllToAll, 2) == Approx(0.5));
  REQUIRE(busBwFactor(Coll::kGather, 4) == Approx(0.75));  // nccl-tests' gather.cu and scatter.cu
  REQUIRE(busBwFactor(Coll::kScatter, 8) == Approx(0.875));
  REQUIRE(busBwFactor(Coll::kBroadcast, 8) == 1.0);
  REQUIRE(busBwFactor(Coll::kReduce, 8) == 1.0);
  REQUIRE(busBwFactor(Coll::kSendRecv, 8) == 1.0);

  Shape s = shapeFor(Coll::kAllReduce, 1000, 4, 3);
  REQUIRE(s.callCount == 250);
  REQUIRE(s.printBytes == 1000);
  Shape g = shapeFor(Coll::kAllGather, 1000, 4, 3);  // 250 elements total: 83 per rank
  REQUIRE(g.callCount == 83);
  REQUIRE(g.printCount == 249);
  REQUIRE(g.printBytes == 996);
  Shape a = shapeFor(Coll::kAllToAll, 64, 8, 2);
  REQUIRE(a.callCount == 4);
  REQUIRE(a.printBytes == 64);
  // Gather and scatter: size is the whole buffer, nranks blocks of the call's count; the
  // root's side holds all of them (and every rank allocates it, as in nccl-tests).
  for (Coll c : {Coll::kGather, Coll::kScatter}) {
    Shape x = shapeFor(c, 1000, 4, 3);
    REQUIRE(x.callCount == 83);
    REQUIRE(x.printBytes == 996);
    size_t sendBytes, recvBytes;
    bufferBytes(c, x, 4, 3, &sendBytes, &recvBytes);
    REQUIRE(sendBytes == (c == Coll::kGather ? 332u : 996u));
    REQUIRE(recvBytes == (c == Coll::kGather ? 996u : 332u));
  }
}

TEST_CASE("launch environments of collrun, Open MPI, MPICH, Slurm and torchrun", "[perf][launch]") {
  auto with = [](std::map<std::string, std::string> m) {
    return [m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  LaunchInfo L;
  std::string err;
  REQUIRE(detectLaunch(&L, &err, with({})));
  REQUIRE(L.size == 1);
  REQUIRE(L.launcher == "none");

  struct Case {
    std::map<std::string, std::string> env;
    const char* launcher;
    int rank, size, local;
    const char* addr;
  };
  const Case cases[] = {
      {{{"COLL_RANK", "2"}, {"COLL_NRANKS", "4"}, {"COLL_LOCAL_RANK", "0"}, {"COLL_COMM_ID", "h:1"}},
       "collrun",
       2,
       4,
       0,
       "h:1"},
      {{{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"NCCL_COMM_ID", "h:2"}},
       "Open MPI",
       1,
       2,
       1,
       "h:2"},
      {{{"PMI_RANK", "3"}, {"PMI_SIZE", "8"}, {"COLL_COMM_ID", "h:3"}}, "MPICH/Hydra", 3, 8, 3, "h:3"},
      {{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}, {"COLL_COMM_ID", "h:4"}},
       "Slurm",
       5,
       6,
       1,
       "h:4"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}},
       "torchrun",
       0,
       2,
       0,
       "10.0.0.1:29500"},
  };
  for (const Case& c : cases) {
    INFO(c.launcher);
    LaunchInfo x;
    REQUIRE(detectLaunch(&x, &err, with(c.env)));
    REQUIRE(x.launcher == c.launcher);
    REQUIRE(x.rank == c.rank);
    REQUIRE(x.size == c.size);
    REQUIRE(x.localRank == c.local);
    REQUIRE(x.rootAddr == c.addr);
  }
  // A multi-process launch without a rendezvous address is an error, not N rank-0 runs.
  REQUIRE_FALSE(detectLaunch(&L, &err, with({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}})));
  REQUIRE(err.find("COLL_COMM_ID") != std::string::npos);
  REQUIRE_FALSE(detectLaunch(&L, &err, with({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"COLL_COMM_ID", "h:1"}})));
  REQUIRE_FALSE(detectLaunch(&L, &err, with({{"RANK", "x"}, {"WORLD_SIZE", "4"}})));
}
