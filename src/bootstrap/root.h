// The rendezvous root: a thread that collects every rank's PeerInfo (from connections
// that proved the communicator's key, auth.h), checks the rank and nranks of each, sends
// everyone the table, and then stays to watch: a rank whose connection closes without a
// goodbye is announced to all others, so survivors of a killed peer learn within
// milliseconds which rank died; a rank whose operation stalls, times out or fails gets a
// job-wide hang report (hang_report.h), which collstat can also ask for.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "base/status.h"

namespace coll {

// Starts a root listening on *addr (port 0: ephemeral; the bound address is written
// back). The thread runs detached and ends when every rank has left.
Status startRoot(SockAddr* addr, const AuthKey& key);

// Asks the root at `root` for a job-wide hang report (hang_report.h), proving `key`:
// the report's text, or why not (no root there, a wrong key, no answer in time).
Result<std::string> queryHangReport(const SockAddr& root, const AuthKey& key, double timeoutS);

// The order in which the root tells the ranks that joined why the init failed: ranks of
// other processes first, then those of the process hosting the root (pid `selfPid` on
// host `selfHostId`). A rank of that process that hears first may end the process, and
// the root with it, before the others have heard; they would see only a closed
// connection, with no word of which rank was missing.
std::vector<int> failureReplyOrder(const std::vector<PeerInfo>& infos, int32_t selfPid, const std::string& selfHostId);

}  // namespace coll
