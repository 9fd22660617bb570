// Parameters, interface-name matching and address parsing.
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "bootstrap/socket.h"
#include "base/param.h"
#include "harness.h"

using namespace coll;
using testing::ScopedEnv;

TEST_CASE("sizes parse with binary suffixes", "[params]") {
  int64_t v = 0;
  REQUIRE(parseSize("123", &v));
  REQUIRE(v == 123);
  REQUIRE(parseSize("4K", &v));
  REQUIRE(v == 4096);
  REQUIRE(parseSize("16M", &v));
  REQUIRE(v == 16 << 20);
  REQUIRE(parseSize("1g", &v));
  REQUIRE(v == 1LL << 30);
  REQUIRE_FALSE(parseSize("", &v));
  REQUIRE_FALSE(parseSize("abc", &v));
  REQUIRE_FALSE(parseSize("4KB", &v));
  // Bounded: no overflow when scaled, none in the suffix multiplication.
  REQUIRE(parseSize("1024G", &v));
  REQUIRE(v == int64_t{1} << 40);
  REQUIRE(parseSize("-1024G", &v));
  REQUIRE_FALSE(parseSize("1025G", &v));
  REQUIRE_FALSE(parseSize("9223372036854775807G", &v));
  REQUIRE_FALSE(parseSize("-9223372036854775807", &v));
  REQUIRE_FALSE(parseSize("99999999999999999999", &v));
}

TEST_CASE("an integer parameter beyond its bound falls back to the default", "[params]") {
  ScopedEnv big("COLL_BOOTSTRAP_TIMEOUT_S", "9223372036854775807");
  REQUIRE(param(IntParam::BOOTSTRAP_TIMEOUT_S) == 60);
}

TEST_CASE("COLL_ wins over NCCL_, defaults apply, garbage falls back", "[params]") {
  unsetenv("COLL_BUFFSIZE");
  unsetenv("NCCL_BUFFSIZE");
  REQUIRE(param(IntParam::BUFFSIZE) == 1048576);
  setenv("NCCL_BUFFSIZE", "2M", 1);
  REQUIRE(param(IntParam::BUFFSIZE) == 2 << 20);
  setenv("COLL_BUFFSIZE", "8192", 1);
  REQUIRE(param(IntParam::BUFFSIZE) == 8192);
  setenv("COLL_BUFFSIZE", "lots", 1);
  REQUIRE(param(IntParam::BUFFSIZE) == 1048576);
  unsetenv("COLL_BUFFSIZE");
  unsetenv("NCCL_BUFFSIZE");
}

TEST_CASE("every parameter is declared with a doc", "[params]") {
  for (const auto& p : allParams()) {
    INFO(p.name);
    REQUIRE(p.doc[0] != '\0');
  }
}

// The accessors find a parameter's entry by the enum's value, so an enum generated out of
// step with the table would read another parameter's environment variable and default.
TEST_CASE("each typed enum value names its own entry of the table", "[params]") {
  size_t declared = 0;
#define COLL_PARAM(Type, NAME, def, unit, doc)            \
  {                                                       \
    const ParamInfo& info = paramInfo(Type##Param::NAME); \
    INFO(#NAME);                                          \
    CHECK(std::string(info.name) == #NAME);               \
    CHECK(info.type == ParamType::k##Type);               \
    CHECK(std::string(info.defaultValue) == def);         \
    ++declared;                                           \
  }
#include "base/params.def"
  REQUIRE(declared == allParams().size());
}

// An Int default that does not parse would read as 0 without a word.
TEST_CASE("every integer parameter's default parses", "[params]") {
  for (const auto& p : allParams()) {
    if (p.type != ParamType::kInt) continue;
    INFO(p.name << " default \"" << p.defaultValue << "\"");
    int64_t v = -1;
    REQUIRE(parseSize(p.defaultValue, &v));
  }
}

TEST_CASE("NCCL_SOCKET_IFNAME syntax", "[params][net]") {
  REQUIRE(ifNameMatches("", "eth0"));
  REQUIRE(ifNameMatches("eth", "eth0"));
  REQUIRE(ifNameMatches("eth,ib", "ib1"));
  REQUIRE_FALSE(ifNameMatches("eth,ib", "lo"));
  REQUIRE(ifNameMatches("=eth0", "eth0"));
  REQUIRE_FALSE(ifNameMatches("=eth0", "eth00"));
  REQUIRE_FALSE(ifNameMatches("^docker,lo", "docker0"));
  REQUIRE_FALSE(ifNameMatches("^docker,lo", "lo"));
  REQUIRE(ifNameMatches("^docker,lo", "eth0"));
  REQUIRE(ifNameMatches("^=docker", "docker0"));
  REQUIRE_FALSE(ifNameMatches("^=docker0", "docker0"));
}

TEST_CASE("interface selection honours COLL_SOCKET_IFNAME", "[params][net]") {
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  auto ifs = findInterfaces();
  REQUIRE_FALSE(ifs.empty());
  for (auto& i : ifs) REQUIRE(i.name == "lo");
  REQUIRE(ifs[0].addr.family() == AF_INET);  // IPv4 first
  setenv("COLL_SOCKET_IFNAME", "=nosuchif", 1);
  REQUIRE(findInterfaces().empty());
  unsetenv("COLL_SOCKET_IFNAME");
}

TEST_CASE("addresses parse for IPv4, IPv6 and names", "[params][net]") {
  auto a = parseSockAddr("127.0.0.1:1234");
  REQUIRE(a.ok());
  REQUIRE(a.value().port() == 1234);
  REQUIRE(a.value().str() == "127.0.0.1:1234");
  auto b = parseSockAddr("[::1]:80");
  REQUIRE(b.ok());
  REQUIRE(b.value().family() == AF_INET6);
  REQUIRE(b.value().str() == "[::1]:80");
  REQUIRE(parseSockAddr("localhost:5").ok());
  REQUIRE_FALSE(parseSockAddr("127.0.0.1").ok());
  REQUIRE_FALSE(parseSockAddr("127.0.0.1:99999").ok());
  REQUIRE(parseSockAddr("1.2.3.4:x").status().message().find("port") != std::string::npos);
}
