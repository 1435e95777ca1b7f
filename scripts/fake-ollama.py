#!/usr/bin/env python3
"""A stand-in for Ollama's embedding API on 127.0.0.1, for scripts/faults.sh.

Speaks the wire format Oráculo's Ollama embedder uses: GET /api/tags, POST /api/embed
({"model", "input": [...]} -> {"model", "embeddings": [[...]]}). Vectors are bags of hashed
words (64 floats, normalised), so the same text always gets the same vector and texts sharing
words are near. Writes the port it listens on to the file named by its first argument.
While a file named SLOW exists beside that file, each embed request waits its content in
seconds (a slow model, so a kill lands mid-ingest).
"""

import hashlib
import json
import math
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMENSION = 64


def embedding(text):
    vector = [0.0] * DIMENSION
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMENSION] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class Quiet(ThreadingHTTPServer):
    """A client killed mid-reply (the kill fault) is expected: no traceback for it."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    slow_file = None

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/tags":
            self.reply(200, {"models": [{"name": "bge-m3:latest", "model": "bge-m3:latest", "size": 1, "digest": "0"}]})
        else:
            self.reply(404, {"error": "404 page not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.reply(400, {"error": "invalid JSON"})
            return
        if self.path != "/api/embed":
            self.reply(404, {"error": "404 page not found"})
            return
        if os.path.exists(Handler.slow_file):
            try:
                time.sleep(float(open(Handler.slow_file).read().strip() or "0.2"))
            except (OSError, ValueError):
                time.sleep(0.2)
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        self.reply(200, {"model": body.get("model", ""), "embeddings": [embedding(t) for t in inputs]})


def main():
    port_file = sys.argv[1]
    Handler.slow_file = os.path.join(os.path.dirname(os.path.abspath(port_file)), "SLOW")
    server = Quiet(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
