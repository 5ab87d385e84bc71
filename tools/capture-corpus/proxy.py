#!/usr/bin/env python3
"""Recording TCP proxy for the Kafka protocol (stdlib only).

    proxy.py LISTEN_PORT UPSTREAM_PORT OUT_DIR [--client NAME] [--host 127.0.0.1]

Listens on 127.0.0.1:LISTEN_PORT, forwards every connection to
127.0.0.1:UPSTREAM_PORT, and writes every complete frame (the 4-byte size
prefix stripped) to OUT_DIR as NNNN-<Api>-v<version>-request.bin /
-response.bin, plus OUT_DIR/manifest.json. Responses are paired with their
request by correlation id (per connection). Run the broker with
advertised.listeners pointing at LISTEN_PORT so clients stay on the proxy.

Stops cleanly on SIGTERM/SIGINT (manifest.json is rewritten after every
frame, so a kill loses nothing either).
"""

import argparse
import json
import os
import signal
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kafka_wire  # noqa: E402

MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class Recorder:
    def __init__(self, out_dir, client):
        self.out_dir = out_dir
        self.client = client
        self.lock = threading.Lock()
        self.seq = 0
        self.entries = []
        os.makedirs(out_dir, exist_ok=True)

    def record(self, frame, direction, api_key, api_version, correlation_id, conn_id, client_id=None, pair=None):
        with self.lock:
            self.seq += 1
            name = f"{self.seq:04d}-{kafka_wire.api_name(api_key)}-v{api_version}-{direction}.bin"
            with open(os.path.join(self.out_dir, name), "wb") as f:
                f.write(frame)
            entry = {
                "file": name,
                "direction": direction,
                "api_key": api_key,
                "api_name": kafka_wire.api_name(api_key),
                "api_version": api_version,
                "correlation_id": correlation_id,
                "client": self.client,
                "connection": conn_id,
                "size": len(frame),
            }
            if client_id is not None:
                entry["client_id"] = client_id
            if pair is not None:
                entry["request_file"] = pair
            self.entries.append(entry)
            self._write_manifest()
            return name

    def _write_manifest(self):
        tmp = os.path.join(self.out_dir, "manifest.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"client": self.client, "frames": self.entries}, f, indent=1)
        os.replace(tmp, os.path.join(self.out_dir, "manifest.json"))


def read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None if not buf else bytes(buf)  # partial at EOF
        buf += chunk
    return bytes(buf)


def read_frame(sock):
    """Returns (raw bytes including the size prefix, frame) or (tail, None) at EOF."""
    head = read_exact(sock, 4)
    if head is None or len(head) < 4:
        return head, None
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > MAX_FRAME_BYTES:
        raise ValueError(f"bad frame size {size}")
    body = read_exact(sock, size)
    if body is None or len(body) < size:
        return head + (body or b""), None
    return head + body, body


class Connection:
    def __init__(self, recorder, client_sock, upstream, conn_id):
        self.recorder = recorder
        self.client = client_sock
        self.upstream = upstream
        self.conn_id = conn_id
        self.pending = {}  # correlation id -> (api_key, api_version, request file)
        self.lock = threading.Lock()
        self.open_directions = 2

    def direction_done(self):
        with self.lock:
            self.open_directions -= 1
            last = self.open_directions == 0
        if last:
            self.client.close()
            self.upstream.close()

    def requests(self):
        try:
            while True:
                raw, frame = read_frame(self.client)
                if frame is None:
                    if raw:
                        self.upstream.sendall(raw)
                    break
                try:
                    api_key, api_version, corr, client_id, _ = kafka_wire.parse_request_header(frame)
                except ValueError as e:
                    print(f"proxy: conn {self.conn_id}: unparsable request header: {e}", file=sys.stderr)
                    api_key, api_version, corr, client_id = -1, -1, -1, None
                name = self.recorder.record(frame, "request", api_key, api_version, corr, self.conn_id, client_id)
                with self.lock:
                    self.pending[corr] = (api_key, api_version, name)
                self.upstream.sendall(raw)
        except (OSError, ValueError) as e:
            print(f"proxy: conn {self.conn_id}: client side: {e}", file=sys.stderr)
        finally:
            shutdown(self.upstream, socket.SHUT_WR)
            self.direction_done()

    def responses(self):
        try:
            while True:
                raw, frame = read_frame(self.upstream)
                if frame is None:
                    if raw:
                        self.client.sendall(raw)
                    break
                corr = struct.unpack(">i", frame[:4])[0] if len(frame) >= 4 else -1
                with self.lock:
                    api_key, api_version, req = self.pending.pop(corr, (-1, -1, None))
                if req is None:
                    print(f"proxy: conn {self.conn_id}: response with unknown correlation id {corr}", file=sys.stderr)
                self.recorder.record(frame, "response", api_key, api_version, corr, self.conn_id, pair=req)
                self.client.sendall(raw)
        except (OSError, ValueError) as e:
            print(f"proxy: conn {self.conn_id}: broker side: {e}", file=sys.stderr)
        finally:
            shutdown(self.client, socket.SHUT_WR)
            self.direction_done()


def shutdown(sock, how):
    try:
        sock.shutdown(how)
    except OSError:
        pass


def serve(args):
    recorder = Recorder(args.out_dir, args.client)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.listen_port))
    listener.listen(64)
    print(f"proxy: {args.host}:{args.listen_port} -> {args.host}:{args.upstream_port}, recording to {args.out_dir}",
          file=sys.stderr, flush=True)

    def stop(signum, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    conn_id = 0
    while True:
        client_sock, _ = listener.accept()
        conn_id += 1
        try:
            upstream = socket.create_connection((args.host, args.upstream_port))
        except OSError as e:
            print(f"proxy: upstream connect failed: {e}", file=sys.stderr)
            client_sock.close()
            continue
        for s in (client_sock, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(recorder, client_sock, upstream, conn_id)
        threading.Thread(target=conn.requests, daemon=True).start()
        threading.Thread(target=conn.responses, daemon=True).start()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("listen_port", type=int)
    p.add_argument("upstream_port", type=int)
    p.add_argument("out_dir")
    p.add_argument("--client", default="unknown", help="name of the capturing client, for the manifest")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to listen on and connect to")
    serve(p.parse_args())


if __name__ == "__main__":
    main()
