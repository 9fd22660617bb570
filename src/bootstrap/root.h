// The rendezvous root: a thread that collects every rank's PeerInfo (from connections
// that proved the communicator's key, auth.h), checks the rank and nranks of each, sends everyone the table, and then stays to watch: a rank
// whose connection closes without a goodbye is announced to all others, so survivors of
// a killed peer learn within milliseconds which rank died.
#pragma once

#include "bootstrap/wire.h"
#include "base/status.h"

namespace coll {

// Starts a root listening on *addr (port 0: ephemeral; the bound address is written
// back). The thread runs detached and ends when every rank has left.
Status startRoot(SockAddr* addr, const AuthKey& key);

}  // namespace coll
