// NCCL env plugins: a library exporting `ncclEnvPlugin_v2` or `ncclEnvPlugin_v1` (a name,
// init, finalize and getEnv) through which every parameter is read (param.h), so a site
// can set NCCL_* and COLL_* values from its own source. NCCL_ENV_PLUGIN (or
// COLL_ENV_PLUGIN), read from the process environment itself, names the library
// (plugin_lib.h); unset, libnccl-env.so is tried. One plugin per process, loaded at the
// first parameter read and finalized at exit; from then on lookups read the process
// environment again. A library that is missing or unusable leaves the process
// environment in charge, with a warning where it was named. Layouts: NCCL's
// src/include/plugin/env/env_v*.h.
#pragma once

namespace coll {

// The NCCL release whose interfaces this library implements, as told to plugins (the
// drop-in checks it against nccl.h).
constexpr int kNcclMajor = 2, kNcclMinor = 32, kNcclPatch = 3;

// The value of the variable `name` (e.g. "NCCL_ALGO"), or null when unset: through the
// env plugin when one is loaded, else the process environment. The pointer stays valid
// for the life of the process.
const char* envValue(const char* name);

// The loaded env plugin's name and ABI version, or null / 0.
const char* envPluginName();
int envPluginVersion();

}  // namespace coll
