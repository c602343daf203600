"""What several test modules share and pytest does not inject: the checkout's root and free TCP ports.
Fixtures stay in tests/conftest.py; builders used by one package's tests stay in that package's test module."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_ports(n: int = 1) -> list[int]:
    """n distinct TCP ports the OS has free now (bound together to port 0, then released), so
    tests that start servers (accelerate's rendezvous, slurmctld) never collide with another run."""
    import socket

    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
