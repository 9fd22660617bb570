#include "transport_info.h"

#include "comm/comm.h"

namespace perf {

std::string transportSummary(collComm_t comm) {
  if (!comm || comm->hostConns.channels.empty() || !comm->hostConns.channels[0].recv) return "single rank";
  return std::string("ring recv ") + comm->hostConns.channels[0].recv->kind() + " / send " +
         comm->hostConns.channels[0].send->kind() + ", " + std::to_string(comm->hostConns.channels.size()) +
         " channel(s)";
}

}  // namespace perf
