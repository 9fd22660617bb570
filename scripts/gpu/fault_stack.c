// Prints a process's native stack to stderr when it dies of a fatal signal, on a machine
// with no gdb: scripts/gpu/check.sh builds it there and preloads it into the torch steps.
// Beside Python's faulthandler (PYTHONFAULTHANDLER=1), which installs its handler later,
// dumps the Python stack, then restores this one and raises the signal again.
//   cc -shared -fPIC -O1 -o fault_stack.so scripts/gpu/fault_stack.c
//   LD_PRELOAD=$PWD/fault_stack.so python3 ...
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fatal_signal(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char* name = strsignal(sig);
  static const char head[] = "native stack at fatal signal: ";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, name, strlen(name));
  (void)!write(2, "\n", 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install_fault_stack(void) {
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; ++i) signal(fatal[i], on_fatal_signal);
}
