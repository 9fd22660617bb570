// The plugin net backend: a NetBackend over an external library implementing NCCL's net
// plugin interface (net_plugin_abi.h, versions 8 to 11), such as aws-ofi-nccl (EFA) or
// nccl-rdma-sharp-plugins.
//
// Loading follows NCCL: COLL_NET_PLUGIN / NCCL_NET_PLUGIN names a library, tried as
// given (a path, or a name the dynamic loader searches for), then, for a bare name `foo`,
// as libnccl-net-foo.so; unset, libnccl-net.so is tried quietly; `none` disables plugins.
// The newest symbol among ncclNetPlugin_v11 ... _v8 is used; the library stays loaded
// for the life of the process (connections may close from static destructors).
//
// Connection set-up is non-blocking in the interface: connect() and accept() hand out
// our comm at once, pending until the plugin's connect/accept gives its own, and every
// later isend/irecv retries it, returning a null request ("not posted yet") until it
// succeeds. The ConnectJob can therefore connect all sends before accepting any receive,
// with one thread driving several ranks.
//
// Memory: a plugin needs a registration (mhandle) on the same comm for every buffer it
// sends or receives. regMr(comm, data, size) registers a range (deferred while the comm
// is pending), isend/irecv look up the registration covering the buffer, and closing the
// comm deregisters them. Sends therefore never come straight from the caller's memory
// (sendsOnlyWhenTested is false).
//
// Threads: the backend's calls follow NetBackend's rule (one thread at a time per comm);
// loading is serialised by netPluginFor().
#pragma once

#include <memory>
#include <string>

#include "transport/net/net.h"

namespace coll {

// Loads the library `spec` names (see above) and initialises the plugin. Errors name
// the library tried, the loader's message, or the symbols looked for and found.
Result<std::unique_ptr<NetBackend>> loadNetPlugin(const std::string& spec);

// The plugin COLL_NET_PLUGIN names (the default libnccl-net.so when unset), loaded once per
// value of the variable; nullptr when none loads. A named plugin that fails to load is
// reported once, as a WARN naming the variable, the library and why.
NetBackend* netPlugin();

// The ABI version a backend from loadNetPlugin() speaks (8 to 11).
int netPluginVersion(const NetBackend* b);

}  // namespace coll
