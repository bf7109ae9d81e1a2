#!/usr/bin/env python3
"""Tiny traffic probes run inside virtual-cluster nodes (stdlib sockets only).

    netprobe.py udp-recv ADDR PORT SECONDS      prints 'ready', then 'got SIZE' per datagram until SECONDS of quiet
    netprobe.py udp-send ADDR PORT SIZE...      don't-fragment datagrams of SIZE bytes (IP+UDP headers included)
    netprobe.py tcp-recv ADDR PORT              prints 'ready', then 'BYTES SECONDS' of one connection
    netprobe.py tcp-send ADDR PORT SECONDS      sends as fast as it can for SECONDS
"""
import socket
import sys
import time

IP_UDP_HEADERS = 28
# linux/in.h: IP_MTU_DISCOVER, IP_PMTUDISC_DO (set DF, never fragment locally)
IP_MTU_DISCOVER = getattr(socket, "IP_MTU_DISCOVER", 10)
IP_PMTUDISC_DO = getattr(socket, "IP_PMTUDISC_DO", 2)


def udp_recv(address, port, quiet_s):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((address, port))
        sock.settimeout(quiet_s)
        print("ready", flush=True)
        try:
            while True:
                data = sock.recv(65535)
                print(f"got {len(data) + IP_UDP_HEADERS}", flush=True)
        except socket.timeout:
            pass


def udp_send(address, port, sizes):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        for size in sizes:
            try:
                sock.sendto(b"x" * (size - IP_UDP_HEADERS), (address, port))
                print(f"sent {size}", flush=True)
            except OSError as error:
                print(f"refused {size}: {error.strerror}", flush=True)
            time.sleep(0.05)


def tcp_recv(address, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((address, port))
        server.listen(1)
        server.settimeout(20)
        print("ready", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(20)
            total = 0
            start = None
            while True:
                data = conn.recv(1 << 20)
                if not data:
                    break
                if start is None:
                    start = time.monotonic()
                total += len(data)
            print(f"{total} {time.monotonic() - (start or time.monotonic()):.6f}", flush=True)


def tcp_send(address, port, seconds):
    chunk = b"x" * (1 << 16)
    with socket.create_connection((address, port), timeout=20) as sock:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sock.sendall(chunk)


def main(argv):
    mode, address, port = argv[0], argv[1], int(argv[2])
    if mode == "udp-recv":
        udp_recv(address, port, float(argv[3]))
    elif mode == "udp-send":
        udp_send(address, port, [int(size) for size in argv[3:]])
    elif mode == "tcp-recv":
        tcp_recv(address, port)
    elif mode == "tcp-send":
        tcp_send(address, port, float(argv[3]))
    else:
        sys.exit(f"netprobe: unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
