// collstat: asks a running job for its job-wide hang report: for every rank, the
// operation it is in (or the last it completed), what it waits for, whether it is gone,
// and the cause the root finds (a rank that never called, one that called another
// collective, a dead one). The job goes on undisturbed.
//
//   collstat [ADDRESS] [--timeout S]
//
// ADDRESS is the job's bootstrap root, host:port: by default COLL_COMM_ID (or
// NCCL_COMM_ID), as the job's ranks had it. The connection proves the job's key, taken
// as the ranks take it: COLL_AUTH_KEY or COLL_AUTH_KEY_FILE, else (an unauthenticated
// job) derived from ADDRESS, which must then be spelled as in the ranks' COLL_COMM_ID.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "base/param.h"
#include "bootstrap/auth.h"
#include "bootstrap/root.h"

using namespace coll;

int main(int argc, char** argv) {
  CLI::App app{"collstat: the job-wide hang report of a running Collectives job"};
  std::string address;
  double timeoutS = 10;
  app.add_option("address", address, "the job's bootstrap root, host:port (default: COLL_COMM_ID)");
  app.add_option("--timeout", timeoutS, "seconds to wait for the report")->check(CLI::Range(0.1, 3600.0));
  CLI11_PARSE(app, argc, argv);
  if (address.empty()) address = param(StringParam::COMM_ID);
  if (address.empty()) {
    std::fprintf(stderr, "collstat: no address given and COLL_COMM_ID is not set\n");
    return 2;
  }
  auto root = parseSockAddr(address);
  if (!root.ok()) {
    std::fprintf(stderr, "collstat: address \"%s\": %s\n", address.c_str(), root.status().message().c_str());
    return 2;
  }
  auto key = commIdKey(address);
  if (!key.ok()) {
    std::fprintf(stderr, "collstat: %s\n", key.status().message().c_str());
    return 2;
  }
  auto report = queryHangReport(root.value(), key.value(), timeoutS);
  if (!report.ok()) {
    std::fprintf(stderr, "collstat: the root at %s: %s\n", address.c_str(), report.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", report.value().c_str());
  return 0;
}
