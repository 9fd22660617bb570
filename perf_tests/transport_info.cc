#include "transport_info.h"

#include "core/comm.h"

namespace perf {

std::string transportSummary(collComm_t comm) {
  if (!comm || comm->channels.empty() || !comm->channels[0].recv) return "single rank";
  return std::string("ring recv ") + comm->channels[0].recv->kind() + " / send " +
         comm->channels[0].send->kind() + ", " + std::to_string(comm->channels.size()) + " channel(s)";
}

}  // namespace perf
