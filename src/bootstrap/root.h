// The rendezvous root: a thread that collects every rank's PeerInfo (from connections
// that proved the communicator's key, auth.h), checks the rank and nranks of each, sends
// everyone the table, and then stays to watch: a rank whose connection closes without a
// goodbye is announced to all others, so survivors of a killed peer learn within
// milliseconds which rank died; a rank whose operation stalls, times out or fails gets a
// job-wide hang report (hang_report.h), which collstat can also ask for.
#pragma once

#include "bootstrap/wire.h"
#include "base/status.h"

namespace coll {

// Starts a root listening on *addr (port 0: ephemeral; the bound address is written
// back). The thread runs detached and ends when every rank has left.
Status startRoot(SockAddr* addr, const AuthKey& key);

// Asks the root at `root` for a job-wide hang report (hang_report.h), proving `key`:
// the report's text, or why not (no root there, a wrong key, no answer in time).
Result<std::string> queryHangReport(const SockAddr& root, const AuthKey& key, double timeoutS);

}  // namespace coll
