"""A TCP port for a process the test starts later, on 127.0.0.1 (deploy tests).

A port the kernel hands out for bind(0) comes from the ephemeral range, which every outgoing
connection on the machine also draws from: between the test closing its probe socket and the
service binding the port, another test's Redis client can take it, and the service then exits
with "Address already in use" (deploy_prometheus failed so once in CI, with the other tests
running beside it). A port below the ephemeral range is never given to an outgoing connection,
so only another test picking ports this way can collide, and the random choice makes that
rare; the port is still checked free before it is returned."""
import random
import socket


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def unused_port(host="127.0.0.1"):
    low = min(ephemeral_low(), 32768)
    for _ in range(200):
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range after 200 tries")


if __name__ == "__main__":
    import sys
    print(unused_port(*sys.argv[1:2]))
