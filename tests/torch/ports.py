"""Ports for the test launchers: free now, and out of the way of the kernel's own picks.

No dependency beyond the standard library: the GPU machine's scripts import it too."""
import random
import socket


def _ephemeral_low():
    """The lowest port the kernel hands out by itself (to a bind to port 0, a connect)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n):
    """n distinct ports that are free now, taken below the kernel's ephemeral range.

    A port the kernel picked for a bind to port 0 and that was then released can go to
    any other socket on the machine before a rank binds it (seen on a loaded machine:
    TCPStore's EADDRINUSE); below that range only a process that names the port can take
    it. Chosen at random, so that launches side by side rarely pick the same."""
    low = _ephemeral_low()
    first = 10000 if low >= 10000 + 100 * n else 1024
    if low - first < 100 * n:  # no room below the range: take them from it
        first, low = low, 65536
    pick, ports = random.Random(), []  # its own generator: a case may seed the global one
    while len(ports) < n:
        port = pick.randrange(first, low)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or closing
        ports.append(port)
    return ports
